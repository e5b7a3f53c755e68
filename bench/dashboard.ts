/**
 * The jobs dashboard at 1,000,000 retained jobs (docs/PERFORMANCE.md, "Jobs dashboard"). Prints
 * one JSON document on stdout; progress goes to stderr.
 *
 *   npx tsx bench/dashboard.ts                                  # all parts, default sizes
 *   npx tsx bench/dashboard.ts --retained 200000 --iterations 50
 *   npx tsx bench/dashboard.ts --json-out bench/results/dashboard-1m.json
 *
 * Part "reads": one schema holds `--retained` finished jobs received over the last 7 days
 * (done 94 %, failed 5 %, cancelled 1 %; four queues of 60 / 30 / 9 / 1 %; half with an
 * idempotency key, a third with a correlation id shared by about six jobs; one attempt row
 * each) plus live jobs through the public API (3,000 queued, 1,000 running). Each call is timed
 * `--iterations` times: List Jobs (first page and deep pages, with and without filters, text
 * search), Job Story, and the queues summary next to Queue Stats. Then `--hot-hour` of the
 * finished jobs are moved into the last hour and the chart is timed again (its cost is the jobs
 * finished in the window it reads); last, `--backlog` jobs are enqueued and the first pages and
 * Queue Stats are timed again (listing live jobs reads every live row of the selected queues).
 *
 * Part "writes": what the two indexes of migration 0007 cost enqueue, lease and complete. Two
 * schemas, one with the indexes and one without; each of `--blocks` blocks enqueues
 * `--enqueue-single` jobs one per call and `--enqueue-batches` batches of 1,000, then drains
 * them (lease 1 + complete 1 with 4 workers, lease 100 + complete 100 with 2), on both schemas
 * back to back in alternating order. The report has the paired ratio of each block.
 *
 * Database: DATABASE_URL when set, else an embedded PostgreSQL.
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import pg from 'pg';

import { DurableJobsError, JobStore, migrate, type ListJobsInput } from '../src/core';
import { indexPlanSettingsQuery } from '../src/core/sql/dashboard';
import { startPostgres } from '../scripts/lib/postgres';
import { drainQueue } from './lib/ours';
import {
	checkpoint,
	dropSchema,
	log,
	median,
	now,
	quoteIdent,
	readFlags,
	round,
	runMain,
	summarize,
	type Summary,
	vacuumAnalyzeSchema,
} from './lib/util';

interface Config {
	parts: Array<'reads' | 'writes'>;
	retained: number;
	iterations: number;
	hotHour: number;
	backlog: number;
	blocks: number;
	enqueueSingle: number;
	enqueueBatches: number;
	jsonOut: string | null;
}

function parseArgs(argv: string[]): Config {
	const { flags, int } = readFlags(argv, [
		'part',
		'retained',
		'iterations',
		'hot-hour',
		'backlog',
		'blocks',
		'enqueue-single',
		'enqueue-batches',
		'json-out',
	]);
	const part = flags.get('part') ?? 'both';
	if (!['both', 'reads', 'writes'].includes(part))
		throw new Error('--part must be reads, writes or both');
	return {
		parts: part === 'both' ? ['reads', 'writes'] : [part as 'reads' | 'writes'],
		retained: int('retained', 1_000_000, 1000),
		iterations: int('iterations', 200, 10),
		hotHour: int('hot-hour', 100_000),
		backlog: int('backlog', 100_000),
		blocks: int('blocks', 20, 1),
		enqueueSingle: int('enqueue-single', 200, 10),
		enqueueBatches: int('enqueue-batches', 2, 1),
		jsonOut: flags.get('json-out') ?? null,
	};
}

const SCHEMA = 'bench_dashboard';
const LOAD_CHUNK = 250_000;

function ok<T>(results: Array<T | DurableJobsError>): T[] {
	for (const result of results) if (result instanceof DurableJobsError) throw result;
	return results as T[];
}

/** Times `call` after a warm-up; `pick` varies the arguments between iterations. */
async function time<T>(
	iterations: number,
	call: (index: number) => Promise<T>,
	check?: (value: T) => void,
): Promise<Summary> {
	for (let index = 0; index < 5; index++) check?.(await call(index));
	const samples: number[] = [];
	for (let index = 0; index < iterations; index++) {
		const started = now();
		const value = await call(index);
		samples.push(now() - started);
		if (index === 0) check?.(value);
	}
	return summarize(samples);
}

// ------------------------------------------------------------------------------------ data

