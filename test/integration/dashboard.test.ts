import type pg from 'pg';

import { JobStore, ValidationError, type JobListPage } from '../../src/core';
import { leaseQueuedQuery } from '../../src/core/sql/lease';
import {
	dropSchema,
	freshStore,
	newPool,
	ok,
	tableSnapshot,
	testSchema,
	waitFor,
} from '../helpers/db';

/**
 * The dashboard's SQL and JSON contract on a real PostgreSQL: src/core/dashboard/ through the
 * JobStore methods that delegate to it.
 */
const schema = testSchema(__filename);
let pool: pg.Pool;
let store: JobStore;

beforeAll(async () => {
	pool = newPool(10);
	store = await freshStore(pool, schema);
});

afterAll(async () => {
	await dropSchema(pool, schema);
	await pool.end();
});

async function enqueue(
	queue: string,
	count: number,
	extra: Partial<Parameters<JobStore['enqueue']>[0][number]> = {},
): Promise<string[]> {
	const results = await store.enqueue(
		Array.from({ length: count }, (_, index) => ({ queue, payload: { index }, ...extra })),
	);
	return results.map((result) => ok(result).jobId);
}

async function finish(
	queue: string,
	count: number,
	outcome: 'succeeded' | 'failed' | 'retry',
	extra: { errorMessage?: string; delayMs?: number } = {},
): Promise<string[]> {
	const leased = await store.lease({ queue, limit: count, workflowId: 'wf-1', executionId: '77' });
	expect(leased).toHaveLength(count);
	const results = await store.complete(
		leased.map((job) => ({
			jobId: job.id,
			attemptId: job.attempt_id,
			outcome,
			result: { ok: job.id },
			errorCode: outcome === 'succeeded' ? null : 'bad_input',
			errorMessage: extra.errorMessage ?? null,
			errorClass: outcome === 'failed' ? ('needs_mapping' as const) : null,
			delayMs: extra.delayMs,
		})),
	);
	for (const result of results) expect(ok(result).applied).toBe(true);
	return leased.map((job) => job.id);
}

/** Every page of a listing, following next_cursor. */
async function allPages(
	filter: Parameters<JobStore['listJobs']>[0],
	limit: number,
): Promise<{ ids: string[]; pages: JobListPage[] }> {
	const pages: JobListPage[] = [];
	let cursor: string | null = null;
	do {
		const page = await store.listJobs({ ...filter, limit, cursor });
		pages.push(page);
		cursor = page.next_cursor;
		expect(pages.length).toBeLessThan(1000);
	} while (cursor !== null);
	return { ids: pages.flatMap((page) => page.jobs.map((job) => job.job_id)), pages };
}

/** Job ids newest first, as the list must order them: created_at, then insertion order. */
async function expectedOrder(where: string, values: unknown[] = []): Promise<string[]> {
	const { rows } = await pool.query(
		`SELECT id FROM "${schema}".jobs WHERE ${where} ORDER BY created_at DESC, seq DESC`,
		values,
	);
	return rows.map((row) => row.id);
}

