import { DurableJobsError, type QueueStats } from '../../src/core';
import { loggedPlans } from '../../scripts/lib/explain';
import { statsQuery } from '../../src/core/sql/status';
import { QUEUE } from './engine';
import type { OursEngine } from './ours';
import type { PgBossEngine } from './pgboss';
import { log, now, quoteIdent, round, summarize, vacuumAnalyzeSchema, type Summary } from './util';

export interface LiveRows {
	queued: number;
	running: number;
	failed: number;
}

export interface StatsMeasurement {
	retainedRows: number;
	live: LiveRows;
	loadSeconds: number;
	/** What the call returned, to show the counts are right (not just fast). */
	sample: Record<string, unknown>;
	calls: Summary;
	extra?: Record<string, unknown>;
}

const LOAD_CHUNK = 250_000;

function ok<T>(result: T | DurableJobsError): T {
	if (result instanceof DurableJobsError) throw result;
	return result;
}

/**
 * Our engine: `retained` finished jobs go in as queued rows (INSERT ... SELECT generate_series)
 * and are then moved to done by one UPDATE per chunk, the same status transition a complete
 * makes, so the jobs_after_update statement trigger counts them into job_counts. The live
 * queued / running / failed jobs then go through the public API (enqueue, lease, complete).
 */
export async function loadOurs(
	engine: OursEngine,
	retained: number,
	live: LiveRows,
): Promise<number> {
	const started = now();
	const s = quoteIdent(engine.schema);
	for (let from = 1; from <= retained; from += LOAD_CHUNK) {
		const to = Math.min(retained, from + LOAD_CHUNK - 1);
		const client = await engine.pool.connect();
		try {
			await client.query('BEGIN');
			await client.query(
				`INSERT INTO ${s}.jobs (id, queue, payload, payload_fingerprint, attempts, attempt_id, started_at, created_at, updated_at)
				 SELECT gen_random_uuid(), $1, jsonb_build_object('n', g), md5(g::text), 1, gen_random_uuid(), now(), now(), now()
				 FROM generate_series($2::int, $3::int) g`,
				[QUEUE, from, to],
			);
			await client.query(
				`UPDATE ${s}.jobs SET status = 'done', finished_at = now(), updated_at = now() WHERE queue = $1 AND status = 'queued'`,
				[QUEUE],
			);
			await client.query('COMMIT');
		} catch (error) {
			await client.query('ROLLBACK').catch(() => undefined);
			throw error;
		} finally {
			client.release();
		}
		log(
			`  ours: ${to.toLocaleString('en-US')} / ${retained.toLocaleString('en-US')} finished rows`,
		);
	}
	const store = engine.store;
	const total = live.queued + live.running + live.failed;
	for (let start = 0; start < total; start += 1000)
		await engine.enqueueBatch(start, Math.min(1000, total - start));
	let toLease = live.running + live.failed;
	const leased = [];
	while (toLease > 0) {
		const jobs = await store.lease({
			queue: QUEUE,
			limit: Math.min(toLease, 10_000),
			leaseMs: 3_600_000,
		});
		if (jobs.length === 0) break;
		leased.push(...jobs);
		toLease -= jobs.length;
	}
	const failing = leased.slice(0, live.failed);
	for (let i = 0; i < failing.length; i += 1000) {
		const results = await store.complete(
			failing.slice(i, i + 1000).map((job) => ({
				jobId: job.id,
				attemptId: job.attempt_id,
				outcome: 'failed' as const,
				errorCode: 'bench',
				errorMessage: 'benchmark fixture',
			})),
		);
		results.forEach((result) => ok(result));
	}
	await vacuumAnalyzeSchema(engine.pool, engine.schema);
	return (now() - started) / 1000;
}

export interface OursStatsMeasurement {
	calls: Summary;
	sample: QueueStats;
	allQueues: Summary;
	/** EXPLAIN ANALYZE of the stats call: planning + execution, without the client round trip. */
	serverMs: Summary;
	/** Plans of the statements inside queue_stats, from auto_explain (empty when it cannot be loaded). */
	plan: string[];
	/** Whether any of those plans was JIT-compiled. null: plans not available. */
	jit: boolean | null;
}