async function load(pool: pg.Pool, store: JobStore, retained: number): Promise<number> {
	const started = now();
	const s = quoteIdent(SCHEMA);
	for (let from = 1; from <= retained; from += LOAD_CHUNK) {
		const to = Math.min(retained, from + LOAD_CHUNK - 1);
		// Received over the 7 days before now, oldest first (seq follows created_at), finished
		// 1–60 s later; statuses, queues, keys and correlation ids spread by the row number.
		await pool.query(
			`INSERT INTO ${s}.jobs (id, queue, status, payload, idempotency_key, payload_fingerprint, attempts,
				attempt_id, correlation_id, error_code, error_message, error_class, created_at, updated_at,
				run_at, started_at, finished_at)
			 SELECT gen_random_uuid(),
				CASE WHEN g % 100 < 60 THEN 'documents' WHEN g % 100 < 90 THEN 'emails' WHEN g % 100 < 99 THEN 'callbacks' ELSE 'rare' END,
				CASE WHEN g % 100 = 7 THEN 'cancelled' WHEN g % 20 = 3 THEN 'failed' ELSE 'done' END,
				jsonb_build_object('document', jsonb_build_object('id', 'doc-' || g, 'text', repeat('lorem ipsum ', 20))),
				CASE WHEN g % 2 = 0 THEN 'key-' || g END,
				CASE WHEN g % 2 = 0 THEN md5(g::text) END,
				1, gen_random_uuid(),
				CASE WHEN g % 3 = 0 THEN 'corr-' || (g / 18) END,
				CASE WHEN g % 100 = 7 THEN 'cancelled' WHEN g % 20 = 3 THEN 'http_400' END,
				CASE WHEN g % 100 = 7 THEN 'Cancelled by an operator' WHEN g % 20 = 3 THEN 'The AI endpoint answered HTTP 400' END,
				CASE WHEN g % 100 = 7 THEN 'discarded' WHEN g % 20 = 3 THEN 'needs_mapping' END,
				t.created, t.created + interval '30 seconds', t.created, t.created + interval '1 second',
				t.created + (1 + g % 60) * interval '1 second'
			 FROM generate_series($1::int, $2::int) g,
				LATERAL (SELECT now() - interval '7 days' + (g::float8 / $3) * interval '7 days' - interval '2 minutes' AS created) t`,
			[from, to, retained],
		);
		log(`  ${to.toLocaleString('en-US')} / ${retained.toLocaleString('en-US')} finished jobs`);
	}
	await pool.query(
		`INSERT INTO ${s}.job_attempt_records (attempt_id, job_id, attempt, workflow_id, execution_id, started_at,
			lease_until, finished_at, outcome, error_code, error_message)
		 SELECT j.attempt_id, j.id, 1, 'DjDispatcher0001', (j.seq % 100000)::text, j.started_at,
			j.started_at + interval '5 minutes', j.finished_at,
			CASE j.status WHEN 'done' THEN 'succeeded' WHEN 'failed' THEN 'failed' ELSE 'cancelled' END,
			j.error_code, j.error_message
		 FROM ${s}.jobs j`,
	);
	log('  attempt rows written');
	// Live jobs through the public API: 3,000 queued (a third of them in 'rare'), 1,000 running.
	for (let batch = 0; batch < 4; batch++) {
		ok(
			await store.enqueue(
				Array.from({ length: 1000 }, (_, index) => ({
					queue: index % 3 === 0 ? 'rare' : 'documents',
					payload: { live: batch * 1000 + index },
					idempotencyKey: `live-${batch}-${index}`,
					correlationId: index % 5 === 0 ? `live-corr-${index % 50}` : null,
				})),
			),
		);
	}
	await store.lease({ queue: 'documents', limit: 1000, leaseMs: 3_600_000 });
	await vacuumAnalyzeSchema(pool, SCHEMA);
	await checkpoint(pool);
	return (now() - started) / 1000;
}

/** Cursors of pages deep in a listing: the row at each offset, as next_cursor encodes it. */
async function cursorsAt(
	pool: pg.Pool,
	where: string,
	values: unknown[],
	offsets: number[],
): Promise<string[]> {
	const { rows } = await pool.query<{ cursor: string }>(
		`SELECT cursor FROM (
			SELECT (extract(epoch FROM created_at) * 1000000)::bigint || '_' || seq AS cursor,
				row_number() OVER (ORDER BY created_at DESC, seq DESC) AS position
			FROM ${quoteIdent(SCHEMA)}.jobs WHERE ${where}
		 ) x WHERE position = ANY($${values.length + 1}::bigint[]) ORDER BY position`,
		[...values, offsets],
	);
	return rows.map((row) => row.cursor);
}

