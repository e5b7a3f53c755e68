import type { IDataObject, INodeExecutionData } from 'n8n-workflow';

import { IdempotencyCheck } from '../../nodes/IdempotencyCheck/IdempotencyCheck.node';
import { JobComplete } from '../../nodes/JobComplete/JobComplete.node';
import { JobEnqueue } from '../../nodes/JobEnqueue/JobEnqueue.node';
import { JobLease } from '../../nodes/JobLease/JobLease.node';
import { freePort } from '../../scripts/lib/postgres';
import { databaseUrl, useTestSchema } from '../helpers/db';
import { credentialFor, nodeRunner, type OnError } from '../helpers/n8n-context';

/*
 * On Error → Continue (regular output) keeps a failed item in the node's outputs. A node whose
 * first output means "go on" (Extended, Completed, New, Settled) must not put it there: the workflow would call the
 * CRM as if it still held the lease or had claimed the key. These runs fail items for real (a
 * malformed id, a key over the limit, a database nobody listens on) and read where they went.
 */

const { schema, pool } = useTestSchema(__filename, { closeCachedPools: true });
const nodes = nodeRunner(schema);

let unreachable: ReturnType<typeof credentialFor>;
beforeAll(async () => {
	unreachable = credentialFor(databaseUrl(), schema, { port: await freePort() });
});

function failed(items: INodeExecutionData[]): IDataObject[] {
	return items.filter((item) => item.json.error !== undefined).map((item) => item.json);
}

async function leasedJob(queue: string): Promise<IDataObject> {
	await nodes.run(new JobEnqueue(), { items: [{ n: 1 }], parameters: { queue } });
	const leased = await nodes.run(new JobLease(), {
		items: [{}],
		parameters: { queue, leaseSeconds: 60 },
	});
	return leased.output('Leased')[0].json;
}

async function extend(items: IDataObject[], onError: OnError, credential = {}) {
	return await nodes.run(new JobLease(), {
		items,
		parameters: { operation: 'extendLease', leaseSeconds: 120 },
		onError,
		...credential,
	});
}

describe('On Error → Continue (regular output): a failed item goes to the output that stops the work', () => {
	it('Extend Lease: a malformed attempt ID goes to Lease Lost, the good item to Extended', async () => {
		const job = await leasedJob('continue-extend');
		const result = await extend(
			[job, { ...job, attempt_id: 'not-an-id' }],
			'continueRegularOutput',
		);
		expect(result.outputNames).toEqual(['Extended', 'Lease Lost']);
		expect(result.routing()).toEqual({ Extended: [0], 'Lease Lost': [1] });
		expect(failed(result.output('Extended'))).toEqual([]);
		expect(failed(result.output('Lease Lost'))).toEqual([
			expect.objectContaining({ details: expect.objectContaining({ code: 'invalid_input' }) }),
		]);

		// With the error output, the same item goes there instead.
		const withErrorOutput = await extend(
			[job, { ...job, attempt_id: 'not-an-id' }],
			'continueErrorOutput',
		);
		expect(withErrorOutput.routing()).toEqual({ Extended: [0], 'Lease Lost': [], Error: [1] });
	});

	it('Extend Lease: with the database unreachable, every item goes to Lease Lost', async () => {
		const job = await leasedJob('continue-extend-down');
		const result = await extend([job, job], 'continueRegularOutput', { credential: unreachable });
		expect(result.routing()).toEqual({ Extended: [], 'Lease Lost': [0, 1] });
		expect(
			failed(result.output('Lease Lost')).map((json) => (json.details as IDataObject).code),
		).toEqual(['database_unavailable', 'database_unavailable']);
	});

	it('Job Lease: with the database unreachable, the item goes to Empty, not Leased', async () => {
		const result = await nodes.run(new JobLease(), {
			items: [{}],
			parameters: { queue: 'continue-lease', leaseSeconds: 60 },
			onError: 'continueRegularOutput',
			credential: unreachable,
		});
		expect(result.routing()).toEqual({ Leased: [], Empty: [0] });
		expect(failed(result.output('Empty'))).toHaveLength(1);
	});

	it('Job Complete: a malformed attempt ID goes to Lease Lost, the good item to Completed', async () => {
		const job = await leasedJob('continue-complete');
		const result = await nodes.run(new JobComplete(), {
			items: [{ ...job, attempt_id: 'not-an-id' }, job],
			parameters: { outcome: 'succeeded' },
			onError: 'continueRegularOutput',
		});
		expect(result.routing()).toEqual({ Completed: [1], 'Lease Lost': [0] });
		expect(failed(result.output('Completed'))).toEqual([]);
		expect(failed(result.output('Lease Lost'))).toHaveLength(1);
		const { rows } = await pool.query(`SELECT status FROM "${schema}".jobs WHERE id = $1`, [
			job.job_id,
		]);
		expect(rows).toEqual([{ status: 'done' }]);
	});

	it('Idempotency Check Complete: an item without a claim ID goes to Claim Lost, the claimed one is Settled', async () => {
		const claimed = await nodes.run(new IdempotencyCheck(), {
			items: [{ event_id: 'continue-settle' }],
			parameters: { scope: 'continue', key: '={{ $json.event_id }}' },
		});
		const newItem = claimed.output('New')[0].json;
		const result = await nodes.run(new IdempotencyCheck(), {
			items: [
				newItem,
				{ ...newItem, idempotency: { ...(newItem.idempotency as IDataObject), claim_id: '' } },
			],
			parameters: {
				operation: 'complete',
				scope: 'continue',
				key: '={{ $json.event_id }}',
				result: '={{ { done: true } }}',
			},
			onError: 'continueRegularOutput',
		});
		expect(result.routing()).toEqual({ Settled: [0], 'Claim Lost': [1] });
		expect(failed(result.output('Claim Lost'))).toEqual([
			expect.objectContaining({ details: expect.objectContaining({ field: 'Claim ID' }) }),
		]);
	});

	it('Idempotency Check Claim: a key over the limit goes to In Progress, claims nothing, and the good item is New', async () => {
		const result = await nodes.run(new IdempotencyCheck(), {
			items: [{ event_id: 'continue-1' }, { event_id: 'k'.repeat(300) }],
			parameters: { scope: 'continue', key: '={{ $json.event_id }}' },
			onError: 'continueRegularOutput',
		});
		expect(result.routing()).toEqual({
			New: [0],
			Duplicate: [],
			'In Progress': [1],
			Conflict: [],
		});
		expect(failed(result.output('New'))).toEqual([]);
		expect(failed(result.output('In Progress'))).toEqual([
			expect.objectContaining({ details: expect.objectContaining({ field: 'key' }) }),
		]);
		const { rows } = await pool.query(
			`SELECT key FROM "${schema}".idempotency_keys WHERE scope = 'continue' AND key <> 'continue-settle'`,
		);
		expect(rows).toEqual([{ key: 'continue-1' }]);
	});

	it('Idempotency Check Claim: with the database unreachable, every item goes to In Progress', async () => {
		const result = await nodes.run(new IdempotencyCheck(), {
			items: [{ event_id: 'continue-2' }, { event_id: 'continue-3' }],
			parameters: { scope: 'continue', key: '={{ $json.event_id }}' },
			onError: 'continueRegularOutput',
			credential: unreachable,
		});
		expect(result.routing()).toEqual({
			New: [],
			Duplicate: [],
			'In Progress': [0, 1],
			Conflict: [],
		});
		expect(failed(result.output('In Progress'))).toHaveLength(2);
	});
});
