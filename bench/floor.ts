/**
 * How fast can jobs go through this package's schema at all? Runs the issue's three
 * throughput scenarios with hand-written minimal SQL on the same tables and indexes as
 * `JobStore`, next to `JobStore` itself and graphile-worker, in one run. The floors drop work
 * step by step, so the report shows what each part of the per-job work costs and whether any
 * of them alone stands between the package and a target. Prints JSON on stdout.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/floor.ts --json-out bench/results/floor.json
 *   npx tsx bench/floor.ts --repeat 5 --single-jobs 3000 --batch-jobs 40000
 *
 * Variants (lease / complete; enqueue):
 * - ours: JobStore, exactly as the nodes call it.
 * - history: one statement leases (skip-locked select, update, attempt row) and one completes
 *   (fenced update, attempt closed). Triggers on: the terminal counters stay exact. This is
 *   the least work per call that keeps the attempt history and exact stats with a row per
 *   lease, the layout before migration 0009.
 * - history-at-close: the lease updates the job row only, and the completion writes the
 *   attempt's row (an upsert on its attempt id) with the fenced update: one attempt write per
 *   attempt instead of two, the layout migration 0009 chose after this floor measured it.
 *
 * Every variant runs one statement and one commit per call. The floors bound what a call can
 * cost on its own; they do not bound the store since it merges concurrent calls into one
 * statement and one commit (call coalescing, docs/ARCHITECTURE.md), which the single-job
 * scenarios with 8 and 32 workers of `npm run bench` measure.
 * - no-history: lease and complete update the job row only (no attempt rows). Triggers on.
 * - bare: as no-history with `session_replication_role = replica`, which skips every trigger
 *   (the counters and the foreign key). Nothing the package could ship; the lower bound of
 *   writing these rows with these indexes.
 * - ready-queue: another storage layout, so that lease and completion can be HOT updates of the
 *   job row. `jobs` keeps only the indexes on columns that never change (primary key,
 *   idempotency key) and gets `fillfactor = 50`; what the status indexes did moves to narrow
 *   tables: `ready` (one row per queued job, the claim index; the lease deletes it), `running`
 *   (one row per leased job, keyed by job id; the completion deletes it) and `finished` (one row
 *   per finished job with the purge and history indexes). Attempt records as history-at-close,
 *   triggers on: its counterpart is history-at-close.
 * - ready-queue-bare: the same layout without attempt records and triggers; its counterpart is
 *   bare.
 * - enqueue floors: a plain multi-row INSERT from arrays with ids and token hashes made ahead
 *   (no validation, no token derivation in the timed part), with triggers and without.
 *
 * Besides jobs/s, every drain reports the WAL it wrote per job (all its statements, from the
 * server's WAL position before and after) and, for the floors, the share of job-row updates
 * that were HOT: both depend on the layout, not on the machine's load.
 */
import { randomBytes, createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import pg from 'pg';
import { v7 as uuidv7 } from 'uuid';

import { migrate } from '../src/core';
import { startPostgres } from '../scripts/lib/postgres';
import { QUEUE } from './lib/engine';
import { GraphileEngine } from './lib/graphile';
import { OursEngine } from './lib/ours';
import { PgBossEngine } from './lib/pgboss';
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
	vacuumAnalyzeSchema,
} from './lib/util';

const SCHEMA = 'bench_floor';
const s = quoteIdent(SCHEMA);

interface Config {
	repeat: number;
	singleJobs: number;
	singleWorkers: number;
	batchJobs: number;
	batchSize: number;
	batchWorkers: number;
	enqueueBatches: number;
	/** Drain variants to run (default all). */
	variants: DrainVariant[];
	jsonOut: string | null;
}