async function sample(pool: pg.Pool, sql: string, count: number): Promise<string[]> {
	const { rows } = await pool.query<{ value: string }>(
		`${sql.replace(/\{s\}/g, quoteIdent(SCHEMA))} ORDER BY random() LIMIT ${count}`,
	);
	return rows.map((row) => row.value);
}

/**
 * The plan of one call's statement (EXPLAIN ANALYZE), to show which index it read; in a
 * transaction with the settings the dashboard plans it with.
 */
async function plan(pool: pg.Pool, query: { text: string; values: unknown[] }): Promise<string[]> {
	const client = await pool.connect();
	try {
		await client.query('BEGIN');
		await client.query(indexPlanSettingsQuery().text);
		const { rows } = await client.query<{ 'QUERY PLAN': string }>(
			`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${query.text}`,
			query.values,
		);
		return rows.map((row) => row['QUERY PLAN']);
	} finally {
		await client.query('ROLLBACK').catch(() => undefined);
		client.release();
	}
}

async function partReads(config: Config, url: string): Promise<Record<string, unknown>> {
	const pool = new pg.Pool({ connectionString: url, max: 4 });
	pool.on('error', () => undefined);
	try {
		await dropSchema(pool, SCHEMA);
		await migrate(pool, SCHEMA);
		const store = new JobStore(pool, { schema: SCHEMA });
		log(`loading ${config.retained.toLocaleString('en-US')} retained jobs into ${SCHEMA}`);
		const loadSeconds = await load(pool, store, config.retained);
		const { rows: sizes } = await pool.query(
			`SELECT c.relname AS name, pg_relation_size(c.oid) AS bytes FROM pg_class c
			 JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'i')
			 ORDER BY 2 DESC`,
			[SCHEMA],
		);
		const n = config.iterations;
		const total = config.retained + 4000;
		const offsets = (count: number) =>
			Array.from({ length: 20 }, (_, index) => Math.floor(((index + 1) / 21) * count));
		log('finding deep cursors and sample ids');
		const deepAll = await cursorsAt(pool, 'true', [], offsets(total));
		const deepDocs = await cursorsAt(pool, 'queue = $1', ['documents'], offsets(total * 0.6));
		const deepFailed = await cursorsAt(pool, "status = 'failed'", [], offsets(total * 0.05));
		const deepRare = await cursorsAt(pool, 'queue = $1', ['rare'], offsets(total * 0.01));
		const jobIds = await sample(
			pool,
			`SELECT id::text AS value FROM {s}.jobs WHERE status IN ('done', 'failed', 'cancelled')`,
			n,
		);
		const keys = await sample(
			pool,
			`SELECT idempotency_key AS value FROM {s}.jobs WHERE idempotency_key IS NOT NULL`,
			n,
		);
		const correlations = await sample(
			pool,
			`SELECT value FROM (SELECT DISTINCT correlation_id AS value FROM {s}.jobs WHERE correlation_id IS NOT NULL) c`,
			n,
		);
		const pick = <T>(list: T[], index: number) => list[index % list.length];
		const page = (filter: ListJobsInput) => async () =>
			await store.listJobs({ limit: 50, ...filter });
		const full = (value: { jobs: unknown[] }) => {
			if (value.jobs.length !== 50) throw new Error(`a page had ${value.jobs.length} jobs`);
		};
		const some = (value: { jobs: unknown[] }) => {
			if (value.jobs.length === 0) throw new Error('a search found nothing');
		};
		const threeDaysAgo = Date.now() - 3 * 86400_000;

		log('timing List Jobs');
		const list: Record<string, Summary> = {
			firstPage: await time(n, page({}), full),
			firstPageQueue: await time(n, page({ queue: 'documents' }), full),
			firstPageRareQueue: await time(n, page({ queue: 'rare' }), full),
			firstPageFailed: await time(n, page({ status: 'failed' }), full),
			firstPageQueueFailed: await time(n, page({ queue: 'emails', status: 'failed' }), full),
			firstPageQueued: await time(n, page({ status: 'queued' }), full),
			firstPageOneHourThreeDaysAgo: await time(
				n,
				page({
					from: new Date(threeDaysAgo).toISOString(),
					to: new Date(threeDaysAgo + 3600_000).toISOString(),
				}),
				full,
			),
			deepPage: await time(
				n,
				async (index) => await store.listJobs({ limit: 50, cursor: pick(deepAll, index) }),
				full,
			),
			deepPageQueue: await time(
				n,
				async (index) =>
					await store.listJobs({ limit: 50, queue: 'documents', cursor: pick(deepDocs, index) }),
				full,
			),
			deepPageRareQueue: await time(
				n,
				async (index) =>
					await store.listJobs({ limit: 50, queue: 'rare', cursor: pick(deepRare, index) }),
				full,
			),
			deepPageFailed: await time(
				n,
				async (index) =>
					await store.listJobs({ limit: 50, status: 'failed', cursor: pick(deepFailed, index) }),
				full,
			),
			searchJobId: await time(
				n,
				async (index) => await store.listJobs({ text: pick(jobIds, index) }),
				some,
			),
			searchIdempotencyKey: await time(
				n,
				async (index) => await store.listJobs({ text: pick(keys, index) }),
				some,
			),
			searchCorrelationId: await time(
				n,
				async (index) => await store.listJobs({ text: pick(correlations, index) }),
				some,
			),
		};
		log('timing Job Story');
		const story = await time(
			n,
			async (index) => await store.jobStory(pick(jobIds, index)),
			(value) => {
				if (!value || value.attempts.length === 0) throw new Error('a story had no attempts');
			},
		);
		log('timing the queues summary and Queue Stats');
		const oneMinuteAgo = () => new Date(Date.now() - 60_000).toISOString();
		const summary = {
			queueStatsAllQueues: await time(n, async () => await store.stats(null)),
			queueStatsOneQueue: await time(n, async () => await store.stats('documents')),
			overviewRefresh: await time(
				n,
				async () => await store.queueOverview({ chartSince: oneMinuteAgo() }),
			),
			overviewFullHour: await time(n, async () => await store.queueOverview()),
		};
		const lastHour = (
			await pool.query(
				`SELECT count(*)::int AS n FROM ${quoteIdent(SCHEMA)}.jobs WHERE status IN ('done', 'failed') AND finished_at >= now() - interval '1 hour'`,
			)
		).rows[0].n as number;

		const plans = {
			firstPage: await plan(pool, await listQueryOf(store, {})),
			deepPageFailed: await plan(
				pool,
				await listQueryOf(store, { status: 'failed', cursor: deepFailed[10] }),
			),
			searchCorrelationId: await plan(pool, await listQueryOf(store, { text: correlations[0] })),
		};

		// A busier hour: move jobs into the last hour and time the chart again.
		let hotHour: Record<string, unknown> | null = null;
		if (config.hotHour > 0) {
			log(`moving ${config.hotHour.toLocaleString('en-US')} finished jobs into the last hour`);
			await pool.query(
				`UPDATE ${quoteIdent(SCHEMA)}.jobs SET finished_at = now() - (seq % 3540) * interval '1 second'
				 WHERE seq IN (SELECT seq FROM ${quoteIdent(SCHEMA)}.jobs WHERE status IN ('done', 'failed') ORDER BY seq LIMIT $1)`,
				[config.hotHour],
			);
			await vacuumAnalyzeSchema(pool, SCHEMA);
			const inHour = (
				await pool.query(
					`SELECT count(*)::int AS n FROM ${quoteIdent(SCHEMA)}.jobs WHERE status IN ('done', 'failed') AND finished_at >= now() - interval '1 hour'`,
				)
			).rows[0].n as number;
			hotHour = {
				finishedInLastHour: inHour,
				overviewRefresh: await time(
					n,
					async () => await store.queueOverview({ chartSince: oneMinuteAgo() }),
				),
				overviewFullHour: await time(Math.min(n, 50), async () => await store.queueOverview()),
				queueStatsAllQueues: await time(n, async () => await store.stats(null)),
			};
		}
		// A backlog: listing queued jobs reads every queued row of the selected queues, as Queue
		// Stats counts them.
		let backlog: Record<string, unknown> | null = null;
		if (config.backlog > 0) {
			log(`enqueueing a backlog of ${config.backlog.toLocaleString('en-US')} jobs`);
			for (let start = 0; start < config.backlog; start += 1000)
				ok(
					await store.enqueue(
						Array.from({ length: Math.min(1000, config.backlog - start) }, (_, index) => ({
							queue: 'documents',
							payload: { backlog: start + index },
						})),
					),
				);
			await vacuumAnalyzeSchema(pool, SCHEMA);
			const { rows: liveRows } = await pool.query(
				`SELECT count(*)::int AS n FROM ${quoteIdent(SCHEMA)}.jobs WHERE status = 'queued'`,
			);
			backlog = {
				queued: liveRows[0].n as number,
				plan: await plan(pool, await listQueryOf(store, {})),
				firstPage: await time(n, page({}), full),
				firstPageQueued: await time(n, page({ status: 'queued' }), full),
				firstPageFailed: await time(n, page({ status: 'failed' }), full),
				queueStatsAllQueues: await time(n, async () => await store.stats(null)),
				overviewRefresh: await time(
					n,
					async () => await store.queueOverview({ chartSince: oneMinuteAgo() }),
				),
			};
		}
		return {
			loadSeconds: round(loadSeconds, 1),
			rows: {
				retained: config.retained,
				live: { queued: 3000, running: 1000 },
				finishedInLastHour: lastHour,
			},
			relationBytes: Object.fromEntries(sizes.map((row) => [row.name, Number(row.bytes)])),
			listJobs: list,
			jobStory: story,
			queuesSummary: summary,
			hotHour,
			backlog,
			plans,
		};
	} finally {
		await dropSchema(pool, SCHEMA).catch(() => undefined);
		await pool.end();
	}
}

