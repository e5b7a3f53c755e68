/**
 * The SQL paths changed for speed (migration 0004, prepared statements, the complete /
 * heartbeat / lease rewrites) keep the same results: exact terminal counts on every status
 * change path, stats equal to a full count, prepared statements on and off, fencing, callback
 * events and notifications.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Socket } from 'node:net';

import pg from 'pg';

import {
	DurableJobsError,
	FINISH_NOTICE_INTERVAL_MS,
	JobStore,
	NOTICE_APPLICATION_NAME,
	NOTICE_CONNECTION_IDLE_MS,
	NOTICE_RECONNECT_DELAY_MS,
	closeAllPools,
	finishNoticesSent,
	type CompleteInput,
	type CompleteResult,
	type QueueStats,
} from '../../src/core';
import type { StoreContext } from '../../src/core/context';
import { announceFinished } from '../../src/core/finishNotices';
import { notifyChannel } from '../../src/core/identifiers';
import { toPoolConfig } from '../../src/core/pool';
import { completeQuery } from '../../src/core/sql/complete';
import { enqueueQuery, enqueueWithoutKeysQuery, type EnqueueRow } from '../../src/core/sql/enqueue';
import { extendLeaseQuery, leaseQuery } from '../../src/core/sql/lease';
import { loggedPlans } from '../../scripts/lib/explain';
import { completeRow } from '../helpers/sql-rows';
import {
	connectionConfig,
	databaseUrl,
	drainQueue,
	dropSchema,
	freshStore,
	newPool,
	ok,
	planNodes,
	sleep,
	statementsSentDuring,
	succeedAll,
	useTestSchema,
	waitFor,
} from '../helpers/db';

const { schema, pool, store } = useTestSchema(__filename, { poolSize: 20, migrate: true });
let spy: jest.SpyInstance | undefined;

afterEach(() => {
	spy?.mockRestore();
	spy = undefined;
});

async function enqueue(
	queue: string,
	count: number,
	extra: Record<string, unknown> = {},
): Promise<string[]> {
	return (
		await store.enqueue(
			Array.from({ length: count }, (_, n) => ({ queue, payload: { n }, ...extra })),
		)
	).map((result) => ok(result).jobId);
}

/** A row for the enqueue statements, with nothing but its queue and key. */
function enqueueRow(ord: number, queue: string, key: string | null = null): EnqueueRow {
	return {
		ord,
		id: randomUUID(),
		queue,
		payload: JSON.stringify({ ord }),
		idempotency_key: key,
		payload_fingerprint: key === null ? null : 'f',
		priority: 0,
		run_at: null,
		delay_ms: null,
		max_attempts: 5,
		ordering_key: null,
		callback_url: null,
		correlation_id: null,
		status_token_hash: null,
	};
}

/** The session's value of a counted mark (null when the session never set it). */
async function countedMarkOf(
	client: pg.ClientBase,
	setting: 'durable_jobs.counted_update' | 'durable_jobs.counted_insert',
): Promise<string | null> {
	const { rows } = await client.query<{ mark: string | null }>(
		'SELECT current_setting($1, true) AS mark',
		[setting],
	);
	return rows[0].mark;
}

/** Terminal counts by a full scan, the truth job_counts must match. */
async function countedByScan(
	queue: string,
): Promise<{ done: number; failed: number; cancelled: number }> {
	const { rows } = await pool.query<{ status: string; n: number }>(
		`SELECT status, count(*)::int AS n FROM "${schema}".jobs WHERE queue = $1 GROUP BY status`,
		[queue],
	);
	const of = (status: string) => rows.find((row) => row.status === status)?.n ?? 0;
	return { done: of('done'), failed: of('failed'), cancelled: of('cancelled') };
}

async function expectCountsExact(queue: string): Promise<QueueStats> {
	const [stats] = await store.stats(queue);
	const truth = await countedByScan(queue);
	expect({ done: stats.done, failed: stats.failed, cancelled: stats.cancelled }).toEqual(truth);
	return stats;
}

