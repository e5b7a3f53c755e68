/**
 * "All items of one execution are handled in one round trip per statement": every statement
 * any pg client sends is recorded while a node executes, and the count must not grow with the
 * number of items.
 */
import type { IDataObject, INodeExecutionData, INodeType } from 'n8n-workflow';

import { IdempotencyCheck } from '../../nodes/IdempotencyCheck/IdempotencyCheck.node';
import { JobComplete } from '../../nodes/JobComplete/JobComplete.node';
import { JobEnqueue } from '../../nodes/JobEnqueue/JobEnqueue.node';
import { JobLease } from '../../nodes/JobLease/JobLease.node';
import { BEGIN } from '../../src/core/sql/transaction';
import { JobStatus } from '../../nodes/JobStatus/JobStatus.node';
import { OutboxWrite } from '../../nodes/OutboxWrite/OutboxWrite.node';
import { statementsSentDuring, useTestSchema } from '../helpers/db';
import { nodeRunner, type NodeContextOptions, type RunResult } from '../helpers/n8n-context';

const { schema, pool } = useTestSchema(__filename, { closeCachedPools: true });
const nodes = nodeRunner(schema);

beforeAll(async () => {
	// Warm-up: migrations, the status-token secret and the pool are set up once per process;
	// they are not part of a node execution's statements.
	await nodes.run(new JobEnqueue(), { items: [{ warm: 'up' }], parameters: { queue: 'warm-up' } });
});

const TRANSACTION_CONTROL = /^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b/i;

/** Runs the node and returns its result and the SQL text of every statement sent meanwhile. */
async function counted(
	nodeType: INodeType,
	options: NodeContextOptions,
): Promise<{ result: RunResult; statements: string[] }> {
	const ctx = nodes.create(nodeType, options);
	const { value: result, statements } = await statementsSentDuring(async () => await ctx.run());
	return { result, statements };
}

function dataStatements(statements: string[]): string[] {
	return statements.filter((text) => !TRANSACTION_CONTROL.test(text));
}

function items(count: number, make: (index: number) => IDataObject): IDataObject[] {
	return Array.from({ length: count }, (_, index) => make(index));
}

describe('one round trip per statement, whatever the number of items', () => {
	let leased: INodeExecutionData[];

	it('Job Enqueue: 1,000 items are one INSERT (inside BEGIN/COMMIT, since a bad item must roll the batch back)', async () => {
		const { result, statements } = await counted(new JobEnqueue(), {
			items: items(1000, (index) => ({ n: index, key: `bulk-${index}` })),
			parameters: { queue: 'bulk', idempotencyKey: '={{ $json.key }}' },
		});
		expect(result.output('main')).toHaveLength(1000);
		expect(new Set(result.output('main').map((item) => item.json.job_id)).size).toBe(1000);
		expect(statements).toHaveLength(3);
		expect(statements[0]).toBe(BEGIN);
		expect(statements[1]).toMatch(/INSERT INTO "djt_[0-9a-f]+"\.jobs/);
		expect(statements[2]).toBe('COMMIT');
		const { rows } = await pool.query(
			`SELECT count(*)::int AS n FROM "${schema}".jobs WHERE queue = 'bulk'`,
		);
		expect(rows[0].n).toBe(1000);
	});

	it('Job Enqueue with continue-on-fail: 1,000 items are one statement, no transaction', async () => {
		const { result, statements } = await counted(new JobEnqueue(), {
			items: items(1000, (index) => ({ n: index })),
			parameters: { queue: 'bulk-continue' },
			onError: 'continueErrorOutput',
		});
		expect(result.output('Success')).toHaveLength(1000);
		expect(statements).toHaveLength(1);
		expect(statements[0]).toMatch(/INSERT INTO/);
	});

	it('Job Enqueue: 1,000 retried items (all deduplicated) are still one statement', async () => {
		const { result, statements } = await counted(new JobEnqueue(), {
			items: items(1000, (index) => ({ n: index, key: `bulk-${index}` })),
			parameters: { queue: 'bulk', idempotencyKey: '={{ $json.key }}' },
		});
		expect(result.output('main').every((item) => item.json.deduplicated === true)).toBe(true);
		expect(dataStatements(statements)).toHaveLength(1);
	});

	it('Job Lease: 100 jobs are one statement', async () => {
		await nodes.run(new JobEnqueue(), {
			items: items(100, (index) => ({ n: index })),
			parameters: { queue: 'count-complete' },
		});
		const { result, statements } = await counted(new JobLease(), {
			parameters: { queue: 'count-complete', maxJobs: 100 },
		});
		leased = result.output('Leased');
		expect(leased).toHaveLength(100);
		expect(statements).toHaveLength(1);
	});

	it('Job Complete: 100 leased items are one statement', async () => {
		const { result, statements } = await counted(new JobComplete(), { items: leased });
		expect(result.output('Completed')).toHaveLength(100);
		expect(statements).toHaveLength(1);
		expect(statements[0]).toMatch(/UPDATE/);
	});

	it('Extend Lease: 100 items are one statement', async () => {
		const { result, statements } = await counted(new JobLease(), {
			items: leased,
			parameters: { operation: 'extendLease' },
		});
		// They were completed above, so the fence sends every item to Lease Lost.
		expect(result.output('Lease Lost')).toHaveLength(100);
		expect(statements).toHaveLength(1);
	});

	it('Idempotency Check: claiming 100 items is one statement; completing them is one more', async () => {
		const { result, statements } = await counted(new IdempotencyCheck(), {
			items: items(100, (index) => ({ event_id: `evt-${index}` })),
			parameters: { key: '={{ $json.event_id }}' },
		});
		expect(result.output('New')).toHaveLength(100);
		expect(statements).toHaveLength(1);
		const settled = await counted(new IdempotencyCheck(), {
			items: result.output('New'),
			parameters: { operation: 'complete' },
		});
		expect(settled.result.output('Settled')).toHaveLength(100);
		expect(settled.statements).toHaveLength(1);
		// A second delivery of all 100 (all duplicates) is still one statement.
		const again = await counted(new IdempotencyCheck(), {
			items: items(100, (index) => ({ event_id: `evt-${index}` })),
			parameters: { key: '={{ $json.event_id }}' },
		});
		expect(again.result.output('Duplicate')).toHaveLength(100);
		expect(again.statements).toHaveLength(1);
	});

	it('Job Status: getting 50 jobs is two statements (jobs, then their attempts)', async () => {
		const enqueued = (
			await nodes.run(new JobEnqueue(), {
				items: items(50, (index) => ({ n: index })),
				parameters: { queue: 'count-status' },
			})
		).output('main');
		// Half of the lookups use a wrong token; they must cost the same statements.
		const lookups = enqueued.map((item, index) => ({
			job_id: item.json.job_id,
			status_token: index % 2 === 0 ? item.json.status_token : 'wrong',
		}));
		const { result, statements } = await counted(new JobStatus(), { items: lookups });
		expect(result.output('Found')).toHaveLength(25);
		expect(result.output('Not Found')).toHaveLength(25);
		expect(statements).toHaveLength(2);
	});

	it('Outbox Write: 100 events without companion SQL are one INSERT', async () => {
		const { result, statements } = await counted(new OutboxWrite(), {
			items: items(100, (index) => ({ id: index })),
			parameters: { eventType: 'bulk.event' },
		});
		expect(result.output('main')).toHaveLength(100);
		expect(dataStatements(statements)).toHaveLength(1);
		expect(statements.filter((text) => TRANSACTION_CONTROL.test(text))).toEqual([BEGIN, 'COMMIT']);
	});
});