export async function measureOursStats(
	engine: OursEngine,
	iterations: number,
): Promise<OursStatsMeasurement> {
	const store = engine.store;
	for (let i = 0; i < 5; i++) await store.stats(QUEUE);
	const samples: number[] = [];
	let sample: QueueStats | undefined;
	for (let i = 0; i < iterations; i++) {
		const t = now();
		const [row] = await store.stats(QUEUE);
		samples.push(now() - t);
		sample = row;
	}
	const all: number[] = [];
	for (let i = 0; i < Math.min(iterations, 50); i++) {
		const t = now();
		await store.stats(null);
		all.push(now() - t);
	}
	// Server-side time of the same statement, without the client round trip.
	const query = statsQuery(quoteIdent(engine.schema), QUEUE);
	const server: number[] = [];
	for (let i = 0; i < 10; i++) {
		const { rows } = await engine.pool.query<{ 'QUERY PLAN': string }>(
			`EXPLAIN (ANALYZE, BUFFERS) ${query.text}`,
			query.values,
		);
		const text = rows.map((row) => row['QUERY PLAN']).join('\n');
		const planning = /Planning Time: ([\d.]+) ms/.exec(text);
		const execution = /Execution Time: ([\d.]+) ms/.exec(text);
		server.push(Number(planning?.[1] ?? 0) + Number(execution?.[1] ?? 0));
	}
	const { plan, jit } = await nestedPlans(engine, query.text, query.values);
	return {
		calls: summarize(samples),
		sample: sample!,
		allQueues: summarize(all),
		serverMs: summarize(server),
		plan,
		jit,
	};
}

/** The plans of the statements inside queue_stats (see loggedPlans), and whether any was JIT-compiled. */
async function nestedPlans(
	engine: OursEngine,
	text: string,
	values: unknown[],
): Promise<{ plan: string[]; jit: boolean | null }> {
	try {
		const notices = await loggedPlans(engine.pool, text, values, { analyze: true });
		const plan = notices
			.filter((notice) => !notice.includes(text.trim()))
			.flatMap((notice) => notice.split('\n'));
		return { plan, jit: plan.some((line) => /^\s*JIT:/.test(line)) };
	} catch {
		return { plan: [], jit: null };
	}
}

/**
 * pg-boss: `retained` completed jobs inserted straight into its job table, then live jobs through
 * its API: insert, fetch, fail (retryLimit 0 so a failure is terminal). getQueueStats reports
 * live counts (queued / ready / active / failed) from an aggregate over the job table, cached on
 * the queue row; its retained-job counter is kept by the monitor, which is off here, so its
 * totalCount covers the live jobs only. The recomputation still runs over the whole table.
 */
export async function loadPgBoss(
	engine: PgBossEngine,
	retained: number,
	live: LiveRows,
): Promise<number> {
	const started = now();
	const s = quoteIdent(engine.schema);
	for (let from = 1; from <= retained; from += LOAD_CHUNK) {
		const to = Math.min(retained, from + LOAD_CHUNK - 1);
		await engine.admin.query(
			`INSERT INTO ${s}.job (name, data, state, policy, retry_count, created_on, started_on, completed_on)
			 SELECT $1, jsonb_build_object('n', g), 'completed', 'standard', 0, now(), now(), now()
			 FROM generate_series($2::int, $3::int) g`,
			[QUEUE, from, to],
		);
		log(
			`  pg-boss: ${to.toLocaleString('en-US')} / ${retained.toLocaleString('en-US')} completed rows`,
		);
	}
	const boss = engine.boss;
	const total = live.queued + live.running + live.failed;
	for (let start = 0; start < total; start += 1000) {
		const size = Math.min(1000, total - start);
		await boss.insert(
			QUEUE,
			Array.from({ length: size }, (_, i) => ({ data: { n: start + i }, retryLimit: 0 })),
		);
	}
	const fetched = await boss.fetch(QUEUE, { batchSize: live.running + live.failed });
	const failing = fetched.slice(0, live.failed).map((job) => job.id);
	if (failing.length > 0) await boss.fail(QUEUE, failing, { message: 'benchmark fixture' });
	await vacuumAnalyzeSchema(engine.admin, engine.schema);
	return (now() - started) / 1000;
}

export async function measurePgBossStats(
	engine: PgBossEngine,
	iterations: number,
	refreshIterations: number,
): Promise<{
	firstCallMs: number;
	cached: Summary;
	refresh: Summary;
	sample: Record<string, unknown>;
}> {
	const boss = engine.boss;
	const s = quoteIdent(engine.schema);
	// The first call on a queue that was never monitored runs the aggregate and caches it.
	const t0 = now();
	await boss.getQueueStats(QUEUE);
	const firstCallMs = now() - t0;
	const cached: number[] = [];
	let sample: Record<string, unknown> = {};
	for (let i = 0; i < iterations; i++) {
		const t = now();
		const [row] = await boss.getQueueStats(QUEUE);
		cached.push(now() - t);
		sample = { ...row };
	}
	// Fresh counts: clear the cache stamp (not timed) so each call recomputes the aggregate.
	const refresh: number[] = [];
	for (let i = 0; i < refreshIterations; i++) {
		await engine.admin.query(`UPDATE ${s}.queue SET monitor_on = NULL WHERE name = $1`, [QUEUE]);
		const t = now();
		const [row] = await boss.getQueueStats(QUEUE);
		refresh.push(now() - t);
		sample = { ...row };
	}
	delete sample.waitBins;
	delete sample.runBins;
	return {
		firstCallMs: round(firstCallMs, 3),
		cached: summarize(cached),
		refresh: summarize(refresh),
		sample,
	};
}