describe('list jobs: keyset pages, newest first', () => {
	it('a batch with one timestamp, partly finished, pages without repeating or skipping a job at any page size', async () => {
		const queue = 'page-equal';
		// One statement: every job of the batch has the same created_at.
		const ids = await enqueue(queue, 17);
		await finish(queue, 5, 'succeeded');
		await finish(queue, 3, 'failed');
		const { rows } = await pool.query(
			`SELECT count(DISTINCT created_at)::int AS n FROM "${schema}".jobs WHERE queue = $1`,
			[queue],
		);
		expect(rows[0].n).toBe(1);
		const expected = await expectedOrder('queue = $1', [queue]);
		expect(expected).toHaveLength(17);
		expect(new Set(expected)).toEqual(new Set(ids));
		for (const limit of [1, 2, 3, 5, 8, 16, 17, 18, 50]) {
			const { ids: listed, pages } = await allPages({ queue }, limit);
			expect(listed, `limit ${limit}`).toEqual(expected);
			expect(pages.length).toBe(Math.max(1, Math.ceil(17 / limit)));
			expect(pages[pages.length - 1].next_cursor).toBeNull();
		}
	});

	it('across queues and statuses: all pages together are exactly the filtered jobs in order, for every status filter', async () => {
		const queues = ['mix-a', 'mix-b', 'mix-c'];
		for (const queue of queues) {
			await enqueue(queue, 4);
			await finish(queue, 1, 'succeeded');
			await enqueue(queue, 3, { correlationId: `corr-${queue}` });
			await finish(queue, 2, 'failed');
			await store.lease({ queue, limit: 1 });
		}
		const inQueues = `queue = ANY($1::text[])`;
		for (const status of [
			'',
			'queued',
			'running',
			'done',
			'failed',
			'done,failed',
			'queued,done',
		]) {
			const statuses = status === '' ? [] : status.split(',');
			const expected = (
				await expectedOrder(
					`${inQueues}${statuses.length ? ' AND status = ANY($2::text[])' : ''}`,
					statuses.length ? [queues, statuses] : [queues],
				)
			).filter(Boolean);
			// Every queue, then filtered to ours (other tests' queues live in the same schema).
			const { ids } = await allPages({ status }, 4);
			const ours = new Set(expected);
			expect(
				ids.filter((id) => ours.has(id)),
				`status "${status}"`,
			).toEqual(expected);
			for (const queue of queues) {
				const { ids: one } = await allPages({ queue, status }, 3);
				const expectedOne = await expectedOrder(
					`queue = $1${statuses.length ? ' AND status = ANY($2::text[])' : ''}`,
					statuses.length ? [queue, statuses] : [queue],
				);
				expect(one, `${queue} "${status}"`).toEqual(expectedOne);
			}
		}
	});

	it('a job received while paging shows up on no later page and shifts nothing', async () => {
		const queue = 'page-moving';
		for (let index = 0; index < 6; index++) await enqueue(queue, 1);
		const expected = await expectedOrder('queue = $1', [queue]);
		const first = await store.listJobs({ queue, limit: 2 });
		await enqueue(queue, 3);
		let cursor = first.next_cursor;
		const seen = first.jobs.map((job) => job.job_id);
		while (cursor) {
			const page = await store.listJobs({ queue, limit: 2, cursor });
			seen.push(...page.jobs.map((job) => job.job_id));
			cursor = page.next_cursor;
		}
		expect(seen).toEqual(expected);
	});

	it('the time range is on created_at: from inclusive, to exclusive', async () => {
		const queue = 'page-time';
		const [early] = await enqueue(queue, 1);
		await pool.query(
			`UPDATE "${schema}".jobs SET created_at = '2030-01-01T00:00:00Z' WHERE id = $1`,
			[early],
		);
		const [late] = await enqueue(queue, 1);
		await pool.query(
			`UPDATE "${schema}".jobs SET created_at = '2030-01-01T00:00:01Z' WHERE id = $1`,
			[late],
		);
		const ids = async (from: string | null, to: string | null) =>
			(await store.listJobs({ queue, from, to })).jobs.map((job) => job.job_id);
		expect(await ids('2030-01-01T00:00:00Z', null)).toEqual([late, early]);
		expect(await ids('2030-01-01T00:00:00.001Z', null)).toEqual([late]);
		expect(await ids(null, '2030-01-01T00:00:01Z')).toEqual([early]);
		expect(await ids('2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z')).toEqual([]);
		const page = await store.listJobs({ queue, from: '2030-01-01T00:00:00Z', to: '2031-01-01' });
		expect(page.filter).toMatchObject({
			from: '2030-01-01T00:00:00.000Z',
			to: '2031-01-01T00:00:00.000Z',
		});
	});

	it('text finds a job by id, idempotency key or correlation id, exactly, live or finished', async () => {
		const queue = 'text-search';
		const [byKey] = await enqueue(queue, 1, { idempotencyKey: 'order-4711' });
		const [corrA, corrB] = await enqueue(queue, 2, { correlationId: 'corr-4711' });
		await store.lease({ queue, limit: 1 }); // byKey → running
		await finish(queue, 1, 'succeeded'); // corrA → done, corrB stays queued
		const search = async (text: string, filter: object = {}) =>
			(await store.listJobs({ text, ...filter })).jobs.map((job) => job.job_id).sort();
		expect(await search('order-4711')).toEqual([byKey]);
		expect(await search(byKey)).toEqual([byKey]);
		expect(await search(byKey.toUpperCase())).toEqual([byKey]);
		expect(await search('corr-4711')).toEqual([corrA, corrB].sort());
		expect(await search('  corr-4711 ')).toEqual([corrA, corrB].sort());
		expect(await search('corr-4711', { status: 'done' })).toEqual([corrA]);
		expect(await search('corr-4711', { status: 'queued' })).toEqual([corrB]);
		expect(await search('corr-4711', { queue: 'elsewhere' })).toEqual([]);
		expect(await search('order-4711', { queue })).toEqual([byKey]);
		expect(await search('order-47')).toEqual([]);
		expect(await search('corr')).toEqual([]);
	});

	it('bad filters are rejected with the field and the fix; nothing is read', async () => {
		const cases: Array<[object, string]> = [
			[{ queue: "x' OR 1=1 --" }, 'queue'],
			[{ status: 'gone' }, 'status'],
			[{ status: "done' OR '1'='1" }, 'status'],
			[{ from: 'yesterday' }, 'from'],
			[{ to: '2030-13-45' }, 'to'],
			[{ cursor: '123' }, 'cursor'],
			[{ cursor: "1_2' OR 1=1" }, 'cursor'],
			[{ cursor: '9999999999999999999_1' }, 'cursor'],
			[{ cursor: '1_9223372036854775808' }, 'cursor'],
			[{ from: '0000-06-01T00:00:00Z' }, 'from'],
			[{ limit: 0 }, 'limit'],
			[{ limit: 1001 }, 'limit'],
			[{ limit: 'ten' }, 'limit'],
			[{ text: 'x'.repeat(256) }, 'text'],
			[{ text: 'a\u0000b' }, 'text'],
		];
		for (const [filter, field] of cases) {
			const error = await store.listJobs(filter).catch((caught: unknown) => caught);
			expect(error, JSON.stringify(filter)).toBeInstanceOf(ValidationError);
			expect((error as ValidationError).field).toBe(field);
			expect((error as ValidationError).fix).toBeTruthy();
		}
	});

	it('the JSON of a page: documented fields only, ISO timestamps, no payload', async () => {
		const queue = 'contract';
		await enqueue(queue, 2, { idempotencyKey: undefined, correlationId: 'c-1' });
		await finish(queue, 1, 'failed', { errorMessage: 'x'.repeat(500) });
		const page = await store.listJobs({ queue, limit: 1 });
		expect(Object.keys(page).sort()).toEqual(['as_of', 'filter', 'jobs', 'next_cursor']);
		expect(page.as_of).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
		expect(page.next_cursor).toMatch(/^\d+_\d+$/);
		expect(page.filter).toEqual({
			queue,
			statuses: ['queued', 'running', 'done', 'failed', 'cancelled'],
			from: null,
			to: null,
			text: null,
			limit: 1,
		});
		const [job] = (await store.listJobs({ queue, status: 'failed' })).jobs;
		expect(Object.keys(job).sort()).toEqual(
			[
				'attempts',
				'correlation_id',
				'created_at',
				'error_class',
				'error_code',
				'error_message',
				'finished_at',
				'idempotency_key',
				'job_id',
				'lease_expired',
				'lease_until',
				'max_attempts',
				'priority',
				'queue',
				'run_at',
				'started_at',
				'status',
				'updated_at',
			].sort(),
		);
		expect(job).toMatchObject({
			queue,
			status: 'failed',
			attempts: 1,
			error_code: 'bad_input',
			error_class: 'needs_mapping',
			correlation_id: 'c-1',
			lease_expired: false,
		});
		expect(job.error_message).toHaveLength(300);
		expect(job.created_at).toMatch(/Z$/);
		expect(new Date(job.finished_at!).getTime()).toBeGreaterThanOrEqual(
			new Date(job.created_at).getTime(),
		);
	});
});