describe('job_counts stay exact on every status change path', () => {
	it('complete (succeeded, failed, retry, retries exhausted, release), cancel, requeue, lease expiry, purge', async () => {
		const queue = 'counts';
		await enqueue(queue, 12, { maxAttempts: 1 });
		const leased = await store.lease({ queue, limit: 8 });
		const outcomes = ['succeeded', 'succeeded', 'failed', 'retry', 'release', 'succeeded'] as const;
		const results = (
			await store.complete(
				leased
					.slice(0, 6)
					.map((job, i) => ({ jobId: job.id, attemptId: job.attempt_id, outcome: outcomes[i] })),
			)
		).map(ok);
		expect(results.map((result) => result.status)).toEqual([
			'done',
			'done',
			'failed',
			'failed',
			'queued',
			'done',
		]);
		await expectCountsExact(queue);

		// Cancel one running and one queued job.
		const queuedIds = (
			await pool.query<{ id: string }>(
				`SELECT id FROM "${schema}".jobs WHERE queue = $1 AND status = 'queued' LIMIT 1`,
				[queue],
			)
		).rows.map((row) => row.id);
		await store.cancel([leased[6].id, ...queuedIds]);
		await expectCountsExact(queue);

		// Requeue the failed ones (failed → queued), cancelled too.
		const requeued = await store.requeue({ queue, confirm: true, includeCancelled: true });
		expect(requeued.length).toBe(4);
		await expectCountsExact(queue);

		// The last attempt's lease expires: the next lease fails the job (lease_expired).
		await pool.query(
			`UPDATE "${schema}".jobs SET lease_until = now() - interval '1 second', attempt_lease_until = now() - interval '1 second' WHERE id = $1`,
			[leased[7].id],
		);
		await store.lease({ queue, limit: 1 });
		expect(
			(
				await pool.query(`SELECT status, error_code FROM "${schema}".jobs WHERE id = $1`, [
					leased[7].id,
				])
			).rows[0],
		).toEqual({ status: 'failed', error_code: 'lease_expired' });
		await expectCountsExact(queue);

		// Purge everything finished.
		const purged = await store.purge({ queue, olderThanMs: 0 });
		expect(purged.deleted).toBeGreaterThan(0);
		const stats = await expectCountsExact(queue);
		expect(stats.done + stats.failed + stats.cancelled).toBe(0);
	});

	it('direct SQL: a terminal insert, an update of other columns, and a queue rename are counted', async () => {
		const queue = 'counts-sql';
		await pool.query(
			`INSERT INTO "${schema}".jobs (id, queue, status, payload) VALUES (gen_random_uuid(), $1, 'done', '{}'), (gen_random_uuid(), $1, 'failed', '{}')`,
			[queue],
		);
		await expectCountsExact(queue);
		const before = (await pool.query(`SELECT * FROM "${schema}".job_counts ORDER BY 1, 2, 3`)).rows;
		// No status change, no counter write at all.
		await pool.query(`UPDATE "${schema}".jobs SET updated_at = now() WHERE queue = $1`, [queue]);
		expect(
			(await pool.query(`SELECT * FROM "${schema}".job_counts ORDER BY 1, 2, 3`)).rows,
		).toEqual(before);
		await pool.query(
			`UPDATE "${schema}".jobs SET queue = $2 WHERE queue = $1 AND status = 'done'`,
			[queue, `${queue}-renamed`],
		);
		await expectCountsExact(queue);
		await expectCountsExact(`${queue}-renamed`);
	});

	it('the lease and the completion count their own rows; an UPDATE after them in their transaction is counted by the trigger', async () => {
		const queue = 'counts-same-transaction';
		const [, , thirdId] = await enqueue(queue, 3);
		const s = `"${schema}"`;
		const client = await pool.connect();
		const markOf = () => countedMarkOf(client, 'durable_jobs.counted_update');
		try {
			await client.query('BEGIN');
			const slots = [0, 1].map((ord) => ({
				ord,
				attempt_id: randomUUID(),
				lease_ms: 60_000,
				workflow_id: null,
				execution_id: null,
			}));
			const leased = (
				await client.query<{ id: string; attempt_id: string }>(
					leaseQuery(schema, s, queue, slots, { waitForFlush: true, callbackQueue: 'callbacks' }),
				)
			).rows;
			expect(leased).toHaveLength(2);
			// The statement's trigger cleared the mark the statement set.
			expect(await markOf()).toBe('');
			const completed = await client.query<{ applied: boolean; status: string }>(
				completeQuery(
					schema,
					s,
					leased.map((job, ord) => completeRow(ord, job, ord === 0 ? 'succeeded' : 'failed')),
					'callbacks',
				),
			);
			expect(completed.rows.map((row) => [row.applied, row.status])).toEqual([
				[true, 'done'],
				[true, 'failed'],
			]);
			expect(await markOf()).toBe('');
			// An operator's statements in the same transaction: a queued job failed by hand, a done
			// job cancelled. Only the trigger counts them.
			await client.query(
				`UPDATE ${s}.jobs SET status = 'failed', finished_at = now() WHERE id = $1`,
				[thirdId],
			);
			await client.query(`UPDATE ${s}.jobs SET status = 'cancelled' WHERE id = $1`, [leased[0].id]);
			await client.query('COMMIT');
		} finally {
			client.release();
		}
		const stats = await expectCountsExact(queue);
		expect({ done: stats.done, failed: stats.failed, cancelled: stats.cancelled }).toEqual({
			done: 0,
			failed: 2,
			cancelled: 1,
		});
	});

	it('an enqueue wakes each queue it inserted into; an INSERT after it in its transaction and a completion’s callback event are counted and wake their queues', async () => {
		const listener = new pg.Client({ connectionString: databaseUrl() });
		await listener.connect();
		try {
			await enqueueAndWatch(listener);
		} finally {
			await listener.end();
		}
	});

	async function enqueueAndWatch(listener: pg.Client): Promise<void> {
		const s = `"${schema}"`;
		const notices: string[] = [];
		listener.on('notification', (message) => notices.push(message.payload ?? ''));
		// The earlier tests' finish notices (sent after their completions) are not this test's.
		await finishNoticesSent();
		await listener.query(`LISTEN "${notifyChannel(schema)}"`);
		const [callbackJob] = await enqueue('notices-callback-source', 1, {
			callbackUrl: 'https://example.com/hook',
		});
		const [leased] = await store.lease({ queue: 'notices-callback-source' });
		expect(leased.id).toBe(callbackJob);
		// That enqueue's own notice may arrive late on a busy machine: wait for it before counting.
		await waitFor(() => notices.includes('notices-callback-source'), 'the first enqueue’s notice');
		expect(notices).toEqual(['notices-callback-source']);
		const client = await pool.connect();
		try {
			notices.length = 0;
			await client.query('BEGIN');
			await client.query(
				enqueueWithoutKeysQuery(schema, s, [
					enqueueRow(0, 'notices-a'),
					enqueueRow(1, 'notices-b'),
					enqueueRow(2, 'notices-a'),
				]),
			);
			await client.query(
				enqueueQuery(schema, s, [
					enqueueRow(0, 'notices-c', 'k-1'),
					enqueueRow(1, 'notices-c', 'k-2'),
				]),
			);
			// One job without a key: its statement sends the notice itself.
			await client.query(enqueueWithoutKeysQuery(schema, s, [enqueueRow(0, 'notices-f')]));
			// The same key twice: the first inserts (one notice), the second inserts nothing.
			await client.query(enqueueQuery(schema, s, [enqueueRow(0, 'notices-d', 'k-1')]));
			await client.query(enqueueQuery(schema, s, [enqueueRow(0, 'notices-d', 'k-1')]));
			// An operator's insert of a finished job: the trigger counts and notifies it.
			await client.query(
				`INSERT INTO ${s}.jobs (id, queue, status, payload, finished_at) VALUES ($1, 'notices-e', 'done', '{}', now())`,
				[randomUUID()],
			);
			// A completion inserts its job-finished event into the callback queue inside its own
			// statement: the trigger notifies that queue.
			const completed = await client.query<{ applied: boolean; callback_event_id: string }>(
				completeQuery(schema, s, [completeRow(0, leased, 'succeeded')], 'notices-callbacks'),
			);
			expect(completed.rows[0].applied).toBe(true);
			expect(completed.rows[0].callback_event_id).toEqual(expect.any(String));
			await client.query('COMMIT');
		} finally {
			client.release();
		}
		await waitFor(() => notices.length >= 7, 'seven notices');
		expect([...notices].sort()).toEqual([
			'notices-a',
			'notices-b',
			'notices-c',
			'notices-callbacks',
			'notices-d',
			'notices-e',
			'notices-f',
		]);
		expect((await expectCountsExact('notices-e')).done).toBe(1);
		expect((await expectCountsExact('notices-callbacks')).queued).toBe(1);
	}

	it('an enqueue of one job marks itself counted and its trigger clears the mark; a repeated key alone inserts nothing and sets no mark', async () => {
		const s = `"${schema}"`;
		/** Runs one statement in a transaction of a new session, and reads the mark after it. */
		const markAfter = async (query: { text: string; values?: unknown[] }) => {
			const client = new pg.Client({ connectionString: databaseUrl() });
			await client.connect();
			const markOf = () => countedMarkOf(client, 'durable_jobs.counted_insert');
			try {
				await client.query('BEGIN');
				const before = await markOf();
				const { rowCount } = await client.query(query);
				const after = await markOf();
				await client.query('COMMIT');
				return { before, rowCount, after };
			} finally {
				await client.end();
			}
		};
		// Set by the statement (a new session has no such setting: null) and cleared by its trigger.
		expect(await markAfter(enqueueWithoutKeysQuery(schema, s, [enqueueRow(0, 'mark-a')]))).toEqual({
			before: null,
			rowCount: 1,
			after: '',
		});
		expect(await markAfter(enqueueQuery(schema, s, [enqueueRow(0, 'mark-b', 'k-1')]))).toEqual({
			before: null,
			rowCount: 1,
			after: '',
		});
		// The key exists: nothing inserted, no mark; the trigger ran its (empty) work.
		const repeated = enqueueQuery(schema, s, [enqueueRow(0, 'mark-b', 'k-1')]);
		expect(await markAfter(repeated)).toEqual({ before: null, rowCount: 1, after: null });
		// Many jobs in one statement leave the notice and the count to the trigger.
		expect(
			await markAfter(
				enqueueWithoutKeysQuery(schema, s, [enqueueRow(0, 'mark-a'), enqueueRow(1, 'mark-a')]),
			),
		).toEqual({ before: null, rowCount: 1, after: null });
		expect((await expectCountsExact('mark-a')).queued).toBe(3);
		expect((await expectCountsExact('mark-b')).queued).toBe(1);
	});

	it('an UPDATE of jobs that a trigger of your own runs inside a completion is counted once, and so is the completion', async () => {
		const other = `${schema}_nested`;
		const nested = await freshStore(pool, other);
		try {
			// When a job of queue "parent" finishes, its trigger cancels one queued job of queue "child".
			await pool.query(`
				CREATE FUNCTION "${other}".cancel_a_child() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					UPDATE "${other}".jobs SET status = 'cancelled', finished_at = now()
					WHERE id = (SELECT id FROM "${other}".jobs WHERE queue = 'child' AND status = 'queued' LIMIT 1);
					RETURN NULL;
				END $$`);
			await pool.query(`
				CREATE TRIGGER cancel_a_child AFTER UPDATE ON "${other}".jobs FOR EACH ROW
				WHEN (NEW.queue = 'parent' AND NEW.status = 'done' AND OLD.status = 'running')
				EXECUTE FUNCTION "${other}".cancel_a_child()`);
			await nested.enqueue([
				{ queue: 'parent', payload: {} },
				{ queue: 'parent', payload: {} },
				...Array.from({ length: 3 }, () => ({ queue: 'child', payload: {} })),
			]);
			const leased = await nested.lease({ queue: 'parent', limit: 2 });
			expect(leased).toHaveLength(2);
			await succeedAll(nested, leased);
			const truth = await pool.query<{ queue: string; status: string; n: number }>(
				`SELECT queue, status, count(*)::int AS n FROM "${other}".jobs
				 WHERE status IN ('done', 'failed', 'cancelled') GROUP BY 1, 2 ORDER BY 1, 2`,
			);
			expect(truth.rows).toEqual([
				{ queue: 'child', status: 'cancelled', n: 2 },
				{ queue: 'parent', status: 'done', n: 2 },
			]);
			const counted = await pool.query<{ queue: string; status: string; n: number }>(
				`SELECT queue, status, sum(n)::int AS n FROM "${other}".job_counts
				 GROUP BY 1, 2 HAVING sum(n) <> 0 ORDER BY 1, 2`,
			);
			expect(counted.rows).toEqual(truth.rows);
		} finally {
			await dropSchema(pool, other);
		}
	});

	it('an INSERT into jobs that a trigger of your own runs inside an enqueue of one job is counted and wakes its queue, and so does the enqueue', async () => {
		const other = `${schema}_nested_insert`;
		const nested = await freshStore(pool, other);
		const listener = new pg.Client({ connectionString: databaseUrl() });
		await listener.connect();
		const notices: string[] = [];
		listener.on('notification', (message) => notices.push(message.payload ?? ''));
		try {
			await listener.query(`LISTEN "${notifyChannel(other)}"`);
			// Every job of queue "parent" gets a finished twin in queue "audit", inserted by a trigger.
			await pool.query(`
				CREATE FUNCTION "${other}".audit_parent() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					INSERT INTO "${other}".jobs (id, queue, status, payload, finished_at)
					VALUES (gen_random_uuid(), 'audit', 'done', NEW.payload, now());
					RETURN NULL;
				END $$`);
			await pool.query(`
				CREATE TRIGGER audit_parent AFTER INSERT ON "${other}".jobs FOR EACH ROW
				WHEN (NEW.queue = 'parent') EXECUTE FUNCTION "${other}".audit_parent()`);
			ok((await nested.enqueue([{ queue: 'parent', payload: { n: 1 } }]))[0]);
			ok((await nested.enqueue([{ queue: 'parent', payload: { n: 2 }, idempotencyKey: 'k' }]))[0]);
			const truth = await pool.query<{ queue: string; status: string; n: number }>(
				`SELECT queue, status, count(*)::int AS n FROM "${other}".jobs GROUP BY 1, 2 ORDER BY 1, 2`,
			);
			expect(truth.rows).toEqual([
				{ queue: 'audit', status: 'done', n: 2 },
				{ queue: 'parent', status: 'queued', n: 2 },
			]);
			const [audit] = await nested.stats('audit');
			expect(audit.done).toBe(2);
			await waitFor(() => notices.length >= 4, 'four notices');
			expect([...notices].sort()).toEqual(['audit', 'audit', 'parent', 'parent']);
		} finally {
			await listener.end();
			await dropSchema(pool, other);
		}
	});

	it('concurrent completions from many connections add up, spread over at most 16 slots per (queue, status)', async () => {
		const queue = 'counts-concurrent';
		await enqueue(queue, 400);
		await Promise.all(
			Array.from({ length: 8 }, async () => {
				const s = new JobStore(pool, { schema });
				for (;;) {
					const jobs = await s.lease({ queue, limit: 5 });
					if (jobs.length === 0) return;
					await succeedAll(s, jobs);
				}
			}),
		);
		expect((await expectCountsExact(queue)).done).toBe(400);
		const { rows } = await pool.query<{ slot: number }>(
			`SELECT slot FROM "${schema}".job_counts WHERE queue = $1`,
			[queue],
		);
		expect(rows.every((row) => row.slot >= 0 && row.slot < 16)).toBe(true);
	});
});