function parseArgs(argv: string[]): Config {
	const { flags, int } = readFlags(argv, [
		'repeat',
		'single-jobs',
		'single-workers',
		'batch-jobs',
		'batch-size',
		'batch-workers',
		'enqueue-batches',
		'variants',
		'json-out',
	]);
	const variants = flags.has('variants')
		? flags
				.get('variants')!
				.split(',')
				.map((name) => name.trim())
		: [...DRAIN_VARIANTS];
	for (const name of variants)
		if (!(DRAIN_VARIANTS as readonly string[]).includes(name))
			throw new Error(`--variants: unknown variant ${name} (known: ${DRAIN_VARIANTS.join(', ')})`);
	return {
		repeat: int('repeat', 3, 1),
		singleJobs: int('single-jobs', 3000, 1),
		singleWorkers: int('single-workers', 8, 1),
		batchJobs: int('batch-jobs', 40_000, 1),
		batchSize: int('batch-size', 100, 1),
		batchWorkers: int('batch-workers', 2, 1),
		enqueueBatches: int('enqueue-batches', 40, 1),
		variants: variants as DrainVariant[],
		jsonOut: flags.get('json-out') ?? null,
	};
}

const DRAIN_VARIANTS = [
	'graphile',
	'pgboss',
	'ours',
	'history',
	'history-at-close',
	'no-history',
	'bare',
	'ready-queue',
	'ready-queue-bare',
] as const;
type DrainVariant = (typeof DRAIN_VARIANTS)[number];
type Variant = Exclude<DrainVariant, 'graphile' | 'pgboss' | 'ours'>;

const readyQueueLayout = (variant: Variant) => variant.startsWith('ready-queue');
/** Variants that run with `session_replication_role = replica` (no triggers, no foreign keys). */
const withoutTriggers = (variant: Variant) => variant === 'bare' || variant === 'ready-queue-bare';

/** The statements of one floor variant; named, so each connection plans them once. */
function statements(variant: Variant, limit: number) {
	// The pick and the update of the job row are the same in every variant.
	const pickAndLease = `
WITH picked AS (
	SELECT id FROM ${s}.jobs
	WHERE queue = $1 AND status = 'queued' AND run_at <= now()
	ORDER BY priority DESC, run_at, seq
	LIMIT ${limit}
	FOR NO KEY UPDATE SKIP LOCKED
), leased AS (
	UPDATE ${s}.jobs j
	SET status = 'running', attempts = j.attempts + 1, attempt_id = gen_random_uuid(),
		lease_until = now() + interval '60 seconds', started_at = coalesce(j.started_at, now()), updated_at = now()
	FROM picked WHERE j.id = picked.id
	RETURNING j.id, j.attempt_id, j.attempts, j.lease_until, j.payload
)`;
	const leaseHistory = `${pickAndLease}, attempts AS (
	INSERT INTO ${s}.job_attempt_records (attempt_id, job_id, attempt, started_at, lease_until)
	SELECT attempt_id, id, attempts, now(), lease_until FROM leased
)
SELECT id, attempt_id, payload FROM leased`;
	const leasePlain = `${pickAndLease}
SELECT id, attempt_id, payload FROM leased`;
	// The fenced update of a completion, the same in every variant.
	const completeJobs = `
UPDATE ${s}.jobs j
SET status = 'done', result = '{}'::jsonb, lease_until = NULL, finished_at = now(), updated_at = now()
FROM unnest($1::uuid[], $2::uuid[]) AS x(id, attempt_id)
WHERE j.id = x.id AND j.attempt_id = x.attempt_id AND j.status = 'running'`;
	const completeHistory = `
WITH done AS (${completeJobs}
	RETURNING j.id, j.attempt_id
), closed AS (
	UPDATE ${s}.job_attempt_records a SET finished_at = now(), outcome = 'succeeded'
	FROM done WHERE a.attempt_id = done.attempt_id
)
SELECT id FROM done`;
	const completeAtClose = `
WITH done AS (${completeJobs}
	RETURNING j.id, j.attempt_id, j.attempts, j.updated_at
), closed AS (
	INSERT INTO ${s}.job_attempt_records AS a (attempt_id, job_id, attempt, started_at, finished_at, outcome)
	SELECT attempt_id, id, attempts, updated_at, now(), 'succeeded' FROM done
	ON CONFLICT (attempt_id) DO UPDATE SET finished_at = now(), outcome = EXCLUDED.outcome
)
SELECT id FROM done`;
	const completePlain = `${completeJobs}
RETURNING j.id`;
	if (readyQueueLayout(variant)) {
		const lease = `
WITH picked AS (
	DELETE FROM ${s}.ready r
	WHERE r.ctid = ANY(ARRAY(
		SELECT ctid FROM ${s}.ready
		WHERE queue = $1 AND run_at <= now()
		ORDER BY priority DESC, run_at, seq
		LIMIT ${limit}
		FOR UPDATE SKIP LOCKED))
	RETURNING r.job_id
), leased AS (
	UPDATE ${s}.jobs j
	SET status = 'running', attempts = j.attempts + 1, attempt_id = gen_random_uuid(),
		lease_until = now() + interval '60 seconds', started_at = coalesce(j.started_at, now()), updated_at = now()
	FROM picked WHERE j.id = picked.job_id
	RETURNING j.id, j.queue, j.attempt_id, j.payload
), running AS (
	INSERT INTO ${s}.running (job_id, queue) SELECT id, queue FROM leased
)
SELECT id, attempt_id, payload FROM leased`;
		const records =
			variant === 'ready-queue'
				? `, closed AS (
	INSERT INTO ${s}.job_attempt_records AS a (attempt_id, job_id, attempt, started_at, finished_at, outcome)
	SELECT attempt_id, id, attempts, updated_at, now(), 'succeeded' FROM done
	ON CONFLICT (attempt_id) DO UPDATE SET finished_at = now(), outcome = EXCLUDED.outcome
)`
				: '';
		const complete = `
WITH done AS (${completeJobs}
	RETURNING j.id, j.queue, j.status, j.attempt_id, j.attempts, j.created_at, j.seq, j.updated_at, j.finished_at
), gone AS (
	DELETE FROM ${s}.running r USING done WHERE r.job_id = done.id
), finished AS (
	INSERT INTO ${s}.finished (job_id, queue, status, created_at, seq, finished_at)
	SELECT id, queue, status, created_at, seq, finished_at FROM done
)${records}
SELECT id FROM done`;
		return { lease, complete };
	}
	if (variant === 'history') return { lease: leaseHistory, complete: completeHistory };
	if (variant === 'history-at-close') return { lease: leasePlain, complete: completeAtClose };
	return { lease: leasePlain, complete: completePlain };
}