describe('hostile strings are stored and returned as data', () => {
	const hostile = {
		key: `'); DROP TABLE jobs; -- <img src=x onerror=alert(1)>`,
		correlation: `" OR ""="<script>alert("c")</script>`,
		message: `<script>alert('m')</script>\u202e'; DELETE FROM jobs; --`,
		payload: { html: '<script>alert(1)</script>', sql: "1'; DROP SCHEMA x CASCADE; --" },
	};

	it('list, search and story return every hostile string exactly; the tables are untouched by a search for them', async () => {
		const queue = 'hostile';
		const [id] = await enqueue(queue, 1, {
			idempotencyKey: hostile.key,
			correlationId: hostile.correlation,
			payload: hostile.payload,
		});
		await finish(queue, 1, 'failed', { errorMessage: hostile.message });
		const before = await tableSnapshot(pool, schema);
		for (const text of [hostile.key, hostile.correlation]) {
			const page = await store.listJobs({ text });
			expect(page.jobs.map((job) => job.job_id)).toEqual([id]);
			expect(page.jobs[0]).toMatchObject({
				idempotency_key: hostile.key,
				correlation_id: hostile.correlation,
				error_message: hostile.message,
			});
		}
		expect((await store.listJobs({ text: "' OR 1=1 --" })).jobs).toEqual([]);
		const story = await store.jobStory(id);
		expect(JSON.parse(story!.job.payload.preview)).toEqual(hostile.payload);
		expect(story!.job.error?.message).toBe(hostile.message);
		expect(story!.attempts[0].error_message).toBe(hostile.message);
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});
});