/** The statement List Jobs runs for a filter (for EXPLAIN), captured from a store without a database. */
async function listQueryOf(
	store: JobStore,
	filter: ListJobsInput,
): Promise<{ text: string; values: unknown[] }> {
	let captured: { text: string; values: unknown[] } | undefined;
	const client = {
		query: async (config: unknown) => {
			if (captured === undefined && typeof config === 'object' && config !== null)
				captured = config as { text: string; values: unknown[] };
			return { rows: [] };
		},
		release: () => undefined,
	};
	const spy = new JobStore(
		{ query: client.query, connect: async () => client } as unknown as pg.Pool,
		{ schema: store.schema, preparedStatements: false },
	);
	await spy.listJobs({ limit: 50, ...filter }).catch(() => undefined);
	if (!captured) throw new Error('no statement captured');
	return captured;
}

// ------------------------------------------------------------------------------------ writes

async function partWrites(config: Config, url: string): Promise<Record<string, unknown>> {
	const pool = new pg.Pool({ connectionString: url, max: 8 });
	pool.on('error', () => undefined);
	const sides = ['with', 'without'] as const;
	type Side = (typeof sides)[number];
	const schemaOf = (side: Side) => `bench_dashboard_${side}`;
	const metrics = [
		'enqueueSingle',
		'enqueueBatch1000',
		'leaseCompleteSingle4Workers',
		'leaseComplete100x2Workers',
	] as const;
	const runs: Record<Side, Record<string, number[]>> = { with: {}, without: {} };
	try {
		const stores = {} as Record<Side, JobStore>;
		for (const side of sides) {
			const schema = schemaOf(side);
			await dropSchema(pool, schema);
			await migrate(pool, schema);
			if (side === 'without') {
				await pool.query(`DROP INDEX ${quoteIdent(schema)}.jobs_history`);
				await pool.query(`DROP INDEX ${quoteIdent(schema)}.jobs_history_correlation`);
			}
			stores[side] = new JobStore(pool, { schema });
		}
		// With each job's metadata, as Job Lease outputs it by default.
		const drain = async (store: JobStore, workers: number, limit: number, jobs: number) => {
			const started = now();
			const { processed } = await drainQueue(store, {
				queue: 'w',
				workers,
				limit,
				includeMetadata: true,
				maxJobs: jobs,
			});
			if (processed !== jobs) throw new Error(`drained ${processed} of ${jobs} jobs`);
			return processed / ((now() - started) / 1000);
		};
		// One block: the same work on both schemas, back to back, in alternating order, so that a
		// change of the machine's load hits both sides of a block alike.
		for (let block = 0; block < config.blocks; block++) {
			const order: Side[] = block % 2 === 0 ? ['with', 'without'] : ['without', 'with'];
			for (const side of order) {
				const store = stores[side];
				const record = (name: string, value: number) =>
					(runs[side][name] ??= []).push(round(value, 0));
				// A third of the jobs carry a correlation id, so complete also writes
				// jobs_history_correlation.
				let started = now();
				for (let index = 0; index < config.enqueueSingle; index++)
					ok(
						await store.enqueue([
							{
								queue: 'w',
								payload: { block, index },
								correlationId: index % 3 === 0 ? `c-${block}-${index}` : null,
							},
						]),
					);
				record('enqueueSingle', config.enqueueSingle / ((now() - started) / 1000));
				started = now();
				for (let batch = 0; batch < config.enqueueBatches; batch++)
					ok(
						await store.enqueue(
							Array.from({ length: 1000 }, (_, index) => ({
								queue: 'w',
								payload: { block, batch, index },
								correlationId: index % 3 === 0 ? `c-${block}-${batch}-${index}` : null,
							})),
						),
					);
				record('enqueueBatch1000', (config.enqueueBatches * 1000) / ((now() - started) / 1000));
				record('leaseCompleteSingle4Workers', await drain(store, 4, 1, config.enqueueSingle));
				record(
					'leaseComplete100x2Workers',
					await drain(store, 2, 100, config.enqueueBatches * 1000),
				);
			}
			if ((block + 1) % 5 === 0) log(`  block ${block + 1} / ${config.blocks}`);
		}
		const medians = Object.fromEntries(
			sides.map((side) => [
				side,
				Object.fromEntries(metrics.map((name) => [name, median(runs[side][name])])),
			]),
		);
		// Per block: with / without, then the median and quartiles of those paired ratios.
		const pairedRatios = Object.fromEntries(
			metrics.map((name) => {
				const ratios = runs.with[name]
					.map((value, index) => value / runs.without[name][index])
					.sort((a, b) => a - b);
				const at = (q: number) => round(ratios[Math.floor(q * (ratios.length - 1))], 3);
				return [name, { median: round(median(ratios), 3), q1: at(0.25), q3: at(0.75) }];
			}),
		);
		return {
			unit: 'jobs per second',
			note: 'with / without: the same migrations; without = jobs_history and jobs_history_correlation dropped. Each block runs the same work on both schemas back to back, in alternating order.',
			medians,
			pairedRatioWithToWithout: pairedRatios,
			runs,
		};
	} finally {
		for (const side of sides) await dropSchema(pool, schemaOf(side)).catch(() => undefined);
		await pool.end();
	}
}

