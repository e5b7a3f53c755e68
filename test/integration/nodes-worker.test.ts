import { NodeOperationError, type IDataObject, type INodeExecutionData } from 'n8n-workflow';

import { JobComplete } from '../../nodes/JobComplete/JobComplete.node';
import { JobEnqueue } from '../../nodes/JobEnqueue/JobEnqueue.node';
import { JobLease } from '../../nodes/JobLease/JobLease.node';
import { JobStatus } from '../../nodes/JobStatus/JobStatus.node';
import { tableSnapshot, useTestSchema } from '../helpers/db';
import { nodeRunner } from '../helpers/n8n-context';
import { itemOfJob } from '../helpers/node-jobs';

const { schema, pool } = useTestSchema(__filename, { closeCachedPools: true });
const nodes = nodeRunner(schema);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function enqueue(
	queue: string,
	payloads: IDataObject[],
	options: IDataObject = {},
): Promise<string[]> {
	const result = await nodes.run(new JobEnqueue(), {
		items: payloads,
		parameters: { queue, options },
	});
	return result.output('main').map((item) => String(item.json.job_id));
}

/** A Schedule Trigger feeds Job Lease one item. */
async function lease(
	queue: string,
	parameters: IDataObject = {},
	executionId = `dispatch-${queue}`,
) {
	return await nodes.run(new JobLease(), {
		items: [{ timestamp: new Date().toISOString() }],
		parameters: { queue, leaseSeconds: 60, ...parameters },
		executionId,
		workflowId: 'wf-dispatcher',
	});
}

async function job(id: string) {
	const { rows } = await pool.query(`SELECT * FROM "${schema}".jobs WHERE id = $1`, [id]);
	return rows[0];
}

async function attempts(id: string) {
	const { rows } = await pool.query(
		`SELECT attempt_id, attempt, workflow_id, execution_id, outcome, error_code, finished_at FROM "${schema}".job_attempts WHERE job_id = $1 ORDER BY attempt`,
		[id],
	);
	return rows;
}