describe('queue overview', () => {
	it('counts every state of a queue and charts done and failed per minute', async () => {
		const local = await freshStore(pool, `${schema}_o`);
		try {
			const ids = (results: Awaited<ReturnType<JobStore['enqueue']>>) =>
				results.map((result) => ok(result).jobId);
			const leaseFinish = async (
				count: number,
				outcome: 'succeeded' | 'failed' | 'retry' | null,
				leaseMs = 600_000,
			) => {
				const leased = await local.lease({ queue: 'q', limit: count, leaseMs });
				if (outcome)
					await local.complete(
						leased.map((job) => ({
							jobId: job.id,
							attemptId: job.attempt_id,
							outcome,
							delayMs: outcome === 'retry' ? 3_600_000 : undefined,
						})),
					);
			};
			await local.enqueue([
				{ queue: 'q', payload: 1 },
				{ queue: 'q', payload: 2 },
			]);
			await leaseFinish(2, 'succeeded');
			await local.enqueue([{ queue: 'q', payload: 3 }]);
			await leaseFinish(1, 'failed');
			const [cancel] = ids(await local.enqueue([{ queue: 'q', payload: 4 }]));
			await local.cancel([cancel]);
			await local.enqueue([{ queue: 'q', payload: 5 }]);
			await leaseFinish(1, null);
			await local.enqueue([{ queue: 'q', payload: 6 }]);
			await leaseFinish(1, null, 1_000);
			await local.enqueue([{ queue: 'q', payload: 7 }]);
			await leaseFinish(1, 'retry');
			await local.enqueue([{ queue: 'q', payload: 8, delayMs: 3_600_000 }]);
			await local.enqueue([
				{ queue: 'q', payload: 9 },
				{ queue: 'q', payload: 10 },
			]);
			await local.enqueue([{ queue: 'other', payload: 11 }]);
			await new Promise((resolve) => setTimeout(resolve, 1_100));

			const overview = await local.queueOverview();
			expect(overview.queues.map((queue) => queue.queue)).toEqual(['other', 'q']);
			expect(overview.queues[1]).toMatchObject({
				queue: 'q',
				queued: 4,
				ready: 2,
				scheduled: 2,
				retrying: 1,
				running: 2,
				running_expired: 1,
				done: 2,
				failed: 1,
				cancelled: 1,
			});
			expect(overview.queues[1].oldest_ready_age_seconds).toBeGreaterThan(0);
			const { from_minute: from, to_minute: to, since } = overview.chart;
			expect(Date.parse(to) - Date.parse(from)).toBe(59 * 60_000);
			expect(since).toBe(from);
			expect(overview.chart.series).toEqual([
				{ queue: 'q', points: [{ minute: expect.any(String), done: 2, failed: 1 }] },
			]);
			const [point] = overview.chart.series[0].points;
			expect(Date.parse(point.minute)).toBeGreaterThanOrEqual(Date.parse(to) - 60_000);

			// Minutes are counted by finished_at; older than an hour is outside the chart.
			const { rows } = await pool.query(
				`UPDATE "${schema}_o".jobs SET finished_at = now() - interval '5 minutes'
				 WHERE status = 'done' RETURNING date_trunc('minute', finished_at) AS minute`,
			);
			await pool.query(
				`UPDATE "${schema}_o".jobs SET finished_at = now() - interval '2 hours' WHERE status = 'failed'`,
			);
			const moved = await local.queueOverview();
			expect(moved.chart.series).toEqual([
				{
					queue: 'q',
					points: [{ minute: (rows[0].minute as Date).toISOString(), done: 2, failed: 0 }],
				},
			]);
			// A refresh asks for the last minutes only.
			const refreshed = await local.queueOverview({
				chartSince: new Date(Date.parse(moved.chart.to_minute) - 60_000).toISOString(),
			});
			expect(Date.parse(refreshed.chart.since)).toBeGreaterThan(
				Date.parse(refreshed.chart.from_minute),
			);
			expect(refreshed.chart.series).toEqual([]);
			const counts = (queues: typeof moved.queues) =>
				queues.map(
					({ oldest_ready_age_seconds: _r, oldest_queued_age_seconds: _q, ...rest }) => rest,
				);
			expect(counts(refreshed.queues)).toEqual(counts(moved.queues));
			const error = await local
				.queueOverview({ chartSince: 'soon' })
				.catch((caught: unknown) => caught);
			expect((error as ValidationError).field).toBe('chart_since');
		} finally {
			await dropSchema(pool, `${schema}_o`);
		}
	});
});