describe('queue stats', () => {
	it('one queue and all queues equal a full count of the live rows', async () => {
		const queue = 'stats-truth';
		await enqueue(queue, 6);
		await enqueue(queue, 2, { delayMs: 3_600_000 });
		const leased = await store.lease({ queue, limit: 3 });
		await pool.query(
			`UPDATE "${schema}".jobs SET lease_until = now() - interval '1 second', attempt_lease_until = now() - interval '1 second' WHERE id = $1`,
			[leased[0].id],
		);
		ok(
			(
				await store.complete([
					{ jobId: leased[1].id, attemptId: leased[1].attempt_id, outcome: 'retry', delayMs: 0 },
				])
			)[0],
		);
		const { rows } = await pool.query(
			`SELECT count(*) FILTER (WHERE status = 'queued')::int AS queued,
				count(*) FILTER (WHERE status = 'queued' AND run_at <= now())::int AS ready,
				count(*) FILTER (WHERE status = 'queued' AND attempts > 0)::int AS retrying,
				count(*) FILTER (WHERE status = 'running')::int AS running,
				count(*) FILTER (WHERE status = 'running' AND lease_until < now())::int AS running_expired
			 FROM "${schema}".jobs WHERE queue = $1`,
			[queue],
		);
		const [one] = await store.stats(queue);
		expect(one).toMatchObject({ queue, ...rows[0] });
		expect(rows[0]).toEqual({ queued: 6, ready: 4, retrying: 1, running: 2, running_expired: 1 });
		expect(one.oldest_ready_age_seconds).toBeGreaterThanOrEqual(0);
		const all = await store.stats();
		const { oldest_ready_age_seconds: _ready, oldest_queued_age_seconds: _queued, ...counts } = one;
		expect(all.find((entry) => entry.queue === queue)).toMatchObject(counts);
		expect(await store.stats('no-such-queue')).toEqual([
			expect.objectContaining({
				queue: 'no-such-queue',
				queued: 0,
				running: 0,
				done: 0,
				oldest_ready_age_seconds: null,
			}),
		]);
	});

	it('queue_stats is declared with jit = off, so it is never JIT-compiled whatever the plan cost', async () => {
		const { rows } = await pool.query<{ proconfig: string[] }>(
			`SELECT p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = 'queue_stats'`,
			[schema],
		);
		expect(rows[0].proconfig).toContain('jit=off');
		// Even with JIT forced on for every statement of the session, stats still answers.
		const client = await pool.connect();
		try {
			await client.query('SET jit = on');
			await client.query('SET jit_above_cost = 0');
			const { rows: stats } = await client.query(
				`SELECT * FROM "${schema}".queue_stats('stats-truth')`,
			);
			expect(stats).toHaveLength(1);
		} finally {
			client.release(true);
		}
	});
	it('queue_stats reads only live jobs even when the statistics still describe an old backlog', async () => {
		// Statistics taken while 3,000 jobs were queued; then every one of them finishes and
		// nothing analyses the table again (autovacuum off, or not yet run).
		const queue = 'stats-stale-statistics';
		await pool.query(`ALTER TABLE "${schema}".jobs SET (autovacuum_enabled = false)`);
		try {
			await enqueue(queue, 3000);
			await pool.query(`ANALYZE "${schema}".jobs`);
			await drainQueue(store, queue, 500);
			// The same statistics make a plain count of the queued rows scan the whole table...
			const { rows: plainPlan } = await pool.query<{ 'QUERY PLAN': string }>(
				`EXPLAIN SELECT count(*) FROM "${schema}".jobs WHERE queue = '${queue}' AND status = 'queued'`,
			);
			expect(plainPlan.map((row) => row['QUERY PLAN']).join('\n')).toMatch(/Seq Scan on jobs/);
			// ...while the statements inside queue_stats stay on the partial indexes (their plans come
			// from auto_explain). Buffer counts would not do: while other sessions hold older
			// snapshots the index entries of the finished rows cannot be marked dead, and the index
			// scan visits each of them.
			const notices = await loggedPlans(pool, `SELECT * FROM "${schema}".queue_stats('${queue}')`);
			const nestedPlans = notices.filter(
				(notice) => /plan:/.test(notice) && /FROM "[^"]+"\.jobs j/.test(notice),
			);
			expect(nestedPlans.length).toBeGreaterThan(0);
			for (const plan of nestedPlans) expect(plan).not.toMatch(/Seq Scan on jobs/);
			expect(nestedPlans.join('\n')).toMatch(
				/(Index Scan using|Index Only Scan using|Bitmap Index Scan on) jobs_queued_claim/,
			);
			const [stats] = await store.stats(queue);
			expect(stats).toMatchObject({ queued: 0, running: 0, done: 3000 });
			const { rows } = await pool.query<{ proconfig: string[] }>(
				`SELECT p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = 'queue_stats'`,
				[schema],
			);
			expect(rows[0].proconfig).toEqual(expect.arrayContaining(['jit=off', 'enable_seqscan=off']));
		} finally {
			await pool.query(`ALTER TABLE "${schema}".jobs RESET (autovacuum_enabled)`);
		}
	});
});