describe('Job Lease → Job Complete', () => {
	let ids: string[];
	let leased: INodeExecutionData[];

	it('Lease gives each job as an item with everything the worker needs; the key for external calls is the job id', async () => {
		ids = await enqueue('work', [{ doc: 'a.pdf' }, { doc: 'b.pdf' }], {
			maxAttempts: 4,
			correlationId: 'corr-1',
		});
		const before = Date.now();
		const result = await lease('work', { maxJobs: 10 }, 'exec-lease-1');
		expect(result.outputNames).toEqual(['Leased', 'Empty']);
		expect(result.output('Empty')).toEqual([]);
		leased = result.output('Leased');
		expect(leased.map((item) => item.json.job_id)).toEqual(ids);
		expect(leased.map((item) => item.pairedItem)).toEqual([{ item: 0 }, { item: 0 }]);
		for (const [index, item] of leased.entries()) {
			expect(item.json).toMatchObject({
				job_id: ids[index],
				attempt: 1,
				max_attempts: 4,
				queue: 'work',
				payload: [{ doc: 'a.pdf' }, { doc: 'b.pdf' }][index],
				idempotency_key: ids[index],
				correlation_id: 'corr-1',
				recovered: false,
				lease_seconds: 60,
			});
			expect(item.json.attempt_id).toMatch(UUID);
			expect(item.json.attempt_id).not.toBe(item.json.job_id);
			const leaseUntil = Date.parse(String(item.json.lease_until));
			expect(leaseUntil).toBeGreaterThanOrEqual(before + 59_000);
			expect(leaseUntil).toBeLessThanOrEqual(Date.now() + 61_000);
		}
		expect(new Set(leased.map((item) => item.json.attempt_id)).size).toBe(2);
	});

	it('the attempt history records the n8n workflow and execution that leased the job', async () => {
		for (const [index, id] of ids.entries()) {
			expect(await attempts(id)).toEqual([
				expect.objectContaining({
					attempt_id: leased[index].json.attempt_id,
					attempt: 1,
					workflow_id: 'wf-dispatcher',
					execution_id: 'exec-lease-1',
					outcome: null,
				}),
			]);
			expect(await job(id)).toMatchObject({
				status: 'running',
				attempt_id: leased[index].json.attempt_id,
				attempts: 1,
			});
		}
	});

	it('Include Job Metadata off: each item holds the job id, attempt and payload (and what Extend Lease and Job Complete read), no metadata', async () => {
		const [id] = await enqueue('lean', [{ doc: 'c.pdf' }], { correlationId: 'corr-2' });
		const result = await lease('lean', { options: { includeMetadata: false } }, 'exec-lean');
		const [item] = result.output('Leased');
		expect(item.json).toEqual({
			job_id: id,
			attempt_id: expect.stringMatching(UUID),
			attempt: 1,
			max_attempts: expect.any(Number),
			queue: 'lean',
			payload: { doc: 'c.pdf' },
			lease_seconds: 60,
			idempotency_key: id,
			recovered: false,
		});
		const complete = await nodes.run(new JobComplete(), {
			items: [item.json],
			parameters: { outcome: 'succeeded' },
		});
		expect(complete.output('Completed')).toHaveLength(1);
		expect(await job(id)).toMatchObject({ status: 'done', correlation_id: 'corr-2' });
	});

	it('Include Job Metadata from an expression: "false" turns it off, anything but true or false is refused by name and leases nothing', async () => {
		const [id] = await enqueue('lean-expression', [{ doc: 'd.pdf' }]);
		const refused = (await lease('lean-expression', { options: { includeMetadata: 'no' } }).catch(
			(caught: unknown) => caught,
		)) as NodeOperationError;
		expect(refused).toBeInstanceOf(NodeOperationError);
		expect(refused.message).toMatch(/Include Job Metadata: "no" is not true or false/);
		expect(await job(id)).toMatchObject({ status: 'queued', attempts: 0 });
		const result = await lease('lean-expression', { options: { includeMetadata: 'false' } });
		const [item] = result.output('Leased');
		expect(item.json).toMatchObject({ job_id: id, payload: { doc: 'd.pdf' } });
		expect(item.json).not.toHaveProperty('created_at');
	});

	it('Max Jobs and Concurrency Limit from expressions that give nothing: the field defaults (10, no limit), not the core default of 1', async () => {
		await enqueue(
			'empty-limits',
			Array.from({ length: 12 }, (_, n) => ({ n })),
		);
		const result = await lease('empty-limits', {
			maxJobs: "={{ $json.missing ?? '' }}",
			concurrencyLimit: '={{ $json.missing }}',
		});
		expect(result.output('Leased')).toHaveLength(10);
	});

	it('nothing due: one item on Empty, nothing on Leased', async () => {
		const result = await lease('work');
		expect(result.output('Leased')).toEqual([]);
		expect(result.output('Empty')).toEqual([
			{ json: { queue: 'work', leased: 0 }, pairedItem: { item: 0 } },
		]);
	});

	it('Job Complete with default parameters reads job_id / attempt_id from the lease items and stores the item as result', async () => {
		const worked = leased.map((item) => ({
			json: { ...item.json, crm_id: `crm-${String(item.json.job_id).slice(-4)}` },
			pairedItem: { item: 0 },
		}));
		const result = await nodes.run(new JobComplete(), {
			items: worked,
			executionId: 'exec-worker-1',
		});
		expect(result.outputNames).toEqual(['Completed', 'Lease Lost']);
		expect(result.output('Lease Lost')).toEqual([]);
		const completed = result.output('Completed');
		expect(completed.map((item) => item.pairedItem)).toEqual([{ item: 0 }, { item: 1 }]);
		for (const [index, item] of completed.entries()) {
			expect(item.json).toMatchObject({
				job_id: ids[index],
				attempt_id: leased[index].json.attempt_id,
				outcome: 'succeeded',
				status: 'done',
				attempts: 1,
				next_run_at: null,
				error_code: null,
			});
			const row = await job(ids[index]);
			expect(row).toMatchObject({ status: 'done', result: worked[index].json });
			expect(row.finished_at).not.toBeNull();
			expect((await attempts(ids[index]))[0]).toMatchObject({ outcome: 'succeeded' });
		}
	});

	it('completing the same attempt twice routes to Lease Lost (the job is already done) and changes nothing', async () => {
		const before = await tableSnapshot(pool, schema);
		const result = await nodes.run(new JobComplete(), { items: leased.slice(0, 1) });
		expect(result.output('Completed')).toEqual([]);
		expect(result.output('Lease Lost')).toEqual([
			{
				json: {
					job_id: ids[0],
					attempt_id: leased[0].json.attempt_id,
					outcome: 'succeeded',
					lease_lost: true,
					reason: 'job_done',
					current_status: 'done',
				},
				pairedItem: { item: 0 },
			},
		]);
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	it('outcome From HTTP Status: 503 → retry (queued again with backoff), 400 → failed, needs_mapping', async () => {
		const [transient, contract] = await enqueue('http', [{ n: 1 }, { n: 2 }]);
		const items = (await lease('http')).output('Leased').map((item) => ({
			json: { ...item.json, statusCode: item.json.job_id === transient ? 503 : 400 },
		}));
		const result = await nodes.run(new JobComplete(), {
			items,
			parameters: {
				outcome: 'httpStatus',
				httpStatus: '={{ $json.statusCode }}',
				errorMessage: '={{ "CRM answered " + $json.statusCode }}',
				options: { errorNode: 'Create CRM Record' },
			},
			executionId: 'exec-worker-2',
		});
		const completed = itemOfJob(result.output('Completed'));
		expect(completed(transient).json).toMatchObject({
			outcome: 'retry',
			status: 'queued',
			error_code: 'http_503',
			error_class: 'retryable',
			attempts: 1,
		});
		// Default backoff: base 5 s, first retry waits between 2.5 and 5 s.
		const due = Date.parse(String(completed(transient).json.next_run_at)) - Date.now();
		expect(due).toBeGreaterThan(1_500);
		expect(due).toBeLessThanOrEqual(5_000);
		expect(completed(contract).json).toMatchObject({
			outcome: 'failed',
			status: 'failed',
			error_code: 'http_400',
			error_class: 'needs_mapping',
			next_run_at: null,
		});
		expect(await job(contract)).toMatchObject({
			status: 'failed',
			error_code: 'http_400',
			error_class: 'needs_mapping',
			error_message: 'CRM answered 400',
			error_node: 'Create CRM Record',
			error_workflow: 'wf-test-1',
			error_execution: 'exec-worker-2',
		});
		expect(await job(transient)).toMatchObject({
			status: 'queued',
			attempts: 1,
			error_code: 'http_503',
		});
		expect((await attempts(transient))[0]).toMatchObject({
			outcome: 'retry',
			error_code: 'http_503',
		});
	});

	it('Failed with an explicit class, Retry past max attempts → failed, Release → queued without using an attempt', async () => {
		const [failed, exhausted, released] = await enqueue(
			'outcomes',
			[{ n: 'failed' }, { n: 'exhausted' }, { n: 'released' }],
			{ maxAttempts: 1 },
		);
		const items = (await lease('outcomes')).output('Leased');
		const byId = (id: string) => items.find((item) => item.json.job_id === id)!;
		const run = async (item: INodeExecutionData, parameters: IDataObject) =>
			(await nodes.run(new JobComplete(), { items: [item], parameters })).output('Completed')[0]
				.json;
		expect(
			await run(byId(failed), {
				outcome: 'failed',
				errorCode: 'invalid_document',
				errorMessage: 'Not a PDF',
				errorClass: 'discarded',
			}),
		).toMatchObject({ status: 'failed', error_class: 'discarded', error_code: 'invalid_document' });
		expect(await run(byId(exhausted), { outcome: 'retry', errorCode: 'ai_timeout' })).toMatchObject(
			{
				status: 'failed',
				error_code: 'ai_timeout',
				error_class: 'retryable',
				attempts: 1,
				max_attempts: 1,
			},
		);
		expect(await run(byId(released), { outcome: 'release' })).toMatchObject({ status: 'queued' });
		expect(await job(released)).toMatchObject({ status: 'queued', attempts: 0 });
	});

	it('a failure is recorded whatever its message: one past 4,000 characters is cut and says so, a NUL character is replaced', async () => {
		const [longId, nulId] = await enqueue('long-messages', [{ n: 'long' }, { n: 'nul' }]);
		const leasedItems = (await lease('long-messages', { maxJobs: 2 })).output('Leased');
		const leasedJson = (id: string) => leasedItems.find((item) => item.json.job_id === id)!.json;
		// An upstream error page, as an HTTP Request node hands it on.
		const page = `<html>${'<p>upstream error</p>'.repeat(400)}</html>`;
		const completed = (
			await nodes.run(new JobComplete(), {
				items: [
					{ ...leasedJson(longId), message: page },
					{ ...leasedJson(nulId), message: 'bad\u0000byte' },
				],
				parameters: {
					outcome: 'failed',
					errorCode: 'upstream_502',
					errorMessage: '={{ $json.message }}',
				},
			})
		).output('Completed');
		expect(completed.map((item) => item.json.status)).toEqual(['failed', 'failed']);
		const long = (await job(longId)).error_message as string;
		expect(long).toHaveLength(4000);
		expect(long.startsWith(page.slice(0, 3000))).toBe(true);
		expect(long.endsWith(` … [cut from ${page.length} characters]`)).toBe(true);
		expect((await job(nulId)).error_message).toBe('bad\uFFFDbyte');
	});

	it('a job with a callback URL gets its job-finished event written to the outbox by the same Job Complete', async () => {
		const [id] = await enqueue('with-callback', [{ doc: 'cb.pdf' }], {
			callbackUrl: 'https://client.example.com/hooks/jobs',
		});
		const [item] = (await lease('with-callback')).output('Leased');
		const [completed] = (await nodes.run(new JobComplete(), { items: [item] })).output('Completed');
		expect(completed.json.callback_event_id).toEqual(expect.any(String));
		const { rows } = await pool.query(
			`SELECT queue, status, idempotency_key, payload FROM "${schema}".jobs WHERE queue = 'callbacks'`,
		);
		expect(rows).toHaveLength(1);
		expect(rows[0]).toMatchObject({
			status: 'queued',
			idempotency_key: completed.json.callback_event_id,
		});
		expect(JSON.stringify(rows[0].payload)).toContain(id);
		expect(JSON.stringify(rows[0].payload)).toContain('https://client.example.com/hooks/jobs');
	});

	it('bad ids are NodeOperationErrors naming the item and field; with continue they go to the error output', async () => {
		const items = [{ job_id: 'not-a-uuid', attempt_id: 'x' }];
		const before = await tableSnapshot(pool, schema);
		const error = (await nodes
			.run(new JobComplete(), { items })
			.catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.context.itemIndex).toBe(0);
		expect(error.message).toBe('jobId: "not-a-uuid" is not a valid id');
		expect(error.description).toMatch(/Field: jobId/);
		const routed = await nodes.run(new JobComplete(), { items, onError: 'continueErrorOutput' });
		expect(routed.routing()).toEqual({ Completed: [], 'Lease Lost': [], Error: [0] });
		expect(routed.output('Error')[0].json).toMatchObject({
			job_id: 'not-a-uuid',
			details: { field: 'jobId', http_status: 400 },
		});
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});
});

describe('several items of one job (a fan-out after the lease)', () => {
	it('Extend Lease extends the lease for each of them; Job Complete completes the job once and answers the others job_done', async () => {
		const [id] = await enqueue('fan-out', [{ doc: 'many-pages.pdf' }]);
		const [leased] = (await lease('fan-out')).output('Leased');
		const pages = [1, 2, 3].map((page) => ({ json: { ...leased.json, page } }));
		const extended = await nodes.run(new JobLease(), {
			items: pages,
			parameters: { operation: 'extendLease', leaseSeconds: 600, checkpoint: 'crm_request' },
		});
		expect(extended.routing()).toEqual({ Extended: [0, 1, 2], 'Lease Lost': [] });
		expect((await job(id)).attempt_checkpoint).toBe('crm_request');

		const completed = await nodes.run(new JobComplete(), { items: pages });
		expect(completed.routing()).toEqual({ Completed: [0], 'Lease Lost': [1, 2] });
		expect(completed.output('Lease Lost').map((item) => item.json.reason)).toEqual([
			'job_done',
			'job_done',
		]);
		expect(await job(id)).toMatchObject({ status: 'done', result: { page: 1 } });
	});
});

describe('Job Complete: a bad item in a batch', () => {
	it('without continue, a malformed attempt id in item 1 stops the node and completes no item of the batch', async () => {
		const ids = await enqueue('mixed', [{ n: 0 }, { n: 1 }]);
		const leased = (await lease('mixed')).output('Leased');
		const items = [leased[0].json, { ...leased[1].json, attempt_id: 'attempt-from-elsewhere' }];
		const before = await tableSnapshot(pool, schema);
		const error = (await nodes
			.run(new JobComplete(), { items })
			.catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.context.itemIndex).toBe(1);
		expect(error.message).toBe('attemptId: "attempt-from-elsewhere" is not a valid id');
		expect(await tableSnapshot(pool, schema)).toEqual(before);
		expect((await job(ids[0])).status).toBe('running');

		// With continue, item 0 completes and item 1 goes to the error output.
		const routed = await nodes.run(new JobComplete(), { items, onError: 'continueErrorOutput' });
		expect(routed.routing()).toEqual({ Completed: [0], 'Lease Lost': [], Error: [1] });
		expect(routed.output('Error')[0].json).toMatchObject({
			job_id: ids[1],
			attempt_id: 'attempt-from-elsewhere',
			details: { field: 'attemptId', http_status: 400 },
		});
		expect((await job(ids[0])).status).toBe('done');
		expect((await job(ids[1])).status).toBe('running');
	});
});

describe('lease expiry: a stale worker is fenced out', () => {
	let id: string;
	let first: INodeExecutionData;
	let second: INodeExecutionData;

	it('an expired lease is taken over by the next Lease with a new attempt', async () => {
		[id] = await enqueue('crashy', [{ doc: 'slow.pdf' }]);
		[first] = (await lease('crashy', {}, 'exec-a')).output('Leased');
		// The worker of attempt 1 crashed or stalled: its lease runs out.
		await pool.query(
			`UPDATE "${schema}".jobs SET lease_until = now() - interval '1 second', attempt_lease_until = now() - interval '1 second' WHERE id = $1`,
			[id],
		);
		[second] = (await lease('crashy', {}, 'exec-b')).output('Leased');
		expect(second.json).toMatchObject({
			job_id: id,
			attempt: 2,
			recovered: true,
			idempotency_key: id,
		});
		expect(second.json.attempt_id).not.toBe(first.json.attempt_id);
		// The key for external calls did not change across attempts.
		expect(second.json.idempotency_key).toBe(first.json.idempotency_key);
		expect(await attempts(id)).toEqual([
			expect.objectContaining({ attempt: 1, execution_id: 'exec-a', outcome: 'lease_expired' }),
			expect.objectContaining({ attempt: 2, execution_id: 'exec-b', outcome: null }),
		]);
	});

	it('the stale worker’s Job Complete routes to Lease Lost and changes nothing', async () => {
		const before = await tableSnapshot(pool, schema);
		const result = await nodes.run(new JobComplete(), {
			items: [{ ...first.json, crm_id: 'late' }],
		});
		expect(result.output('Completed')).toEqual([]);
		expect(result.output('Lease Lost')).toEqual([
			{
				json: {
					job_id: id,
					attempt_id: first.json.attempt_id,
					outcome: 'succeeded',
					lease_lost: true,
					reason: 'attempt_superseded',
					current_status: 'running',
				},
				pairedItem: { item: 0 },
			},
		]);
		expect(await tableSnapshot(pool, schema)).toEqual(before);
		// Nor can it fail the job.
		const failed = await nodes.run(new JobComplete(), {
			items: [first],
			parameters: { outcome: 'failed', errorCode: 'late' },
		});
		expect(failed.routing()).toEqual({ Completed: [], 'Lease Lost': [0] });
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	it('Extend Lease: the stale attempt gets Lease Lost, the current one Extended', async () => {
		const extend = async (items: INodeExecutionData[]) =>
			await nodes.run(new JobLease(), {
				items,
				parameters: { operation: 'extendLease', leaseSeconds: 600 },
			});
		const stale = await extend([first]);
		expect(stale.outputNames).toEqual(['Extended', 'Lease Lost']);
		expect(stale.output('Extended')).toEqual([]);
		expect(stale.output('Lease Lost')[0].json).toMatchObject({
			job_id: id,
			attempt_id: first.json.attempt_id,
			lease_lost: true,
			lease_until: null,
			current_status: 'running',
		});
		const { lease_until: untilBefore } = await job(id);

		const current = await extend([second, first]);
		expect(current.routing()).toEqual({ Extended: [0], 'Lease Lost': [1] });
		const [extended] = current.output('Extended');
		// The input item is passed through, so the worker keeps its data.
		expect(extended.json).toMatchObject({
			job_id: id,
			attempt_id: second.json.attempt_id,
			payload: { doc: 'slow.pdf' },
			lease_lost: false,
		});
		const leaseUntil = Date.parse(String(extended.json.lease_until));
		expect(leaseUntil).toBeGreaterThan(Date.now() + 590_000);
		expect((await job(id)).lease_until.getTime()).toBe(leaseUntil);
		expect(leaseUntil).toBeGreaterThan(untilBefore.getTime());
	});

	it('Extend Lease renews by the lease the job was leased with: the item carries it as lease_seconds', async () => {
		const [job45] = await enqueue('lease-length', [{ doc: 'a.pdf' }]);
		const [leased45] = (await lease('lease-length', { leaseSeconds: 45 })).output('Leased');
		expect(leased45.json).toMatchObject({ job_id: job45, lease_seconds: 45 });
		const renewed = await nodes.run(new JobLease(), {
			items: [leased45],
			parameters: { operation: 'extendLease', leaseSeconds: '={{ $json.lease_seconds }}' },
		});
		const [extended] = renewed.output('Extended');
		const leaseUntil = Date.parse(String(extended.json.lease_until));
		expect(leaseUntil).toBeGreaterThan(Date.now() + 40_000);
		expect(leaseUntil).toBeLessThanOrEqual(Date.now() + 45_000);
		expect((await job(job45)).lease_until.getTime()).toBe(leaseUntil);
	});

	it('Extend Lease with a checkpoint records it on the current attempt; Unknown Outcomes carries it and says what to check', async () => {
		const marked = await nodes.run(new JobLease(), {
			items: [second, first],
			parameters: { operation: 'extendLease', leaseSeconds: 600, checkpoint: 'crm_request' },
		});
		expect(marked.routing()).toEqual({ Extended: [0], 'Lease Lost': [1] });
		expect(marked.output('Extended')[0].json).toMatchObject({
			attempt_id: second.json.attempt_id,
			checkpoint: 'crm_request',
			lease_lost: false,
		});
		const attempts = (
			await pool.query(
				`SELECT attempt_id, checkpoint FROM "${schema}".job_attempts WHERE job_id = $1 ORDER BY attempt`,
				[id],
			)
		).rows;
		expect(attempts).toEqual([
			{ attempt_id: first.json.attempt_id, checkpoint: null },
			{ attempt_id: second.json.attempt_id, checkpoint: 'crm_request' },
		]);
		const report = await nodes.run(new JobStatus(), {
			parameters: { operation: 'unknownOutcomes', queue: '', maxJobs: 100 },
		});
		const row = report.outputs[0].find((item) => item.json.attempt_id === first.json.attempt_id);
		expect(row?.json).toMatchObject({
			job_id: id,
			checkpoint: null,
			check: expect.stringMatching(/^no checkpoint recorded/),
		});
		// Timestamps as ISO text, as in every other item and as n8n keeps saved data.
		const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
		expect(row?.json.started_at).toMatch(iso);
		for (const value of Object.values(row?.json ?? {})) expect(value).not.toBeInstanceOf(Date);
	});

	it('the current attempt completes', async () => {
		const result = await nodes.run(new JobComplete(), { items: [second] });
		expect(result.routing()).toEqual({ Completed: [0], 'Lease Lost': [] });
		expect(await job(id)).toMatchObject({ status: 'done', attempts: 2 });
	});

	it('an expired job that used all its attempts is failed (lease_expired) instead of leased again', async () => {
		const [exhausted] = await enqueue('crashy-once', [{ doc: 'x' }], { maxAttempts: 1 });
		await lease('crashy-once');
		await pool.query(
			`UPDATE "${schema}".jobs SET lease_until = now() - interval '1 second', attempt_lease_until = now() - interval '1 second' WHERE id = $1`,
			[exhausted],
		);
		const result = await lease('crashy-once');
		expect(result.output('Leased')).toEqual([]);
		expect(result.output('Empty')).toHaveLength(1);
		expect(await job(exhausted)).toMatchObject({ status: 'failed', error_code: 'lease_expired' });
	});

	it('a bad queue name on Lease is a NodeOperationError (or an error item with continue)', async () => {
		const error = (await lease('bad queue!').catch(
			(caught: unknown) => caught,
		)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.description).toMatch(/Field: queue/);
		const routed = await nodes.run(new JobLease(), {
			parameters: { queue: 'bad queue!' },
			onError: 'continueErrorOutput',
		});
		expect(routed.routing()).toEqual({ Leased: [], Empty: [], Error: [0] });
	});
});