/** The package's schema; with `readyQueue`, changed into the ready-queue layout (see the top). */
async function resetSchema(pool: pg.Pool, readyQueue = false): Promise<void> {
	await dropSchema(pool, SCHEMA);
	await migrate(pool, SCHEMA);
	if (!readyQueue) return;
	// Every index of `jobs` whose columns or predicate a lease or a completion changes: with
	// them gone, those updates can be HOT when the page has room.
	const { rows } = await pool.query<{ name: string }>(
		`SELECT indexrelid::regclass::text AS name FROM pg_index
		 WHERE indrelid = '${s}.jobs'::regclass AND NOT indisprimary
		   AND pg_get_indexdef(indexrelid) ~ '(status|lease_until|attempt|finished_at|started_at|updated_at|result)'`,
	);
	for (const { name } of rows) await pool.query(`DROP INDEX ${name}`);
	await pool.query(`
		ALTER TABLE ${s}.jobs SET (fillfactor = 50);
		CREATE TABLE ${s}.ready (queue text NOT NULL, priority int NOT NULL, run_at timestamptz NOT NULL, seq bigint NOT NULL, job_id uuid NOT NULL);
		CREATE INDEX ready_claim ON ${s}.ready (queue, priority DESC, run_at, seq);
		CREATE TABLE ${s}.running (job_id uuid PRIMARY KEY, queue text NOT NULL);
		CREATE TABLE ${s}.finished (job_id uuid NOT NULL, queue text NOT NULL, status text NOT NULL,
			created_at timestamptz NOT NULL, seq bigint NOT NULL, finished_at timestamptz NOT NULL);
		CREATE INDEX finished_at ON ${s}.finished (finished_at);
		CREATE INDEX finished_history ON ${s}.finished (queue, status, created_at, seq);`);
}