async function main(): Promise<void> {
	const config = parseArgs(process.argv.slice(2));
	const postgres = await startPostgres((line) => {
		if (process.env.DEBUG_POSTGRES) log(line);
	});
	log(
		postgres.embedded ? 'DATABASE_URL not set: using an embedded PostgreSQL' : 'using DATABASE_URL',
	);
	const admin = new pg.Pool({ connectionString: postgres.url, max: 1 });
	admin.on('error', () => undefined);
	const started = new Date();
	const t0 = now();
	try {
		const settings = await admin.query<{ name: string; setting: string; unit: string | null }>(
			`SELECT name, setting, unit FROM pg_settings WHERE name IN
			 ('server_version', 'autovacuum', 'shared_buffers', 'work_mem', 'effective_cache_size', 'random_page_cost', 'jit', 'fsync', 'synchronous_commit')`,
		);
		const report: Record<string, unknown> = {
			benchmark: 'n8n-nodes-durable-jobs jobs dashboard',
			startedAt: started.toISOString(),
			command: `npx tsx bench/dashboard.ts${process.argv.length > 2 ? ` ${process.argv.slice(2).join(' ')}` : ''}`,
			environment: {
				node: process.version,
				cpus: os.cpus().length,
				cpuModel: os.cpus()[0]?.model,
				memoryGiB: round(os.totalmem() / 2 ** 30, 1),
				loadAverageAtStart: os.loadavg().map((value) => round(value, 2)),
				embeddedPostgres: postgres.embedded,
				server: Object.fromEntries(
					settings.rows.map((row) => [
						row.name,
						row.unit ? `${row.setting} ${row.unit}` : row.setting,
					]),
				),
			},
			config,
		};
		if (config.parts.includes('reads')) report.reads = await partReads(config, postgres.url);
		if (config.parts.includes('writes')) report.writes = await partWrites(config, postgres.url);
		(report.environment as Record<string, unknown>).loadAverageAtEnd = os
			.loadavg()
			.map((value) => round(value, 2));
		report.durationSeconds = round((now() - t0) / 1000, 1);
		const json = JSON.stringify(report, null, 2);
		process.stdout.write(`${json}\n`);
		if (config.jsonOut) {
			writeFileSync(config.jsonOut, `${json}\n`);
			log(`wrote ${config.jsonOut}`);
		}
	} finally {
		await admin.end().catch(() => undefined);
		await postgres.stop();
	}
}

runMain(main);