describe('job story', () => {
	it('received, every attempt with its checkpoint and execution, the result, and the callback events with their deliveries', async () => {
		const queue = 'story';
		const [id] = await enqueue(queue, 1, {
			idempotencyKey: 'story-key',
			correlationId: 'story-corr',
			callbackUrl: 'https://example.com/hooks/done',
			payload: { big: 'x'.repeat(5000) },
			maxAttempts: 3,
		});
		const [first] = await store.lease({ queue, workflowId: 'DjDispatcher0001', executionId: '41' });
		ok(
			(
				await store.extendLease([
					{ jobId: id, attemptId: first.attempt_id, checkpoint: 'crm_request' },
				])
			)[0],
		);
		ok(
			(
				await store.complete([
					{
						jobId: id,
						attemptId: first.attempt_id,
						outcome: 'failed',
						errorCode: 'http_400',
						errorMessage: 'AI said no',
						errorWorkflow: 'wf/../x?y',
						errorExecution: '42',
					},
				])
			)[0],
		);
		const failedStory = await store.jobStory(id);
		expect(failedStory!.job.error).toEqual({
			code: 'http_400',
			message: 'AI said no',
			class: 'needs_manual_review',
			node: null,
			workflow_id: 'wf/../x?y',
			execution_id: '42',
			execution_path: '/workflow/wf%2F..%2Fx%3Fy/executions/42',
		});
		// Requeued, then done: the second finish writes a second callback event.
		const requeued = await store.requeueFailedJobs({ jobIds: [id], asOf: failedStory!.as_of });
		expect(requeued.changed).toBe(1);
		const [second] = await store.lease({
			queue,
			workflowId: 'DjDispatcher0001',
			executionId: '43',
		});
		ok(
			(
				await store.complete([
					{
						jobId: id,
						attemptId: second.attempt_id,
						outcome: 'succeeded',
						result: { crm_id: 'C-1' },
					},
				])
			)[0],
		);
		// One delivery of the first event failed.
		const [delivery] = await store.lease({
			queue: 'callbacks',
			workflowId: 'DjCallbackRelay1',
			executionId: '50',
		});
		ok(
			(
				await store.complete([
					{
						jobId: delivery.id,
						attemptId: delivery.attempt_id,
						outcome: 'retry',
						errorCode: 'http_503',
						errorMessage: 'Receiver answered HTTP 503',
					},
				])
			)[0],
		);

		const story = await store.jobStory(id);
		expect(story).not.toBeNull();
		expect(story!.as_of).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
		expect(story!.job).toMatchObject({
			job_id: id,
			queue,
			status: 'done',
			attempts: 2,
			idempotency_key: 'story-key',
			correlation_id: 'story-corr',
			callback_url: 'https://example.com/hooks/done',
			error: null,
		});
		expect(story!.job.payload.truncated).toBe(true);
		expect(story!.job.payload.chars).toBe(JSON.stringify({ big: 'x'.repeat(5000) }).length + 1);
		expect(story!.job.payload.preview).toHaveLength(2000);
		expect(JSON.parse(story!.job.result!.preview)).toEqual({ crm_id: 'C-1' });
		expect(story!.attempts_total).toBe(2);
		expect(
			story!.attempts.map((attempt) => [
				attempt.attempt,
				attempt.outcome,
				attempt.checkpoint,
				attempt.execution_path,
			]),
		).toEqual([
			[1, 'failed', 'crm_request', '/workflow/DjDispatcher0001/executions/41'],
			[2, 'succeeded', null, '/workflow/DjDispatcher0001/executions/43'],
		]);
		expect(story!.attempts[0].error_message).toBe('AI said no');
		expect(story!.attempts[0].checkpoint_at).not.toBeNull();
		expect(
			story!.callback_events.map((event) => [event.event_id, event.event_type, event.status]),
		).toEqual([
			[`job_${id}_failed_1`, 'job.failed', 'queued'],
			[`job_${id}_done_2`, 'job.succeeded', 'queued'],
		]);
		expect(story!.callback_events[0].destination).toBe('https://example.com/hooks/done');
		expect(story!.callback_events[0].deliveries).toEqual([
			expect.objectContaining({
				attempt: 1,
				outcome: 'retry',
				error_code: 'http_503',
				error_message: 'Receiver answered HTTP 503',
				execution_path: '/workflow/DjCallbackRelay1/executions/50',
			}),
		]);
		expect(story!.callback_events[1].deliveries).toEqual([]);

		const shorter = await store.jobStory(id, { previewChars: 100 });
		expect(shorter!.job.payload.preview).toHaveLength(100);
	});

	it('a running job: the live attempt is "running" and an expired lease is flagged', async () => {
		const queue = 'story-live';
		const [id] = await enqueue(queue, 1);
		await store.lease({ queue, leaseMs: 1_000 });
		await new Promise((resolve) => setTimeout(resolve, 1_100));
		const story = await store.jobStory(id);
		expect(story!.job).toMatchObject({ status: 'running', lease_expired: true });
		expect(story!.attempts.map((attempt) => attempt.outcome)).toEqual(['running']);
	});

	it('unknown id → null; a malformed id is bad input', async () => {
		expect(await store.jobStory('0190d1a2-0000-7000-8000-000000000000')).toBeNull();
		for (const id of ["1' OR '1'='1", '', null, 42]) {
			const error = await store.jobStory(id).catch((caught: unknown) => caught);
			expect(error).toBeInstanceOf(ValidationError);
			expect((error as ValidationError).field).toBe('jobId');
		}
	});
});