async function fillOurs(pool: pg.Pool, count: number, readyQueue = false): Promise<void> {
	const insertJobs = `INSERT INTO ${s}.jobs (id, queue, payload) SELECT gen_random_uuid(), $1, jsonb_build_object('n', g) FROM generate_series($2::int, $3::int) g`;
	const text = readyQueue
		? `WITH inserted AS (${insertJobs} RETURNING queue, priority, run_at, seq, id)
			INSERT INTO ${s}.ready (queue, priority, run_at, seq, job_id) SELECT * FROM inserted`
		: insertJobs;
	for (let from = 0; from < count; from += 10_000)
		await pool.query(text, [QUEUE, from, Math.min(count, from + 10_000) - 1]);
}

/** WAL written since `from` (an LSN of `walPosition`), in bytes. */
async function walPosition(pool: pg.Pool): Promise<string> {
	const { rows } = await pool.query<{ lsn: string }>(
		'SELECT pg_current_wal_insert_lsn()::text AS lsn',
	);
	return rows[0].lsn;
}

async function walSince(pool: pg.Pool, from: string): Promise<number> {
	const { rows } = await pool.query<{ bytes: string }>(
		'SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint AS bytes',
		[from],
	);
	return Number(rows[0].bytes);
}

/** Share of the updates of the floor's `jobs` that were HOT (drainFloor flushes the statistics). */
async function hotShare(pool: pg.Pool): Promise<number> {
	const { rows } = await pool.query<{ updates: string; hot: string }>(
		`SELECT n_tup_upd AS updates, n_tup_hot_upd AS hot FROM pg_stat_user_tables
		 WHERE schemaname = $1 AND relname = 'jobs'`,
		[SCHEMA],
	);
	const updates = Number(rows[0]?.updates ?? 0);
	return updates === 0 ? 0 : Number(rows[0].hot) / updates;
}

async function drainFloor(
	pool: pg.Pool,
	variant: Variant,
	workers: number,
	limit: number,
): Promise<number> {
	const sql = statements(variant, limit);
	const name = (kind: string) => `floor_${variant.replace(/-/g, '_')}_${kind}_${limit}`;
	let processed = 0;
	const worker = async () => {
		const client = await pool.connect();
		try {
			if (withoutTriggers(variant)) await client.query('SET session_replication_role = replica');
			for (;;) {
				const { rows } = await client.query<{ id: string; attempt_id: string }>({
					name: name('lease'),
					text: sql.lease,
					values: [QUEUE],
				});
				if (rows.length === 0) return;
				const done = await client.query({
					name: name('complete'),
					text: sql.complete,
					values: [rows.map((row) => row.id), rows.map((row) => row.attempt_id)],
				});
				if (done.rowCount !== rows.length)
					throw new Error(`${variant}: ${done.rowCount} of ${rows.length} completions applied`);
				processed += rows.length;
			}
		} finally {
			if (withoutTriggers(variant))
				await client.query('RESET session_replication_role').catch(() => undefined);
			// Its table statistics reach shared memory when it goes idle, for hotShare().
			await client.query('SELECT pg_stat_force_next_flush()').catch(() => undefined);
			client.release();
		}
	};
	await Promise.all(Array.from({ length: workers }, () => worker()));
	return processed;
}