describe('prepared statements', () => {
	async function cycle(s: JobStore, queue: string): Promise<void> {
		await s.enqueue([
			{ queue, payload: { n: 1 } },
			{ queue, payload: { n: 2 }, idempotencyKey: `${queue}-k` },
		]);
		const leased = await s.lease({ queue, limit: 2 });
		expect(leased).toHaveLength(2);
		(await s.extendLease(leased.map((job) => ({ jobId: job.id, attemptId: job.attempt_id })))).map(
			ok,
		);
		await succeedAll(s, leased);
		const [stats] = await s.stats(queue);
		expect(stats.done).toBe(2);
	}

	it('on (the default): frequent statements are named after a hash of their text; off: nothing is named', async () => {
		spy = jest.spyOn(pg.Client.prototype, 'query');
		await cycle(new JobStore(pool, { schema }), 'prepared-on');
		const named = spy!.mock.calls
			.map(([query]) =>
				typeof query === 'object' && query !== null ? (query as { name?: string }).name : undefined,
			)
			.filter(Boolean) as string[];
		expect(named.length).toBeGreaterThanOrEqual(5);
		expect(named.every((name) => /^dj_[0-9a-f]{32}$/.test(name))).toBe(true);
		spy!.mockRestore();

		spy = jest.spyOn(pg.Client.prototype, 'query');
		await cycle(new JobStore(pool, { schema, preparedStatements: false }), 'prepared-off');
		const unnamed = spy.mock.calls.filter(
			([query]) =>
				typeof query === 'object' &&
				query !== null &&
				(query as { name?: string }).name !== undefined,
		);
		expect(unnamed).toEqual([]);
	});

	it('the same statement text always gets the same name, in every store of the schema', async () => {
		const names = new Set<string>();
		spy = jest.spyOn(pg.Client.prototype, 'query');
		for (let i = 0; i < 3; i++) await new JobStore(pool, { schema }).stats('same-name');
		for (const [query] of spy.mock.calls)
			if (typeof query === 'object' && query !== null && (query as { name?: string }).name)
				names.add((query as { name: string }).name);
		expect(names.size).toBe(1);
	});

	it('many distinct lease limits (more than get a statement of their own) all lease correctly', async () => {
		const queue = 'many-limits';
		await enqueue(queue, 200);
		let leasedTotal = 0;
		for (let limit = 1; limit <= 14; limit++) {
			const jobs = await store.lease({ queue, limit });
			expect(jobs).toHaveLength(limit);
			leasedTotal += jobs.length;
			await succeedAll(store, jobs);
		}
		expect((await expectCountsExact(queue)).done).toBe(leasedTotal);
	});

	it('keeps working after the schema is dropped and migrated again under the same name', async () => {
		const other = `${schema}_re`;
		const s1 = await freshStore(pool, other);
		for (let i = 0; i < 8; i++) await cycle(s1, `re-${i}`);
		const s2 = await freshStore(pool, other);
		await cycle(s2, 're-again');
		await dropSchema(pool, other);
	});

	// Prepared statements cast the domain columns of jobs to their base types (see below); a
	// statement that selects them without the cast relies on PostgreSQL describing a domain
	// column by its base type, so the driver still reads numbers and text.
	it('a statement selecting the domain columns of jobs without casts reads them as their base types', async () => {
		const queue = 'domains-uncast';
		const enqueued = ok((await store.enqueue([{ queue, payload: { n: 1 }, maxAttempts: 2 }]))[0]);
		const [leased] = await store.lease({ queue, limit: 1 });
		ok(
			(
				await store.extendLease([
					{ jobId: leased.id, attemptId: leased.attempt_id, checkpoint: 'half' },
				])
			)[0],
		);
		const uncast = `SELECT attempts, max_attempts, error_class, attempt_checkpoint FROM "${schema}".jobs WHERE id = $1`;
		const running = await pool.query(uncast, [enqueued.jobId]);
		const domainTypes = (
			await pool.query<{ name: string; base: number }>(
				`SELECT a.attname AS name, t.typbasetype::int AS base
				FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
				WHERE a.attrelid = $1::regclass AND t.typtype = 'd'`,
				[`"${schema}".jobs`],
			)
		).rows;
		// The four columns are domains, and each is described by its base type's id.
		expect(domainTypes.map((column) => column.name).sort()).toEqual(
			['attempt_checkpoint', 'attempts', 'error_class', 'max_attempts'].sort(),
		);
		for (const field of running.fields)
			expect(field.dataTypeID, field.name).toBe(
				domainTypes.find((column) => column.name === field.name)!.base,
			);
		expect(running.rows[0]).toEqual({
			attempts: 1,
			max_attempts: 2,
			error_class: null,
			attempt_checkpoint: 'half',
		});
		await store.complete([
			{
				jobId: leased.id,
				attemptId: leased.attempt_id,
				outcome: 'failed',
				errorClass: 'needs_mapping',
			},
		]);
		expect((await pool.query(uncast, [enqueued.jobId])).rows[0]).toMatchObject({
			attempts: 1,
			error_class: 'needs_mapping',
		});
	});

	// A prepared statement whose result columns change type fails with "cached plan must not
	// change result type" until its connection closes. Domains made by a new migration have new
	// type ids, so prepared statements return the base types of the domain columns of jobs.
	it('the prepared statements of every store call keep working on their connection after the schema is dropped and migrated again', async () => {
		const other = `${schema}_one`;
		const single = newPool(1);
		try {
			const everyStatement = async (s: JobStore, round: string) => {
				const queue = `one-${round}`;
				const keyed = ok(
					(await s.enqueue([{ queue, payload: { n: 1 }, idempotencyKey: `${round}-k` }]))[0],
				);
				const plain = ok((await s.enqueue([{ queue, payload: { n: 2 }, maxAttempts: 1 }]))[0]);
				ok((await s.enqueue([{ queue, payload: { n: 1 }, idempotencyKey: `${round}-k` }]))[0]);
				await s.enqueue([
					{ queue, payload: { n: 3 } },
					{ queue, payload: { n: 4 }, idempotencyKey: `${round}-k2` },
				]);
				expect(await s.peekJob(queue)).not.toBeNull();
				expect(await s.nextDueInMs(queue)).toBeNull();
				const one = await s.lease({ queue, limit: 1 });
				const rest = await s.lease({ queue, limit: 5 });
				const leased = [...one, ...rest];
				expect(leased).toHaveLength(4);
				ok(
					(
						await s.extendLease([
							{ jobId: leased[0].id, attemptId: leased[0].attempt_id, checkpoint: 'half' },
						])
					)[0],
				);
				const results = await s.complete([
					{ jobId: leased[0].id, attemptId: leased[0].attempt_id, outcome: 'succeeded' },
					{
						jobId: leased[1].id,
						attemptId: leased[1].attempt_id,
						outcome: 'failed',
						errorClass: 'needs_mapping',
					},
					{ jobId: leased[2].id, attemptId: leased[2].attempt_id, outcome: 'retry' },
					{ jobId: leased[3].id, attemptId: leased[3].attempt_id, outcome: 'release' },
				]);
				for (const result of results) expect(ok(result).applied).toBe(true);
				const released = await s.lease({ queue, limit: 1 });
				expect(released.map((job) => job.id)).toEqual([leased[3].id]);
				await succeedAll(s, released);
				expect(await s.getStatus(keyed.jobId, keyed.statusToken!)).not.toBeNull();
				expect(
					(await s.getStatusMany([{ jobId: plain.jobId, token: plain.statusToken! }]))[0],
				).not.toBeNull();
				expect(await s.getJobs([keyed.jobId, plain.jobId])).toHaveLength(2);
				expect((await s.stats(queue))[0].queued + (await s.stats(queue))[0].done).toBeGreaterThan(
					0,
				);
				const claimed = ok((await s.claim([{ scope: queue, key: 'c', fingerprint: 'f' }]))[0]);
				ok(
					(
						await s.completeClaims([
							{ scope: queue, key: 'c', claimId: claimed.claimId, result: 1 },
						])
					)[0],
				);
				ok((await s.claim([{ scope: queue, key: 'c', fingerprint: 'f' }]))[0]);
				const failing = ok((await s.claim([{ scope: queue, key: 'd' }]))[0]);
				ok((await s.failClaims([{ scope: queue, key: 'd', claimId: failing.claimId }]))[0]);
				const expiring = ok((await s.enqueue([{ queue: `${queue}-x`, payload: {} }]))[0]);
				expect(await s.lease({ queue: `${queue}-x`, limit: 1 })).toHaveLength(1);
				await single.query(
					`UPDATE "${other}".jobs SET lease_until = now() - interval '1 second', attempt_lease_until = now() - interval '1 second' WHERE id = $1`,
					[expiring.jobId],
				);
				const recovered = await s.lease({ queue: `${queue}-x`, limit: 1 });
				expect(recovered.map((job) => [job.id, job.attempts])).toEqual([[expiring.jobId, 2]]);
				ok(
					(
						await s.writeOutbox([
							{ eventId: `${round}-e`, eventType: 'thing.happened', payload: { n: 1 } },
						])
					)[0],
				);
			};
			// PostgreSQL 16 and later list the result types of the connection's prepared
			// statements: none may be a domain, whichever statements ran.
			const noDomainResults = async () => {
				const [{ version }] = (
					await single.query<{ version: number }>(
						`SELECT current_setting('server_version_num')::int AS version`,
					)
				).rows;
				if (version < 160000) return;
				const { rows } = await single.query<{ name: string; type: string }>(
					`SELECT p.name, t.oid::regtype::text AS type
					FROM pg_prepared_statements p, unnest(p.result_types) AS r (oid)
					JOIN pg_type t ON t.oid = r.oid WHERE t.typtype = 'd'`,
				);
				expect(rows).toEqual([]);
			};
			const s1 = await freshStore(single, other);
			await everyStatement(s1, 'before');
			await noDomainResults();
			const s2 = await freshStore(single, other);
			await everyStatement(s2, 'after');
			await noDomainResults();
		} finally {
			await dropSchema(single, other);
			await single.end();
		}
	});
});