describe('dashboard writes', () => {
	it('requeue: only failed jobs that failed before as_of; repeating the request changes nothing; a job that failed again after it stays failed', async () => {
		const queue = 'act-requeue';
		const ids = await enqueue(queue, 3);
		await finish(queue, 2, 'failed');
		const [failedA, failedB, queued] = ids;
		const seen = await store.listJobs({ queue, status: 'failed' });
		const request = { jobIds: [failedA, failedB, queued], asOf: seen.as_of };
		const first = await store.requeueFailedJobs(request);
		expect(first).toEqual({
			action: 'requeue',
			requested: 3,
			changed: 2,
			jobs: [
				{ job_id: failedA, changed: true, status: 'queued' },
				{ job_id: failedB, changed: true, status: 'queued' },
				{ job_id: queued, changed: false, status: 'queued' },
			],
		});
		const { rows } = await pool.query(
			`SELECT max_attempts, error_code FROM "${schema}".jobs WHERE id = $1`,
			[failedA],
		);
		expect(rows[0]).toEqual({ max_attempts: 4, error_code: null });
		const again = await store.requeueFailedJobs(request);
		expect(again.changed).toBe(0);
		// failedA runs again and fails again: the old request must not requeue it a second time.
		await finish(queue, 3, 'failed');
		const replay = await store.requeueFailedJobs(request);
		expect(replay.changed).toBe(0);
		expect(replay.jobs.map((job) => job.status)).toEqual(['failed', 'failed', 'failed']);
		// A request made after seeing the new failures does.
		const now = await store.listJobs({ queue, status: 'failed' });
		expect(
			(await store.requeueFailedJobs({ jobIds: [failedA], asOf: now.as_of, additionalAttempts: 1 }))
				.changed,
		).toBe(1);
	});

	it('cancel: queued jobs only; running, finished and unknown jobs are reported and left alone', async () => {
		const queue = 'act-cancel';
		const [running, queued] = await enqueue(queue, 3);
		await store.lease({ queue, limit: 1 });
		const unknown = '0190d1a2-0000-7000-8000-000000000001';
		const [doneId] = await enqueue('act-cancel-done', 1);
		await finish('act-cancel-done', 1, 'succeeded');
		const result = await store.cancelQueuedJobs({
			jobIds: [running, queued, doneId, unknown, queued],
		});
		expect(result).toEqual({
			action: 'cancel',
			requested: 4,
			changed: 1,
			jobs: [
				{ job_id: running, changed: false, status: 'running' },
				{ job_id: queued, changed: true, status: 'cancelled' },
				{ job_id: doneId, changed: false, status: 'done' },
				{ job_id: unknown, changed: false, status: null },
			],
		});
		const { rows } = await pool.query(
			`SELECT status, error_code, error_class, error_message FROM "${schema}".jobs WHERE id = $1`,
			[queued],
		);
		expect(rows[0]).toEqual({
			status: 'cancelled',
			error_code: 'cancelled',
			error_class: 'discarded',
			error_message: 'Cancelled from the jobs dashboard',
		});
		expect((await store.cancelQueuedJobs({ jobIds: [queued] })).changed).toBe(0);
	});

	it('cancel of a job that a lease takes while the cancel waits for its row: left unchanged, and answered as running', async () => {
		const [id] = await enqueue('act-cancel-race', 1);
		const elsewhere = newPool(1);
		const session = await elsewhere.connect();
		try {
			await session.query('BEGIN');
			const lease = leaseQueuedQuery(
				schema,
				`"${schema}"`,
				'act-cancel-race',
				[
					{
						ord: 0,
						attempt_id: '0190d1a2-0000-7000-8000-0000000000aa',
						lease_ms: 60_000,
						workflow_id: null,
						execution_id: null,
					},
				],
				{ waitForFlush: true, metadata: false },
			);
			const { rows: leased } = await session.query({
				text: lease.text,
				values: lease.values as unknown[],
			});
			expect(leased[0].id).toBe(id);
			const cancelling = store.cancelQueuedJobs({ jobIds: [id] });
			await waitForLockWait();
			await session.query('COMMIT');
			expect(await cancelling).toEqual({
				action: 'cancel',
				requested: 1,
				changed: 0,
				jobs: [{ job_id: id, changed: false, status: 'running' }],
			});
		} finally {
			session.release();
			await elsewhere.end();
		}
	});

	it('bad requests write nothing and name the field', async () => {
		const [id] = await enqueue('act-bad', 1);
		await finish('act-bad', 1, 'failed');
		const before = await tableSnapshot(pool, schema);
		const asOf = new Date().toISOString();
		const cases: Array<[() => Promise<unknown>, string]> = [
			[() => store.requeueFailedJobs({ jobIds: [], asOf }), 'job_ids'],
			[() => store.requeueFailedJobs({ jobIds: undefined, asOf }), 'job_ids'],
			[() => store.requeueFailedJobs({ jobIds: [id], asOf: undefined }), 'as_of'],
			[() => store.requeueFailedJobs({ jobIds: [id], asOf: 'now' }), 'as_of'],
			[() => store.requeueFailedJobs({ jobIds: [id], asOf: "2030-01-01T00:00:00Z'; --" }), 'as_of'],
			[() => store.requeueFailedJobs({ jobIds: [id, 'nope'], asOf }), 'job_ids[1]'],
			[
				() =>
					store.requeueFailedJobs({
						jobIds: Array.from({ length: 1001 }, () => id),
						asOf,
					}),
				'job_ids',
			],
			[
				() => store.requeueFailedJobs({ jobIds: [id], asOf, additionalAttempts: 0 }),
				'additionalAttempts',
			],
			[() => store.cancelQueuedJobs({ jobIds: "x'; DROP TABLE jobs; --" }), 'job_ids[0]'],
		];
		for (const [call, field] of cases) {
			const error = await call().catch((caught: unknown) => caught);
			expect(error, field).toBeInstanceOf(ValidationError);
			expect((error as ValidationError).field).toBe(field);
		}
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});
});

/** Resolves once a statement on this file's schema waits for a row lock. */
async function waitForLockWait(): Promise<void> {
	await waitFor(async () => {
		const { rows } = await pool.query(
			`SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`,
			[`%"${schema}".jobs%`],
		);
		return rows.length > 0;
	}, 'the cancel to wait for the leased row');
}