async function enqueueFloor(
	pool: pg.Pool,
	bare: boolean,
	batches: number,
	size: number,
): Promise<number> {
	// Parameters made before the clock starts: the floor is the statement alone.
	const prepared = Array.from({ length: batches }, (_, b) => {
		const ids: string[] = [];
		const payloads: string[] = [];
		const hashes: Buffer[] = [];
		for (let i = 0; i < size; i++) {
			ids.push(uuidv7());
			payloads.push(JSON.stringify({ n: b * size + i }));
			hashes.push(createHash('sha256').update(randomBytes(32)).digest());
		}
		return [ids, payloads, hashes];
	});
	const client = await pool.connect();
	try {
		if (bare) await client.query('SET session_replication_role = replica');
		const text = `INSERT INTO ${s}.jobs (id, queue, payload, status_token_hash)
			SELECT x.id, '${QUEUE}', x.payload, x.hash FROM unnest($1::uuid[], $2::jsonb[], $3::bytea[]) AS x(id, payload, hash)`;
		const started = now();
		for (const values of prepared)
			await client.query({ name: `floor_enqueue_${size}`, text, values });
		return now() - started;
	} finally {
		if (bare) await client.query('RESET session_replication_role').catch(() => undefined);
		client.release();
	}
}

async function main(): Promise<void> {
	const config = parseArgs(process.argv.slice(2));
	const postgres = await startPostgres(() => undefined, ['-c', 'fsync=on']);
	const pool = new pg.Pool({ connectionString: postgres.url, max: 12 });
	pool.on('error', () => undefined);
	const ours = new OursEngine(postgres.url, 'bench_floor_ours', 12);
	const graphile = new GraphileEngine(postgres.url, 'bench_floor_graphile', 12);
	const pgboss = new PgBossEngine(postgres.url, 'bench_floor_pgboss', 12);
	const started = new Date();
	const t0 = now();
	const runs: Record<string, Record<string, number[]>> = { single: {}, batch: {}, enqueue: {} };
	const walPerJob: Record<string, Record<string, number[]>> = { single: {}, batch: {} };
	const hotUpdates: Record<string, Record<string, number[]>> = { single: {}, batch: {} };
	const record = (scenario: string, variant: string, value: number, extra = '') => {
		(runs[scenario][variant] ??= []).push(round(value, 0));
		log(
			`  ${scenario.padEnd(8)} ${variant.padEnd(16)} ${round(value, 0).toLocaleString('en-US')} jobs/s${extra}`,
		);
	};
	try {
		const drainVariants = config.variants;
		for (const [scenario, jobs, workers, limit] of [
			['single', config.singleJobs, config.singleWorkers, 1],
			['batch', config.batchJobs, config.batchWorkers, config.batchSize],
		] as const) {
			log(`${scenario}: ${jobs} jobs, ${workers} workers, ${limit} per lease`);
			for (let r = 0; r < config.repeat; r++) {
				const shift = r % drainVariants.length;
				for (const variant of [...drainVariants.slice(shift), ...drainVariants.slice(0, shift)]) {
					let seconds: number;
					let wal: number;
					let hot: number | undefined;
					if (variant === 'graphile' || variant === 'pgboss' || variant === 'ours') {
						const engine = variant === 'graphile' ? graphile : variant === 'pgboss' ? pgboss : ours;
						await engine.reset();
						await engine.prefill(jobs);
						await vacuumAnalyzeSchema(pool, engine.schema);
						await checkpoint(pool);
						const lsn = await walPosition(pool);
						const t = now();
						const outcome =
							scenario === 'single'
								? await engine.drainSingle(workers)
								: await engine.drainBatch(workers, limit);
						seconds = (now() - t) / 1000;
						wal = await walSince(pool, lsn);
						if (!outcome || outcome.processed !== jobs)
							throw new Error(`${variant} processed ${outcome?.processed} of ${jobs}`);
					} else {
						await resetSchema(pool, readyQueueLayout(variant));
						await fillOurs(pool, jobs, readyQueueLayout(variant));
						await vacuumAnalyzeSchema(pool, SCHEMA);
						await checkpoint(pool);
						const lsn = await walPosition(pool);
						const t = now();
						const processed = await drainFloor(pool, variant, workers, limit);
						seconds = (now() - t) / 1000;
						wal = await walSince(pool, lsn);
						if (processed !== jobs) throw new Error(`${variant} processed ${processed} of ${jobs}`);
						hot = await hotShare(pool);
						(hotUpdates[scenario][variant] ??= []).push(round(hot, 3));
					}
					(walPerJob[scenario][variant] ??= []).push(round(wal / jobs, 0));
					record(
						scenario,
						variant,
						jobs / seconds,
						`, ${round(wal / jobs, 0)} B of WAL per job${hot === undefined ? '' : `, ${round(hot * 100, 0)}% HOT`}`,
					);
				}
			}
		}
		log(`enqueue: ${config.enqueueBatches} batches of 1000`);
		const enqueueVariants = ['graphile', 'ours', 'insert', 'insert-bare'] as const;
		for (let r = 0; r < config.repeat; r++) {
			const shift = r % enqueueVariants.length;
			for (const variant of [...enqueueVariants.slice(shift), ...enqueueVariants.slice(0, shift)]) {
				const jobs = config.enqueueBatches * 1000;
				let ms: number;
				if (variant === 'graphile' || variant === 'ours') {
					const engine = variant === 'graphile' ? graphile : ours;
					await engine.reset();
					await engine.enqueueBatch(-1000, 1000);
					await checkpoint(pool);
					const t = now();
					for (let b = 0; b < config.enqueueBatches; b++) await engine.enqueueBatch(b * 1000, 1000);
					ms = now() - t;
				} else {
					await resetSchema(pool);
					await enqueueFloor(pool, variant === 'insert-bare', 1, 1000);
					await checkpoint(pool);
					ms = await enqueueFloor(pool, variant === 'insert-bare', config.enqueueBatches, 1000);
				}
				record('enqueue', variant, jobs / (ms / 1000));
			}
		}
		const medians = Object.fromEntries(
			Object.entries(runs).map(([scenario, byVariant]) => [
				scenario,
				Object.fromEntries(
					Object.entries(byVariant).map(([variant, values]) => [variant, median(values)]),
				),
			]),
		);
		const over = (scenario: string, variant: string, reference: string) =>
			medians[scenario][reference] === undefined
				? null
				: round(medians[scenario][variant] / medians[scenario][reference], 2);
		const medianOf = (byVariant: Record<string, Record<string, number[]>>) =>
			Object.fromEntries(
				Object.entries(byVariant).map(([scenario, values]) => [
					scenario,
					Object.fromEntries(
						Object.entries(values).map(([variant, list]) => [variant, median(list)]),
					),
				]),
			);
		const ratios = {
			single: Object.fromEntries(
				drainVariants.map((variant) => [variant, over('single', variant, 'graphile')]),
			),
			batch: Object.fromEntries(
				drainVariants.map((variant) => [variant, over('batch', variant, 'graphile')]),
			),
			batchToPgBoss: Object.fromEntries(
				drainVariants.map((variant) => [variant, over('batch', variant, 'pgboss')]),
			),
			enqueue: Object.fromEntries(
				enqueueVariants.map((variant) => [variant, over('enqueue', variant, 'graphile')]),
			),
		};
		const report = {
			benchmark: 'n8n-nodes-durable-jobs: floors of the per-job work on the package schema',
			startedAt: started.toISOString(),
			durationSeconds: round((now() - t0) / 1000, 1),
			command: `npx tsx bench/floor.ts${process.argv.length > 2 ? ` ${process.argv.slice(2).join(' ')}` : ''}`,
			environment: {
				node: process.version,
				cpus: os.cpus().length,
				loadAverage: os.loadavg().map((value) => round(value, 2)),
				embeddedPostgres: postgres.embedded,
			},
			config,
			medians,
			ratios,
			walBytesPerJob: medianOf(walPerJob),
			hotUpdateShare: medianOf(hotUpdates),
			runs,
		};
		const json = JSON.stringify(report, null, 2);
		process.stdout.write(`${json}\n`);
		if (config.jsonOut) writeFileSync(config.jsonOut, `${json}\n`);
	} finally {
		await ours.close().catch(() => undefined);
		await graphile.close().catch(() => undefined);
		await pgboss.close().catch(() => undefined);
		await dropSchema(pool, SCHEMA).catch(() => undefined);
		await pool.end().catch(() => undefined);
		await postgres.stop();
	}
}

runMain(main);