describe('complete and heartbeat rewrites', () => {
	it('a mixed batch: applied items, a superseded attempt, an unknown job, a finished job, and callback events', async () => {
		const queue = 'mixed';
		const ids = (
			await store.enqueue([
				{ queue, payload: { n: 0 }, callbackUrl: 'https://example.com/a' },
				{ queue, payload: { n: 1 }, callbackUrl: 'https://example.com/b' },
				{ queue, payload: { n: 2 } },
				{ queue, payload: { n: 3 } },
			])
		).map((result) => ok(result).jobId);
		const leased = await store.lease({ queue, limit: 4 });
		const byId = new Map(leased.map((job) => [job.id, job]));
		const first = ok(
			(
				await store.complete([
					{ jobId: ids[3], attemptId: byId.get(ids[3])!.attempt_id, outcome: 'succeeded' },
				])
			)[0],
		);
		expect(first.applied).toBe(true);
		const results = (
			await store.complete([
				{
					jobId: ids[0],
					attemptId: byId.get(ids[0])!.attempt_id,
					outcome: 'succeeded',
					result: { ok: true, nothing: null },
				},
				{
					jobId: ids[1],
					attemptId: byId.get(ids[1])!.attempt_id,
					outcome: 'failed',
					errorCode: 'E1',
				},
				{ jobId: ids[2], attemptId: '00000000-0000-4000-8000-000000000000', outcome: 'succeeded' },
				{
					jobId: '00000000-0000-4000-8000-000000000001',
					attemptId: '00000000-0000-4000-8000-000000000002',
					outcome: 'succeeded',
				},
				{ jobId: ids[3], attemptId: byId.get(ids[3])!.attempt_id, outcome: 'succeeded' },
			])
		).map(ok);
		expect(
			results.map((result) => [result.applied, result.status, result.leaseLostReason]),
		).toEqual([
			[true, 'done', null],
			[true, 'failed', null],
			[false, 'running', 'attempt_superseded'],
			[false, null, 'not_found'],
			[false, 'done', 'job_done'],
		]);
		expect(results[0].callbackEventId).toBe(`job_${ids[0]}_done_1`);
		expect(results[1].callbackEventId).toBe(`job_${ids[1]}_failed_1`);
		expect(results.slice(2).map((result) => result.callbackEventId)).toEqual([null, null, null]);
		const { rows } = await pool.query(`SELECT result FROM "${schema}".jobs WHERE id = $1`, [
			ids[0],
		]);
		expect(rows[0].result).toEqual({ ok: true, nothing: null });
		const events = await pool.query(
			`SELECT idempotency_key FROM "${schema}".jobs WHERE queue = 'callbacks' AND idempotency_key LIKE 'job_%' AND payload->'payload'->>'queue' = $1 ORDER BY 1`,
			[queue],
		);
		expect(events.rows.map((row) => row.idempotency_key).sort()).toEqual(
			[`job_${ids[0]}_done_1`, `job_${ids[1]}_failed_1`].sort(),
		);
	});

	/**
	 * Jobs of `queue` for comparing completion or heartbeat statements: `count` jobs (the first
	 * with a callback URL), all leased (for `leaseMs`, else the default), the fourth already
	 * completed.
	 */
	async function leasedForCompletion(queue: string, count: number, leaseMs?: number) {
		const ids = (
			await store.enqueue(
				Array.from({ length: count }, (_, n) => ({
					queue,
					payload: { n },
					...(n === 0 ? { callbackUrl: 'https://example.com/a' } : {}),
				})),
			)
		).map((result) => ok(result).jobId);
		const attemptOf = new Map(
			(await store.lease({ queue, limit: count, leaseMs })).map((job) => [job.id, job.attempt_id]),
		);
		ok(
			(
				await store.complete([
					{ jobId: ids[3], attemptId: attemptOf.get(ids[3])!, outcome: 'succeeded' },
				])
			)[0],
		);
		return { ids, attemptOf, attempt: (index: number) => attemptOf.get(ids[index])! };
	}

	/**
	 * What completions of `queue`'s jobs left, comparable between queues: the answers, the job
	 * rows, the callback events (which job, and their bodies); the counts are checked.
	 */
	async function completionAftermath(queue: string, ids: string[], results: CompleteResult[]) {
		const { rows } = await pool.query(
			`SELECT payload->>'n' AS n, status, result, result IS NULL AS sql_null, attempts, error_code,
				error_message, error_class, error_node, error_workflow, error_execution,
				attempt_workflow_id, attempt_execution_id, run_at = created_at AS run_at_kept,
				lease_until IS NULL AS lease_ended, finished_at IS NOT NULL AS finished
			 FROM "${schema}".jobs WHERE queue = $1 ORDER BY 1`,
			[queue],
		);
		const events = await pool.query(
			`SELECT payload->'payload' AS event FROM "${schema}".jobs
			 WHERE queue = 'callbacks' AND payload->'payload'->>'queue' = $1`,
			[queue],
		);
		await expectCountsExact(queue);
		return {
			answers: results.map((result) => ({
				...result,
				runAt: null,
				callbackEventId: result.callbackEventId?.replace(ids[0], 'first') ?? null,
			})),
			rows,
			events: events.rows.map(({ event }) => ids.indexOf(event.job_id)),
			eventBodies: events.rows.map(({ event }) => ({
				...event,
				job_id: undefined,
				queue: undefined,
				finished_at: undefined,
			})),
		};
	}

	/**
	 * Sends `items` through `call` one call per item, or all in one call, and answers each item's
	 * result and the texts of the statements sent that contain `marker`.
	 */
	async function oneByOneOrTogether<Item, Result>(
		items: Item[],
		oneByOne: boolean,
		call: (batch: Item[]) => Promise<Array<Result | DurableJobsError>>,
		marker: string,
	): Promise<{ results: Result[]; texts: string[] }> {
		const { value: results, statements } = await statementsSentDuring(async () => {
			if (!oneByOne) return (await call(items)).map(ok);
			const answered: Result[] = [];
			for (const item of items) answered.push(...(await call([item])).map(ok));
			return answered;
		});
		return { results, texts: statements.filter((text) => text.includes(marker)) };
	}

	/** Two completions answered and wrote alike, and wrote the first job's callback event only. */
	function expectSameAftermath(
		actual: Awaited<ReturnType<typeof completionAftermath>>,
		expected: Awaited<ReturnType<typeof completionAftermath>>,
	): void {
		expect(actual.answers).toEqual(expected.answers);
		expect(actual.rows).toEqual(expected.rows);
		expect(actual.events).toEqual([0]);
		expect(expected.events).toEqual([0]);
		expect(actual.eventBodies).toEqual(expected.eventBodies);
	}

	it('a batch where every item succeeded runs a statement of its own, which answers and writes as the statement for all outcomes does', async () => {
		const unknownJob = '00000000-0000-4000-8000-000000000001';
		const unknownAttempt = '00000000-0000-4000-8000-000000000002';
		/** The same completions; `extra` adds items that make the batch one of mixed outcomes. */
		async function scenario(queue: string, extra: CompleteInput[]) {
			const { ids, attempt } = await leasedForCompletion(queue, 4);
			const { value: answers, statements } = await statementsSentDuring(async () =>
				store.complete([
					{
						jobId: ids[0],
						attemptId: attempt(0),
						outcome: 'succeeded',
						result: { ok: true, nothing: null },
						errorWorkflow: 'wf-1',
						errorExecution: 'ex-1',
					},
					{ jobId: ids[1], attemptId: attempt(1), outcome: 'succeeded', errorCode: 'ignored' },
					{ jobId: ids[2], attemptId: unknownAttempt, outcome: 'succeeded' },
					{ jobId: unknownJob, attemptId: unknownAttempt, outcome: 'succeeded' },
					{ jobId: ids[3], attemptId: attempt(3), outcome: 'succeeded' },
					...extra,
				]),
			);
			const results = answers.map(ok);
			const texts = statements.filter((text) => text.includes('jsonb_to_recordset'));
			return { texts, ...(await completionAftermath(queue, ids, results.slice(0, 5))) };
		}
		const succeededOnly = await scenario('all-succeeded', []);
		// Another attempt than the item before it: a repeat of one job and attempt would go in a
		// statement of its own (see writeRows).
		const mixed = await scenario('all-succeeded-and-a-release', [
			{ jobId: unknownJob, attemptId: randomUUID(), outcome: 'release' },
		]);
		expect(succeededOnly.texts).toHaveLength(1);
		expect(succeededOnly.texts[0]).not.toContain('outcome text');
		expect(mixed.texts).toHaveLength(1);
		expect(mixed.texts[0]).toContain('outcome text');
		expect(succeededOnly.answers.map((a) => [a.applied, a.status, a.leaseLostReason])).toEqual([
			[true, 'done', null],
			[true, 'done', null],
			[false, 'running', 'attempt_superseded'],
			[false, null, 'not_found'],
			[false, 'done', 'job_done'],
		]);
		expect(succeededOnly.answers[0].callbackEventId).toBe('job_first_done_1');
		expect(succeededOnly.rows[0]).toMatchObject({
			status: 'done',
			result: { ok: true, nothing: null },
			error_code: null,
			attempt_workflow_id: 'wf-1',
			attempt_execution_id: 'ex-1',
			lease_ended: true,
			finished: true,
			run_at_kept: true,
		});
		expectSameAftermath(succeededOnly, mixed);
	});

	it('a completion of one succeeded item runs a statement of its own, which answers and writes as the batch statement does', async () => {
		const unknownJob = '00000000-0000-4000-8000-000000000003';
		const unknownAttempt = '00000000-0000-4000-8000-000000000004';
		async function scenario(queue: string, oneByOne: boolean) {
			const { ids, attemptOf, attempt } = await leasedForCompletion(queue, 6);
			// ids[5] failed once with a retry: its success must clear that attempt's error.
			ok(
				(
					await store.complete([
						{
							jobId: ids[5],
							attemptId: attemptOf.get(ids[5])!,
							outcome: 'retry',
							errorCode: 'flaky',
							errorMessage: 'try again',
							errorNode: 'HTTP Request',
							errorWorkflow: 'wf-0',
							errorExecution: 'ex-0',
							delayMs: 0,
						},
					])
				)[0],
			);
			const [retried] = await store.lease({ queue, limit: 1 });
			expect(retried.id).toBe(ids[5]);
			attemptOf.set(ids[5], retried.attempt_id);
			// The lease of ids[4] knew its n8n ids: the completing execution's do not replace them.
			await pool.query(
				`UPDATE "${schema}".jobs SET attempt_workflow_id = 'wf-lease', attempt_execution_id = 'ex-lease'
				 WHERE id = $1`,
				[ids[4]],
			);
			const items: CompleteInput[] = [
				{
					jobId: ids[0],
					attemptId: attempt(0),
					outcome: 'succeeded',
					result: { ok: true, nothing: null },
					errorWorkflow: 'wf-1',
					errorExecution: 'ex-1',
				},
				{ jobId: ids[1], attemptId: attempt(1), outcome: 'succeeded', result: null },
				{ jobId: ids[2], attemptId: unknownAttempt, outcome: 'succeeded' },
				{ jobId: unknownJob, attemptId: unknownAttempt, outcome: 'succeeded' },
				{ jobId: ids[3], attemptId: attempt(3), outcome: 'succeeded' },
				{
					jobId: ids[4],
					attemptId: attempt(4),
					outcome: 'succeeded',
					result: 'text',
					errorWorkflow: 'wf-2',
					errorExecution: 'ex-2',
				},
				{ jobId: ids[5], attemptId: attempt(5), outcome: 'succeeded', result: { n: 5 } },
			];
			const { results, texts } = await oneByOneOrTogether(
				items,
				oneByOne,
				(batch) => store.complete(batch),
				"SET status = 'done'",
			);
			return { texts, ...(await completionAftermath(queue, ids, results)) };
		}
		const batch = await scenario('one-succeeded-batch', false);
		const single = await scenario('one-succeeded-single', true);
		expect(batch.texts).toHaveLength(1);
		expect(batch.texts[0]).toContain('jsonb_to_recordset');
		expect(single.texts).toHaveLength(7);
		for (const text of single.texts) expect(text).not.toContain('jsonb_to_recordset');
		expect(single.answers.map((a) => [a.applied, a.status, a.leaseLostReason])).toEqual([
			[true, 'done', null],
			[true, 'done', null],
			[false, 'running', 'attempt_superseded'],
			[false, null, 'not_found'],
			[false, 'done', 'job_done'],
			[true, 'done', null],
			[true, 'done', null],
		]);
		expect(single.answers[0].callbackEventId).toBe('job_first_done_1');
		expect(single.rows[0]).toMatchObject({
			result: { ok: true, nothing: null },
			attempt_workflow_id: 'wf-1',
			attempt_execution_id: 'ex-1',
		});
		expect(single.rows[1]).toMatchObject({ result: null, sql_null: true });
		expect(single.rows[4]).toMatchObject({
			result: 'text',
			attempt_workflow_id: 'wf-lease',
			attempt_execution_id: 'ex-lease',
		});
		expect(single.rows[5]).toMatchObject({
			attempts: 2,
			error_code: null,
			error_message: null,
			error_class: null,
			error_node: null,
			error_workflow: null,
			error_execution: null,
			run_at_kept: false,
		});
		expectSameAftermath(single, batch);
		expect(single.eventBodies[0]).toMatchObject({
			status: 'done',
			result: { ok: true, nothing: null },
		});
	});

	/**
	 * A schema of its own whose statistics say no job runs (analysed before 2,500 of its 3,000
	 * queued jobs were leased, beside 20,000 done ones), one running job of it, and the nodes of
	 * the plan `query` gets there. An unnamed statement is planned for its values (a custom plan),
	 * as without prepared statements and in the first executions of a prepared one.
	 */
	async function customPlanWhileStatisticsSayNoJobRuns(
		query: (
			schema: string,
			job: { id: string; attempt_id: string },
		) => {
			text: string;
			values: unknown[];
		},
	): Promise<string[]> {
		const other = `${schema}_plan`;
		const planned = await freshStore(pool, other);
		try {
			await pool.query(
				`INSERT INTO "${other}".jobs (id, queue, payload, status, finished_at)
				 SELECT gen_random_uuid(), 'plan', '{}', 'done', now() FROM generate_series(1, 20000)`,
			);
			ok(
				(
					await planned.enqueue(
						Array.from({ length: 3000 }, (_, n) => ({ queue: 'plan', payload: { n } })),
					)
				)[0],
			);
			await pool.query(`ANALYZE "${other}".jobs`);
			const [job] = await planned.lease({ queue: 'plan', limit: 2500 });
			return await planNodes(pool, query(other, job));
		} finally {
			await dropSchema(pool, other);
		}
	}

	/** The plan reads the job by primary key, and neither every running job nor the table. */
	function expectReadByPrimaryKey(nodes: string[]): void {
		expect(nodes).toContain('Index Scan jobs_pkey');
		expect(nodes.filter((node) => node.includes('jobs_running'))).toEqual([]);
		expect(nodes.filter((node) => node.startsWith('Seq Scan'))).toEqual([]);
	}

	it('a completion of one item reads its job by primary key, in a custom plan too, while statistics say no job runs', async () => {
		expectReadByPrimaryKey(
			await customPlanWhileStatisticsSayNoJobRuns((other, job) =>
				completeQuery(other, `"${other}"`, [completeRow(0, job, 'succeeded')], 'callbacks'),
			),
		);
	});

	it('two items of one attempt in one completion: the first applies, the second is answered as it would be after it', async () => {
		const queue = 'complete-repeat';
		await enqueue(queue, 2);
		const [job, other] = await store.lease({ queue, limit: 2 });
		const [first, elsewhere, again] = (
			await store.complete([
				{
					jobId: job.id,
					attemptId: job.attempt_id,
					outcome: 'succeeded',
					result: { from: 'first' },
				},
				{ jobId: other.id, attemptId: other.attempt_id, outcome: 'succeeded' },
				{
					jobId: job.id,
					attemptId: job.attempt_id,
					outcome: 'failed',
					errorCode: 'late_duplicate',
				},
			])
		).map(ok);
		expect(first).toMatchObject({ applied: true, status: 'done' });
		expect(elsewhere).toMatchObject({ applied: true, status: 'done' });
		// In one statement it would have read the job as still running: attempt_superseded.
		expect(again).toMatchObject({ applied: false, status: 'done', leaseLostReason: 'job_done' });
		const { rows } = await pool.query(
			`SELECT status, result, error_code FROM "${schema}".jobs WHERE id = $1`,
			[job.id],
		);
		expect(rows[0]).toEqual({ status: 'done', result: { from: 'first' }, error_code: null });
		expect(await expectCountsExact(queue)).toMatchObject({ done: 2, failed: 0 });
	});

	it('concurrent calls of one flush, one with only successes and one with a failure, share the statement for all outcomes and each gets its own answer', async () => {
		const queue = 'merged-outcomes';
		await enqueue(queue, 4);
		const leased = await store.lease({ queue, limit: 4 });
		const item = (index: number, outcome: CompleteInput['outcome']): CompleteInput => ({
			jobId: leased[index].id,
			attemptId: leased[index].attempt_id,
			outcome,
		});
		const flushesBefore = store.coalescingStats()!.mergedFlushes;
		const [successes, withFailure] = await Promise.all([
			store.complete([item(0, 'succeeded'), item(1, 'succeeded')]),
			store.complete([item(2, 'succeeded'), item(3, 'failed')]),
		]);
		expect(store.coalescingStats()!.mergedFlushes).toBe(flushesBefore + 1);
		expect(successes.map(ok).map((r) => [r.applied, r.status])).toEqual([
			[true, 'done'],
			[true, 'done'],
		]);
		expect(withFailure.map(ok).map((r) => [r.applied, r.status])).toEqual([
			[true, 'done'],
			[true, 'failed'],
		]);
		await expectCountsExact(queue);
	});

	it('a batch of 300 completions where every job has a callback URL gives 300 events', async () => {
		const queue = 'many-callbacks';
		await enqueue(queue, 300, { callbackUrl: 'https://example.com/hook' });
		const leased = await store.lease({ queue, limit: 300 });
		const results = await succeedAll(store, leased);
		expect(
			results.every(
				(result) =>
					result.applied && /^job_[0-9a-f-]{36}_done_1$/.test(result.callbackEventId ?? ''),
			),
		).toBe(true);
		expect(new Set(results.map((result) => result.callbackEventId)).size).toBe(300);
	});

	it('callback URLs on a few jobs of a batch, the last among them: each of those gets its event, the others none', async () => {
		const queue = 'sparse-callbacks';
		const withCallback = new Set([3, 17, 18, 40, 63]);
		const results = await store.enqueue(
			Array.from({ length: 64 }, (_, n) => ({
				queue,
				payload: { n },
				...(withCallback.has(n) ? { callbackUrl: `https://example.com/hook/${n}` } : {}),
			})),
		);
		const ids = results.map((result) => ok(result).jobId);
		const leased = await store.lease({ queue, limit: 64 });
		// Completed in reverse order of enqueue, so the events are not the first rows read.
		const completed = await succeedAll(store, [...leased].reverse());
		const eventByJob = new Map(
			[...leased].reverse().map((job, index) => [job.id, completed[index].callbackEventId]),
		);
		ids.forEach((id, n) =>
			expect(eventByJob.get(id)).toBe(withCallback.has(n) ? `job_${id}_done_1` : null),
		);
		const events = await pool.query(
			`SELECT payload->'payload'->>'job_id' AS job_id, payload->>'destination' AS destination
			 FROM "${schema}".jobs WHERE queue = 'callbacks' AND payload->'payload'->>'queue' = $1`,
			[queue],
		);
		expect(events.rows.map((row) => row.destination).sort()).toEqual(
			[...withCallback].map((n) => `https://example.com/hook/${n}`).sort(),
		);
		expect(events.rows.map((row) => row.job_id).sort()).toEqual(
			[...withCallback].map((n) => ids[n]).sort(),
		);
	});
	it('heartbeat extends only the current attempt of a running job', async () => {
		const queue = 'heartbeat';
		const [id] = await enqueue(queue, 1);
		const [job] = await store.lease({ queue, limit: 1, leaseMs: 5_000 });
		const [extended, stale, unknown] = (
			await store.extendLease([
				{ jobId: id, attemptId: job.attempt_id, leaseMs: 120_000 },
				{ jobId: id, attemptId: '00000000-0000-4000-8000-000000000000' },
				{ jobId: '00000000-0000-4000-8000-000000000001', attemptId: job.attempt_id },
			])
		).map(ok);
		expect(extended.extended).toBe(true);
		expect(extended.leaseUntil!.getTime()).toBeGreaterThan(Date.now() + 100_000);
		expect(stale).toMatchObject({ extended: false, currentStatus: 'running' });
		expect(unknown).toMatchObject({ extended: false, currentStatus: null });
	});

	it('a heartbeat of one item runs a statement of its own, which answers and writes as the batch statement does', async () => {
		const unknownJob = '00000000-0000-4000-8000-000000000005';
		const unknownAttempt = '00000000-0000-4000-8000-000000000006';
		async function scenario(queue: string, oneByOne: boolean) {
			const { ids, attempt } = await leasedForCompletion(queue, 6, 5_000);
			// ids[1] has a checkpoint from an earlier heartbeat, which one without a checkpoint keeps.
			ok(
				(
					await store.extendLease([
						{ jobId: ids[1], attemptId: attempt(1), checkpoint: 'crm_request' },
					])
				)[0],
			);
			// The lease of ids[2] knew its n8n ids: a heartbeat's do not replace them.
			await pool.query(
				`UPDATE "${schema}".jobs SET attempt_workflow_id = 'wf-lease', attempt_execution_id = 'ex-lease'
				 WHERE id = $1`,
				[ids[2]],
			);
			const items = [
				{
					jobId: ids[0],
					attemptId: attempt(0),
					leaseMs: 120_000,
					checkpoint: 'sent_mail',
					workflowId: 'wf-1',
					executionId: 'ex-1',
				},
				{ jobId: ids[1], attemptId: attempt(1), leaseMs: 60_000 },
				{ jobId: ids[2], attemptId: attempt(2), workflowId: 'wf-2', executionId: 'ex-2' },
				{ jobId: ids[3], attemptId: attempt(3), checkpoint: 'too_late' },
				{ jobId: ids[4], attemptId: unknownAttempt, checkpoint: 'stale' },
				{ jobId: unknownJob, attemptId: unknownAttempt },
				{ jobId: ids[5], attemptId: attempt(5), checkpoint: null },
			];
			const { results, texts } = await oneByOneOrTogether(
				items,
				oneByOne,
				(batch) => store.extendLease(batch),
				'SET lease_until =',
			);
			const { rows } = await pool.query(
				`SELECT payload->>'n' AS n, status, attempts, attempt_checkpoint,
					attempt_checkpoint_at IS NOT NULL AS checkpoint_at_set, attempt_workflow_id, attempt_execution_id,
					round(extract(epoch FROM lease_until - updated_at) * 1000)::int AS lease_ms_from_update
				 FROM "${schema}".jobs WHERE queue = $1 ORDER BY 1`,
				[queue],
			);
			return {
				texts,
				answers: results.map((result) => ({
					extended: result.extended,
					currentStatus: result.currentStatus,
					leaseUntilSet: result.leaseUntil !== null,
				})),
				leaseLeft: results.map((result) =>
					result.leaseUntil === null
						? null
						: Math.round((result.leaseUntil.getTime() - Date.now()) / 10_000),
				),
				rows,
			};
		}
		const batch = await scenario('one-heartbeat-batch', false);
		const single = await scenario('one-heartbeat-single', true);
		expect(batch.texts).toHaveLength(1);
		expect(batch.texts[0]).toContain('jsonb_to_recordset');
		expect(single.texts).toHaveLength(7);
		for (const text of single.texts) expect(text).not.toContain('jsonb_to_recordset');
		expect(single.answers).toEqual([
			{ extended: true, currentStatus: 'running', leaseUntilSet: true },
			{ extended: true, currentStatus: 'running', leaseUntilSet: true },
			{ extended: true, currentStatus: 'running', leaseUntilSet: true },
			{ extended: false, currentStatus: 'done', leaseUntilSet: false },
			{ extended: false, currentStatus: 'running', leaseUntilSet: false },
			{ extended: false, currentStatus: null, leaseUntilSet: false },
			{ extended: true, currentStatus: 'running', leaseUntilSet: true },
		]);
		// Lease ends in tens of seconds from now: 120 s, 60 s, the default, …
		expect(single.leaseLeft.slice(0, 2)).toEqual([12, 6]);
		expect(single.rows[0]).toMatchObject({
			attempt_checkpoint: 'sent_mail',
			checkpoint_at_set: true,
			attempt_workflow_id: 'wf-1',
			attempt_execution_id: 'ex-1',
			lease_ms_from_update: 120_000,
		});
		expect(single.rows[1]).toMatchObject({
			attempt_checkpoint: 'crm_request',
			checkpoint_at_set: true,
			attempt_workflow_id: null,
			lease_ms_from_update: 60_000,
		});
		expect(single.rows[2]).toMatchObject({
			attempt_checkpoint: null,
			checkpoint_at_set: false,
			attempt_workflow_id: 'wf-lease',
			attempt_execution_id: 'ex-lease',
		});
		expect(single.rows[3]).toMatchObject({ status: 'done', attempt_checkpoint: null });
		expect(single.rows[4]).toMatchObject({
			status: 'running',
			attempt_checkpoint: null,
			lease_ms_from_update: 5_000,
		});
		expect(single.answers).toEqual(batch.answers);
		expect(single.leaseLeft).toEqual(batch.leaseLeft);
		expect(single.rows).toEqual(batch.rows);
	});

	it('a heartbeat of one item reads its job by primary key, in a custom plan too, while statistics say no job runs', async () => {
		expectReadByPrimaryKey(
			await customPlanWhileStatisticsSayNoJobRuns((other, job) =>
				extendLeaseQuery(other, `"${other}"`, [
					{
						ord: 0,
						job_id: job.id,
						attempt_id: job.attempt_id,
						lease_ms: 60_000,
						checkpoint: null,
						workflow_id: null,
						execution_id: null,
					},
				]),
			),
		);
	});

	it('a JSON null payload is stored as JSON null; a key-less batch is one INSERT without a transaction', async () => {
		const { value: answers, statements: texts } = await statementsSentDuring(async () =>
			store.enqueue(
				[
					{ queue: 'nulls', payload: null },
					{ queue: 'nulls', payload: [1, null] },
				],
				{ allOrNothing: true },
			),
		);
		const results = answers.map(ok);
		expect(texts.filter((text) => /^(BEGIN|COMMIT)/.test(text))).toEqual([]);
		expect(texts.filter((text) => /INSERT INTO/.test(text))).toHaveLength(1);
		const { rows } = await pool.query(
			`SELECT payload, payload IS NULL AS sql_null, payload_fingerprint FROM "${schema}".jobs WHERE id = ANY($1::uuid[]) ORDER BY seq`,
			[results.map((result) => result.jobId)],
		);
		expect(rows).toEqual([
			{ payload: null, sql_null: false, payload_fingerprint: null },
			{ payload: [1, null], sql_null: false, payload_fingerprint: null },
		]);
		expect(
			results.every(
				(result) => typeof result.statusToken === 'string' && result.statusToken.length > 40,
			),
		).toBe(true);
		expect(await store.getStatus(results[0].jobId, results[0].statusToken!)).not.toBeNull();
	});
});

