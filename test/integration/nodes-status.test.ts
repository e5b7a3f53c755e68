import { NodeOperationError, type IDataObject } from 'n8n-workflow';
import { v7 as uuidv7 } from 'uuid';

import { JobComplete } from '../../nodes/JobComplete/JobComplete.node';
import { JobStatus } from '../../nodes/JobStatus/JobStatus.node';
import { tableSnapshot, useTestSchema } from '../helpers/db';
import { nodeRunner, webhookItem } from '../helpers/n8n-context';
import { itemOfJob, nodeJobs } from '../helpers/node-jobs';

const { schema, pool } = useTestSchema(__filename, { closeCachedPools: true });
const nodes = nodeRunner(schema);

const { enqueue, leaseAll } = nodeJobs(nodes);

/** A GET /webhook/jobs/status?job_id=…&token=… request, as the Webhook node outputs it. */
function statusRequest(jobId: unknown, token: unknown): IDataObject {
	return webhookItem({}, {}, { query: { job_id: jobId as string, token: token as string } });
}

async function jobRow(id: unknown) {
	return (
		await pool.query(
			`SELECT status, attempts, max_attempts, error_code, error_class FROM "${schema}".jobs WHERE id = $1`,
			[id],
		)
	).rows[0];
}

describe('Job Status: Get', () => {
	let job: IDataObject;

	it('with the right token: Found, with status and timeline, from the default expressions on a webhook query', async () => {
		[job] = await enqueue('status', [{ doc: 'secret-personal-data.pdf' }], {
			correlationId: 'corr-s',
		});
		const result = await nodes.run(new JobStatus(), {
			items: [statusRequest(job.job_id, job.status_token)],
		});
		expect(result.outputNames).toEqual(['Found', 'Not Found']);
		expect(result.output('Not Found')).toEqual([]);
		const [found] = result.output('Found');
		expect(found.pairedItem).toEqual({ item: 0 });
		expect(found.json).toMatchObject({
			found: true,
			job_id: job.job_id,
			queue: 'status',
			status: 'queued',
			attempts: 0,
			max_attempts: 5,
			result: null,
			error: null,
			timeline: [],
			correlation_id: 'corr-s',
		});
		// The status view never carries the payload or the token hash.
		expect(JSON.stringify(found.json)).not.toContain('secret-personal-data');
		expect(found.json).not.toHaveProperty('status_token_hash');
	});

	it('after a lease and a completion the timeline shows the attempt and the result is shown', async () => {
		const [leased] = await leaseAll('status');
		await nodes.run(new JobComplete(), {
			items: [leased],
			parameters: { resultSource: 'custom', result: '={{ { crm_id: "crm-1" } }}' },
		});
		const [found] = (
			await nodes.run(new JobStatus(), {
				items: [{ job_id: job.job_id, status_token: job.status_token }],
			})
		).output('Found');
		expect(found.json).toMatchObject({
			status: 'done',
			attempts: 1,
			result: { crm_id: 'crm-1' },
			error: null,
		});
		expect(found.json.timeline).toEqual([
			{
				attempt: 1,
				started_at: expect.any(String),
				finished_at: expect.any(String),
				outcome: 'succeeded',
				error_code: null,
			},
		]);
	});

	it('a wrong token answers exactly like an unknown job id, a malformed id or a missing token', async () => {
		const lookups = [
			statusRequest(job.job_id, 'wrong-token-wrong-token-wrong-token-wrong-t'),
			statusRequest(uuidv7(), job.status_token),
			statusRequest('not-a-uuid', job.status_token),
			statusRequest(job.job_id, ''),
			{ job_id: job.job_id },
			statusRequest(String(job.job_id).toUpperCase(), job.status_token),
		];
		const result = await nodes.run(new JobStatus(), { items: lookups });
		expect(result.routing()).toEqual({ Found: [5], 'Not Found': [0, 1, 2, 3, 4] });
		const notFound = result.output('Not Found').map((item) => item.json);
		expect(notFound).toEqual(
			Array.from({ length: 5 }, () => ({ found: false, status: 'not_found' })),
		);
	});

	it('a failed job shows its error and class', async () => {
		const [failing] = await enqueue('status-fail', [{ n: 1 }]);
		const [leased] = await leaseAll('status-fail');
		await nodes.run(new JobComplete(), {
			items: [leased],
			parameters: {
				outcome: 'failed',
				errorCode: 'crm_rejected',
				errorMessage: 'Missing VAT id',
				errorClass: 'needs_mapping',
			},
		});
		const [found] = (await nodes.run(new JobStatus(), { items: [failing] })).output('Found');
		expect(found.json).toMatchObject({
			status: 'failed',
			result: null,
			error: { code: 'crm_rejected', message: 'Missing VAT id', class: 'needs_mapping' },
		});
		expect((found.json.timeline as IDataObject[])[0]).toMatchObject({
			outcome: 'failed',
			error_code: 'crm_rejected',
		});
		expect(found.json.cancel_reason).toBeNull();
	});

	it('a cancelled job shows its reason as cancel_reason, and no error', async () => {
		const [job] = await enqueue('status-cancel', [{ n: 1 }]);
		await nodes.run(new JobStatus(), {
			items: [{ job_id: job.job_id }],
			parameters: { operation: 'cancel', reason: 'customer withdrew' },
		});
		const [found] = (await nodes.run(new JobStatus(), { items: [job] })).output('Found');
		expect(found.json).toMatchObject({
			status: 'cancelled',
			result: null,
			error: null,
			cancel_reason: 'customer withdrew',
		});
	});
});