describe('notifications', () => {
	/** A client LISTENing on the schema's channel; `heard` holds the payloads of `queue`. */
	async function listening(queue: string) {
		const listener = new pg.Client({ connectionString: databaseUrl() });
		await listener.connect();
		const heard: Array<{ at: number; from: number }> = [];
		listener.on('notification', (message) => {
			if (message.payload === queue) heard.push({ at: Date.now(), from: message.processId });
		});
		await listener.query(`LISTEN "${notifyChannel(schema)}"`);
		/** Everything sent so far has arrived: notices come before the answer to a later query. */
		const caughtUp = async () => {
			await finishNoticesSent();
			await listener.query('SELECT 1');
		};
		return { listener, heard, caughtUp };
	}

	it('retry notifies the queue in its own commit; a finished job is announced after its commit, by a statement of its own; lease and heartbeat do not notify', async () => {
		const queue = 'notify-me';
		await enqueue(queue, 3, { maxAttempts: 5 });
		const { listener, heard, caughtUp } = await listening(queue);
		try {
			const leased = await store.lease({ queue, limit: 3 });
			await store.extendLease(leased.map((job) => ({ jobId: job.id, attemptId: job.attempt_id })));
			await caughtUp();
			await sleep(FINISH_NOTICE_INTERVAL_MS + 100);
			expect(heard).toEqual([]);

			// The completing statement sends nothing; the notice follows it, on its own.
			const { value: results, statements } = await statementsSentDuring(
				async () =>
					await store.complete([
						{ jobId: leased[0].id, attemptId: leased[0].attempt_id, outcome: 'succeeded' },
					]),
			);
			ok(results[0]);
			expect(statements.some((text) => text.includes('pg_notify'))).toBe(false);
			await caughtUp();
			expect(heard).toHaveLength(1);

			// A retry queues the job again; its statement's trigger notifies at its commit.
			await sleep(FINISH_NOTICE_INTERVAL_MS + 50);
			const retried = await store.complete([
				{ jobId: leased[1].id, attemptId: leased[1].attempt_id, outcome: 'retry', delayMs: 0 },
			]);
			expect(ok(retried[0]).status).toBe('queued');
			await caughtUp();
			expect(heard).toHaveLength(2);

			// Failing a job is a finish too; a completion that lost its lease announces nothing.
			await sleep(FINISH_NOTICE_INTERVAL_MS + 50);
			ok(
				(
					await store.complete([
						{ jobId: leased[2].id, attemptId: leased[2].attempt_id, outcome: 'failed' },
					])
				)[0],
			);
			await caughtUp();
			expect(heard).toHaveLength(3);
			await sleep(FINISH_NOTICE_INTERVAL_MS + 50);
			const stale = await store.complete([
				{ jobId: leased[0].id, attemptId: leased[0].attempt_id, outcome: 'succeeded' },
			]);
			expect(ok(stale[0]).applied).toBe(false);
			await caughtUp();
			expect(heard).toHaveLength(3);
		} finally {
			await listener.end();
		}
	});

	it('a burst of 60 concurrent completions is announced by a few notices, the last one after the last completion', async () => {
		const queue = 'notify-burst';
		await enqueue(queue, 60);
		const leased = await store.lease({ queue, limit: 60 });
		expect(leased).toHaveLength(60);
		const { listener, heard, caughtUp } = await listening(queue);
		try {
			await sleep(FINISH_NOTICE_INTERVAL_MS + 50);
			const started = Date.now();
			let lastCompletedAt = 0;
			await Promise.all(
				leased.map(async (job, index) => {
					await sleep((index % 10) * 40);
					ok(
						(
							await store.complete([
								{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' },
							])
						)[0],
					);
					lastCompletedAt = Math.max(lastCompletedAt, Date.now());
				}),
			);
			await caughtUp();
			const spanMs = lastCompletedAt - started;
			expect(heard.length).toBeGreaterThanOrEqual(1);
			// One notice per interval at most, plus the one that closes the burst.
			expect(heard.length).toBeLessThanOrEqual(Math.ceil(spanMs / FINISH_NOTICE_INTERVAL_MS) + 2);
			expect(heard.length).toBeLessThan(60);
			expect(heard[heard.length - 1].at).toBeGreaterThanOrEqual(lastCompletedAt);
		} finally {
			await listener.end();
		}
	});

	it('finish notices go on a connection of their own, not a pooled one: opened again after it is lost, closed by closeAllPools and after NOTICE_CONNECTION_IDLE_MS without a notice', async () => {
		const queue = 'notify-connection';
		const ownPool = newPool(2);
		const own = new JobStore(ownPool, { schema });
		const { listener, heard, caughtUp } = await listening(queue);
		/** The application name of a backend, or undefined once it is gone. */
		const applicationOf = async (pid: number): Promise<string | undefined> =>
			(
				await pool.query<{ application_name: string }>(
					'SELECT application_name FROM pg_stat_activity WHERE pid = $1',
					[pid],
				)
			).rows[0]?.application_name;
		try {
			await enqueue(queue, 3);
			const leased = await own.lease({ queue, limit: 3 });
			expect(leased).toHaveLength(3);
			await caughtUp();
			heard.length = 0;
			const finish = async (index: number): Promise<number> => {
				await sleep(FINISH_NOTICE_INTERVAL_MS + 50);
				const job = leased[index];
				ok(
					(
						await own.complete([{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' }])
					)[0],
				);
				await caughtUp();
				expect(heard).toHaveLength(index + 1);
				return heard[index].from;
			};

			const first = await finish(0);
			expect(await applicationOf(first)).toBe(NOTICE_APPLICATION_NAME);

			await pool.query('SELECT pg_terminate_backend($1)', [first]);
			await waitFor(async () => (await applicationOf(first)) === undefined, 'the kill');
			const second = await finish(1);
			expect(second).not.toBe(first);
			expect(await applicationOf(second)).toBe(NOTICE_APPLICATION_NAME);

			await closeAllPools();
			await waitFor(
				async () => (await applicationOf(second)) === undefined,
				'closeAllPools to close the notice connection',
				NOTICE_CONNECTION_IDLE_MS / 2,
			);

			const third = await finish(2);
			const openedAt = Date.now();
			expect(await applicationOf(third)).toBe(NOTICE_APPLICATION_NAME);
			await waitFor(
				async () => (await applicationOf(third)) === undefined,
				'the idle notice connection to close',
				NOTICE_CONNECTION_IDLE_MS + 10_000,
			);
			expect(Date.now() - openedAt).toBeGreaterThanOrEqual(NOTICE_CONNECTION_IDLE_MS - 1_000);
		} finally {
			await listener.end();
			await ownPool.end();
		}
	}, 60_000);

	/** Records the password of every notice connection that connects (and lets it connect). */
	function noticeLogins(): { passwords: unknown[] } {
		const logins = { passwords: [] as unknown[] };
		const connect = pg.Client.prototype.connect;
		spy = jest.spyOn(pg.Client.prototype, 'connect').mockImplementation(function (
			this: pg.Client,
			...args: unknown[]
		) {
			const client = this as unknown as {
				connectionParameters: { application_name?: string };
				password?: unknown;
			};
			if (client.connectionParameters.application_name === NOTICE_APPLICATION_NAME)
				logins.passwords.push(client.password);
			return (connect as unknown as (...callArgs: unknown[]) => Promise<void>).apply(this, args);
		});
		return logins;
	}

	it('the notice connection logs in as the pool does, with its password (which pg-pool keeps out of a spread of its options)', async () => {
		const queue = 'notify-password';
		// The server's own password where it asks for one (the embedded server does); with trust
		// authentication any password logs in, and the connection must still carry the pool's.
		const password = connectionConfig().password ?? 'the-pools-password';
		const withPassword = new pg.Pool(toPoolConfig(connectionConfig(databaseUrl(), { password })));
		withPassword.on('error', () => undefined);
		const own = new JobStore(withPassword, { schema });
		const { listener, heard, caughtUp } = await listening(queue);
		try {
			await enqueue(queue, 1);
			const [job] = await own.lease({ queue });
			await caughtUp();
			heard.length = 0;
			const logins = noticeLogins();
			await sleep(FINISH_NOTICE_INTERVAL_MS + 50);
			ok(
				(await own.complete([{ jobId: job.id, attemptId: job.attempt_id, outcome: 'failed' }]))[0],
			);
			await caughtUp();
			expect(heard).toHaveLength(1);
			expect(logins.passwords).toEqual([password]);
		} finally {
			await listener.end();
			await withPassword.end();
		}
	});

	it('after the notice connection was refused, none is tried for NOTICE_RECONNECT_DELAY_MS: the notices of that time are dropped', async () => {
		const refusing = new pg.Pool(
			toPoolConfig(connectionConfig(databaseUrl(), { database: `${schema}_no_such_database` })),
		);
		refusing.on('error', () => undefined);
		const context = { db: { pool: refusing }, schema } as unknown as StoreContext;
		const logins = noticeLogins();
		try {
			announceFinished(context, ['refused']);
			await finishNoticesSent();
			const refusedAt = Date.now();
			expect(logins.passwords).toHaveLength(1);
			await sleep(FINISH_NOTICE_INTERVAL_MS + 50);
			announceFinished(context, ['refused']);
			await finishNoticesSent();
			expect(logins.passwords).toHaveLength(1);
			await sleep(Math.max(0, refusedAt + NOTICE_RECONNECT_DELAY_MS + 100 - Date.now()));
			announceFinished(context, ['refused']);
			await finishNoticesSent();
			expect(logins.passwords).toHaveLength(2);
		} finally {
			await refusing.end();
		}
	}, 30_000);

	it('closeAllPools while the notice connection waits for a server that never answers: the connection is closed and the notice dropped', async () => {
		const sockets: Socket[] = [];
		const closed: Socket[] = [];
		// Reads what it is sent (so it sees the client hang up) and never answers.
		const silent = createServer((socket) => {
			sockets.push(socket);
			socket.on('close', () => closed.push(socket));
			socket.resume();
		});
		await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
		const { port } = silent.address() as { port: number };
		const waiting = new pg.Pool(
			toPoolConfig(
				connectionConfig(databaseUrl(), {
					host: '127.0.0.1',
					port,
					connectionTimeoutMs: 120_000,
				}),
			),
		);
		waiting.on('error', () => undefined);
		try {
			announceFinished({ db: { pool: waiting }, schema } as unknown as StoreContext, ['silent']);
			await waitFor(() => sockets.length === 1, 'the notice connection to reach the server');
			await closeAllPools();
			await waitFor(() => closed.length === 1, 'the notice connection to be closed');
			// The notice is dropped, not left waiting for a connect that never ends.
			const outcome = await Promise.race([
				finishNoticesSent(60_000).then(() => 'settled'),
				sleep(5_000).then(() => 'still waiting'),
			]);
			expect(outcome).toBe('settled');
		} finally {
			for (const socket of sockets) socket.destroy();
			await new Promise((resolve) => silent.close(resolve));
			await waiting.end();
		}
	}, 30_000);

	it('cancelling a job announces its queue; a notice that cannot be sent is dropped without an error', async () => {
		const queue = 'notify-cancel';
		const [jobId] = await enqueue(queue, 1);
		const { listener, heard, caughtUp } = await listening(queue);
		try {
			await sleep(FINISH_NOTICE_INTERVAL_MS + 50);
			const [cancelled] = await store.cancel([jobId]);
			expect(cancelled).toEqual({ id: jobId, cancelled: true, status: 'cancelled' });
			await caughtUp();
			expect(heard).toHaveLength(1);

			// The pool is closed right after the completion: the notice fails and is dropped.
			const closingPool = newPool(2);
			const closing = new JobStore(closingPool, { schema });
			const [otherId] = await enqueue(queue, 1);
			const [lease] = await closing.lease({ queue, limit: 1 });
			expect(lease.id).toBe(otherId);
			await caughtUp();
			// The enqueue's own notice.
			expect(heard).toHaveLength(2);
			await sleep(FINISH_NOTICE_INTERVAL_MS + 50);
			ok(
				(
					await closing.complete([
						{ jobId: lease.id, attemptId: lease.attempt_id, outcome: 'succeeded' },
					])
				)[0],
			);
			await closingPool.end();
			await caughtUp();
			expect(heard).toHaveLength(2);
		} finally {
			await listener.end();
		}
	});
});