describe('Job Status: operations', () => {
	it('Queue Stats counts by status, with oldest waiting age', async () => {
		await enqueue('stats', [{ n: 1 }, { n: 2 }, { n: 3 }]);
		await leaseAll('stats').then(
			async (leased) => await nodes.run(new JobComplete(), { items: [leased[0]] }),
		);
		const result = await nodes.run(new JobStatus(), {
			parameters: { operation: 'stats', queue: 'stats' },
		});
		expect(result.outputNames).toEqual(['main']);
		const [stats] = result.output('main');
		expect(stats.pairedItem).toEqual({ item: 0 });
		expect(stats.json).toMatchObject({
			queue: 'stats',
			queued: 0,
			running: 2,
			done: 1,
			failed: 0,
			dead_letter: 0,
		});
		expect(Date.parse(String(stats.json.checked_at))).toBeGreaterThan(Date.now() - 60_000);
		// All queues when Queue is empty.
		const all = (await nodes.run(new JobStatus(), { parameters: { operation: 'stats' } }))
			.output('main')
			.map((item) => item.json.queue);
		expect(all).toEqual(expect.arrayContaining(['stats', 'status', 'status-fail']));
	});

	describe('Requeue', () => {
		let failedIds: string[];

		beforeAll(async () => {
			const jobs = await enqueue('replay', [{ n: 1 }, { n: 2 }, { n: 3 }], { maxAttempts: 1 });
			failedIds = jobs.map((entry) => String(entry.job_id));
			const leased = await leaseAll('replay');
			const items = leased.map((item) => ({
				json: { ...item.json, code: item.json.job_id === failedIds[2] ? 400 : 503 },
			}));
			// 503 on the last attempt → failed (retryable); 400 → failed (needs_mapping).
			await nodes.run(new JobComplete(), {
				items,
				parameters: { outcome: 'httpStatus', httpStatus: '={{ $json.code }}' },
			});
		});

		it('by filter without the confirm toggle is an error and requeues nothing', async () => {
			const before = await tableSnapshot(pool, schema);
			const parameters = { operation: 'requeue', selectBy: 'filter', filterQueue: 'replay' };
			const error = (await nodes
				.run(new JobStatus(), { parameters })
				.catch((caught: unknown) => caught)) as NodeOperationError;
			expect(error).toBeInstanceOf(NodeOperationError);
			expect(error.message).toBe('confirm: requeue by filter must be confirmed');
			expect(error.description).toMatch(/Turn on "Confirm Requeue by Filter".*Field: confirm/);
			const routed = await nodes.run(new JobStatus(), {
				parameters,
				onError: 'continueErrorOutput',
			});
			expect(routed.routing()).toEqual({ Success: [], Error: [0] });
			expect(routed.output('Error')[0].json).toMatchObject({
				details: { field: 'confirm', http_status: 400 },
			});
			expect(await tableSnapshot(pool, schema)).toEqual(before);
		});

		it('by filter with confirm replays the matching class only, up to the limit', async () => {
			const result = await nodes.run(new JobStatus(), {
				parameters: {
					operation: 'requeue',
					selectBy: 'filter',
					filterQueue: 'replay',
					filterErrorClass: 'retryable',
					confirm: true,
					maxJobs: 1,
					additionalAttempts: 2,
				},
			});
			const requeued = result.output('main');
			expect(requeued).toHaveLength(1);
			expect(requeued[0].json).toMatchObject({
				queue: 'replay',
				status: 'queued',
				attempts: 1,
				max_attempts: 3,
				requeued: true,
			});
			expect(failedIds.slice(0, 2)).toContain(requeued[0].json.id);
			expect(await jobRow(failedIds[2])).toMatchObject({
				status: 'failed',
				error_class: 'needs_mapping',
			});
		});

		it('by ids replays exactly those jobs, each output item paired with the item that named it', async () => {
			const stillFailed = [];
			for (const id of failedIds) if ((await jobRow(id)).status === 'failed') stillFailed.push(id);
			expect(stillFailed).toHaveLength(2);
			const result = await nodes.run(new JobStatus(), {
				items: stillFailed.map((id) => ({ job_id: id })),
				parameters: { operation: 'requeue' },
			});
			const requeued = result.output('main');
			expect(requeued.map((item) => [item.json.id, item.pairedItem])).toEqual(
				expect.arrayContaining(stillFailed.map((id, index) => [id, { item: index }])),
			);
			expect(requeued).toHaveLength(2);
			for (const item of requeued) expect(item.json.requeued).toBe(true);
			for (const id of failedIds) expect((await jobRow(id)).status).toBe('queued');
		});

		it('by ids answers every id: a job that is not failed, or no job at all, gets requeued: false', async () => {
			const [queued] = await enqueue('requeue-mixed', [{ n: 1 }]);
			const unknown = '0190d1a2-0000-7000-8000-0000000000ab';
			const result = await nodes.run(new JobStatus(), {
				items: [{ job_id: queued.job_id }, { job_id: unknown }],
				parameters: { operation: 'requeue' },
			});
			expect(result.output('main').map((item) => [item.json, item.pairedItem])).toEqual([
				[
					{
						job_id: queued.job_id,
						id: queued.job_id,
						queue: 'requeue-mixed',
						status: 'queued',
						attempts: 0,
						max_attempts: 5,
						requeued: false,
					},
					{ item: 0 },
				],
				[
					{
						job_id: unknown,
						id: unknown,
						queue: null,
						status: null,
						attempts: null,
						max_attempts: null,
						requeued: false,
					},
					{ item: 1 },
				],
			]);
			expect(await jobRow(queued.job_id)).toMatchObject({ status: 'queued', attempts: 0 });
		});
	});

	describe('Cancel', () => {
		it('cancels queued and running jobs per item; finished ones report cancelled: false', async () => {
			const [queued, running, done] = (await enqueue('cancel', [{ n: 1 }, { n: 2 }, { n: 3 }])).map(
				(entry) => String(entry.job_id),
			);
			const leased = await leaseAll('cancel');
			const byId = itemOfJob(leased);
			await nodes.run(new JobComplete(), { items: [byId(done)] });
			// Job 1 is given back, so it is queued again; job 2 stays running.
			await nodes.run(new JobComplete(), {
				items: [byId(queued)],
				parameters: { outcome: 'release' },
			});

			const result = await nodes.run(new JobStatus(), {
				items: [{ job_id: queued }, { job_id: running }, { job_id: done }],
				parameters: { operation: 'cancel', reason: 'customer withdrew' },
			});
			const rows = Object.fromEntries(result.output('main').map((item) => [item.json.id, item]));
			expect(rows[queued].json).toMatchObject({ cancelled: true, status: 'cancelled' });
			expect(rows[queued].pairedItem).toEqual({ item: 0 });
			expect(rows[running].json).toMatchObject({ cancelled: true, status: 'cancelled' });
			expect(rows[running].pairedItem).toEqual({ item: 1 });
			expect(rows[done].json).toMatchObject({ cancelled: false, status: 'done' });
			expect(rows[done].pairedItem).toEqual({ item: 2 });
			expect(await jobRow(running)).toMatchObject({
				status: 'cancelled',
				error_code: 'cancelled',
				error_class: 'discarded',
			});

			// The cancelled job's worker is fenced out.
			const late = await nodes.run(new JobComplete(), { items: [byId(running)] });
			expect(late.routing()).toEqual({ Completed: [], 'Lease Lost': [0] });
			expect(late.output('Lease Lost')[0].json).toMatchObject({
				reason: 'job_cancelled',
				current_status: 'cancelled',
			});
		});

		it('an item that names no job is an error of that item, not silently left out', async () => {
			const [first, second] = await enqueue('cancel-missing', [{ n: 1 }, { n: 2 }]);
			const before = await tableSnapshot(pool, schema);
			const error = (await nodes
				.run(new JobStatus(), {
					items: [{ job_id: first.job_id }, { other: 1 }, { job_id: second.job_id }],
					parameters: { operation: 'cancel' },
				})
				.catch((caught: unknown) => caught)) as NodeOperationError;
			expect(error).toBeInstanceOf(NodeOperationError);
			expect(error.message).toBe('jobIds: no job IDs given');
			expect(error.context.itemIndex).toBe(1);
			expect(await tableSnapshot(pool, schema)).toEqual(before);

			const routed = await nodes.run(new JobStatus(), {
				items: [{ job_id: first.job_id }, { other: 1 }, { job_id: second.job_id }],
				parameters: { operation: 'cancel' },
				onError: 'continueErrorOutput',
			});
			expect(routed.routing()).toEqual({ Success: [0, 2], Error: [1] });
			expect((await jobRow(first.job_id)).status).toBe('cancelled');
			expect((await jobRow(second.job_id)).status).toBe('cancelled');
		});

		it('a Reason whose expression fails names item 0, and with "continue" fails every item', async () => {
			const [first, second] = await enqueue('cancel-reason', [{ n: 1 }, { n: 2 }]);
			const before = await tableSnapshot(pool, schema);
			const parameters = { operation: 'cancel', reason: "={{ $('No Such Node').item.json.why }}" };
			const items = [{ job_id: first.job_id }, { job_id: second.job_id }];
			const error = (await nodes
				.run(new JobStatus(), { items, parameters })
				.catch((caught: unknown) => caught)) as NodeOperationError;
			expect(error).toBeInstanceOf(NodeOperationError);
			expect(error.context.itemIndex).toBe(0);
			expect(await tableSnapshot(pool, schema)).toEqual(before);

			const routed = await nodes.run(new JobStatus(), {
				items,
				parameters,
				onError: 'continueErrorOutput',
			});
			expect(routed.routing()).toEqual({ Success: [], Error: [0, 1] });
			expect(await tableSnapshot(pool, schema)).toEqual(before);
		});

		it('a malformed id names the item that carried it and cancels nothing', async () => {
			const [ok] = await enqueue('cancel-bad', [{ n: 1 }]);
			const before = await tableSnapshot(pool, schema);
			const error = (await nodes
				.run(new JobStatus(), {
					items: [{ job_id: ok.job_id }, { job_id: 'drop table jobs' }],
					parameters: { operation: 'cancel' },
				})
				.catch((caught: unknown) => caught)) as NodeOperationError;
			expect(error).toBeInstanceOf(NodeOperationError);
			expect(error.message).toMatch(/"drop table jobs" is not a valid id/);
			expect(error.context.itemIndex).toBe(1);
			expect(await tableSnapshot(pool, schema)).toEqual(before);

			// With continue, only that item fails; the other is cancelled.
			const routed = await nodes.run(new JobStatus(), {
				items: [{ job_id: ok.job_id }, { job_id: 'drop table jobs' }],
				parameters: { operation: 'cancel' },
				onError: 'continueErrorOutput',
			});
			expect(routed.routing()).toEqual({ Success: [0], Error: [1] });
			expect(routed.output('Error')[0].json).toMatchObject({
				job_id: 'drop table jobs',
				details: { field: 'jobIds', http_status: 400 },
			});
			expect((await jobRow(ok.job_id)).status).toBe('cancelled');
		});

		it('no ids at all is an error naming Job IDs', async () => {
			const error = (await nodes
				.run(new JobStatus(), { items: [{ other: 1 }], parameters: { operation: 'cancel' } })
				.catch((caught: unknown) => caught)) as NodeOperationError;
			expect(error).toBeInstanceOf(NodeOperationError);
			expect(error.message).toBe('jobIds: no job IDs given');
		});
	});

	it('Purge deletes finished jobs older than the retention, per status', async () => {
		const [old] = await enqueue('purge', [{ n: 1 }]);
		await nodes.run(new JobStatus(), { items: [old], parameters: { operation: 'cancel' } });
		await pool.query(
			`UPDATE "${schema}".jobs SET finished_at = now() - interval '10 days' WHERE id = $1`,
			[old.job_id],
		);
		const kept = (
			await nodes.run(new JobStatus(), {
				parameters: { operation: 'purge', queue: 'purge', olderThanDays: 30 },
			})
		).output('main')[0].json;
		expect(kept).toMatchObject({ deleted: 0 });
		const purged = (
			await nodes.run(new JobStatus(), {
				parameters: { operation: 'purge', queue: 'purge', olderThanDays: 7 },
			})
		).output('main')[0].json;
		expect(purged).toMatchObject({ deleted: 1, cancelled: 1, done: 0 });
		expect(await jobRow(old.job_id)).toBeUndefined();
	});

	it('Purge with no status chosen is an error naming Statuses, and deletes nothing (not every status)', async () => {
		const [failed] = await enqueue('purge-none', [{ n: 1 }]);
		await pool.query(
			`UPDATE "${schema}".jobs SET status = 'failed', finished_at = now() - interval '10 days',
				error_code = 'boom', error_class = 'retryable' WHERE id = $1`,
			[failed.job_id],
		);
		const error = (await nodes
			.run(new JobStatus(), {
				parameters: { operation: 'purge', queue: 'purge-none', olderThanDays: 7, statuses: [] },
			})
			.catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.message).toBe('Statuses: no status is chosen, so nothing would be purged');
		expect(error.description).toMatch(/Choose at least one of Done, Failed and Cancelled/);
		expect((await jobRow(failed.job_id))?.status).toBe('failed');

		// An expression may give the statuses as comma-separated text.
		const purged = (
			await nodes.run(new JobStatus(), {
				parameters: {
					operation: 'purge',
					queue: 'purge-none',
					olderThanDays: 7,
					statuses: "={{ 'done, failed' }}",
				},
			})
		).output('main')[0].json;
		expect(purged).toMatchObject({ deleted: 1, failed: 1 });
		expect(await jobRow(failed.job_id)).toBeUndefined();
	});
});
