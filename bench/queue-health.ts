/**
 * Queue health under load (docs/RELIABILITY.md, "Queue health under load"). Prints one JSON
 * document on stdout; progress goes to stderr.
 *
 *   npx tsx bench/queue-health.ts                       # both parts, default sizes
 *   npx tsx bench/queue-health.ts --part retained       # 1,000,000 finished jobs vs an empty table
 *   npx tsx bench/queue-health.ts --part long-transaction --rate 500 --hold 60
 *   npx tsx bench/queue-health.ts --json-out bench/results/queue-health.json
 *
 * Part "retained": two schemas, one empty and one holding `--retained` finished jobs. Rounds
 * alternate between them; each round fills the queue, then drains it with lease 1 + complete 1
 * (4 workers) and with lease 100 + complete 100 (2 workers), timing every lease call. Stats are
 * timed on both.
 *
 * Part "long-transaction": a producer enqueues `--rate` jobs per second (in batches every
 * 100 ms) into the retained schema, 4 workers lease up to 25 jobs and complete them. After
 * `--before` seconds a REPEATABLE READ transaction takes a snapshot and holds it for `--hold`
 * seconds, then commits; the run goes on for `--after` seconds. When autovacuum is off on the
 * server, a manual VACUUM runs at the middle of the after phase (and the report says so).
 * Every 5 s a sampler records the table and index sizes, live / dead tuples and the backlog.
 *
 * Database: DATABASE_URL when set, else an embedded PostgreSQL (fsync on, autovacuum at its
 * defaults, so the recovery is autovacuum's).
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import pg from 'pg';

import { DurableJobsError, type EnqueueInput, type LeasedJob } from '../src/core';
import { startPostgres } from '../scripts/lib/postgres';
import { QUEUE } from './lib/engine';
import { OursEngine, drainQueue } from './lib/ours';
import { loadOurs, measureOursStats } from './lib/stats';
import {
	checkpoint,
	log,
	median,
	now,
	quoteIdent,
	readFlags,
	round,
	runMain,
	sleep,
	summarize,
	type Summary,
	vacuumAnalyzeSchema,
} from './lib/util';

interface Config {
	parts: Array<'retained' | 'long-transaction'>;
	retained: number;
	rounds: number;
	singleJobs: number;
	batchJobs: number;
	statsIterations: number;
	rate: number;
	warmup: number;
	before: number;
	hold: number;
	after: number;
	jsonOut: string | null;
}

function parseArgs(argv: string[]): Config {
	const { flags, int } = readFlags(argv, [
		'part',
		'retained',
		'rounds',
		'single-jobs',
		'batch-jobs',
		'stats-iterations',
		'rate',
		'warmup',
		'before',
		'hold',
		'after',
		'json-out',
	]);
	const part = flags.get('part') ?? 'both';
	if (!['both', 'retained', 'long-transaction'].includes(part))
		throw new Error('--part must be retained, long-transaction or both');
	return {
		parts:
			part === 'both'
				? ['retained', 'long-transaction']
				: [part as 'retained' | 'long-transaction'],
		retained: int('retained', 1_000_000),
		rounds: int('rounds', 5),
		singleJobs: int('single-jobs', 1500),
		batchJobs: int('batch-jobs', 10_000),
		statsIterations: int('stats-iterations', 300),
		rate: int('rate', 500),
		warmup: int('warmup', 20),
		before: int('before', 60),
		hold: int('hold', 60),
		after: int('after', 120),
		jsonOut: flags.get('json-out') ?? null,
	};
}

function ok<T>(results: Array<T | DurableJobsError>): T[] {
	for (const result of results) if (result instanceof DurableJobsError) throw result;
	return results as T[];
}

interface DrainFigures {
	jobsPerSecond: number;
	leaseMs: Summary;
	completeMs: Summary;
}

/** Drains the queue (drainQueue), timing each lease and each completion. */
async function drain(
	engine: OursEngine,
	workers: number,
	limit: number,
	expected: number,
): Promise<DrainFigures> {
	const timings = { leaseMs: [] as number[], completeMs: [] as number[] };
	const started = now();
	const { processed } = await drainQueue(engine.store, {
		queue: QUEUE,
		workers,
		limit,
		leaseMs: 60_000,
		timings,
	});
	const seconds = (now() - started) / 1000;
	if (processed !== expected) throw new Error(`drained ${processed} jobs, expected ${expected}`);
	return {
		jobsPerSecond: round(processed / seconds, 0),
		leaseMs: summarize(timings.leaseMs),
		completeMs: summarize(timings.completeMs),
	};
}

async function fill(engine: OursEngine, count: number): Promise<void> {
	for (let start = 0; start < count; start += 1000)
		await engine.enqueueBatch(start, Math.min(1000, count - start));
	await vacuumAnalyzeSchema(engine.pool, engine.schema);
	await checkpoint(engine.pool);
}

async function tableCounts(pool: pg.Pool, schema: string): Promise<Record<string, number>> {
	const { rows } = await pool.query<{ status: string; n: string }>(
		`SELECT status, count(*) AS n FROM ${quoteIdent(schema)}.jobs GROUP BY status`,
	);
	return Object.fromEntries(rows.map((row) => [row.status, Number(row.n)]));
}

async function partRetained(config: Config, url: string): Promise<Record<string, unknown>> {
	const empty = new OursEngine(url, 'health_empty', 12);
	const retained = new OursEngine(url, 'health_retained', 12);
	try {
		await retained.reset();
		log(`loading ${config.retained.toLocaleString('en-US')} finished jobs into health_retained`);
		const loadSeconds = await loadOurs(retained, config.retained, {
			queued: 0,
			running: 0,
			failed: 0,
		});
		const rounds: Array<Record<string, unknown>> = [];
		for (let round_ = 0; round_ < config.rounds; round_++) {
			const order = round_ % 2 === 0 ? [empty, retained] : [retained, empty];
			const figures: Record<string, unknown> = {};
			for (const engine of order) {
				// The empty side starts from a freshly migrated schema every round; the retained
				// side keeps its rows (and the ones each round adds).
				if (engine === empty) await empty.reset();
				await fill(engine, config.singleJobs);
				const single = await drain(engine, 4, 1, config.singleJobs);
				await fill(engine, config.batchJobs);
				const batch = await drain(engine, 2, 100, config.batchJobs);
				figures[engine === empty ? 'empty' : 'retained'] = { single, batch };
				log(
					`  round ${round_ + 1} ${engine.schema}: lease 1 ×4 ${single.jobsPerSecond} jobs/s (lease p50 ${single.leaseMs.p50} ms), ` +
						`lease 100 ×2 ${batch.jobsPerSecond} jobs/s (lease p50 ${batch.leaseMs.p50} ms)`,
				);
			}
			rounds.push({ order: order.map((engine) => engine.schema), ...figures });
		}
		const pick = (
			side: 'empty' | 'retained',
			kind: 'single' | 'batch',
			value: (figures: DrainFigures) => number,
		) => rounds.map((entry) => value((entry[side] as Record<string, DrainFigures>)[kind]));
		const compare = (kind: 'single' | 'batch') => {
			const emptyRate = median(pick('empty', kind, (figures) => figures.jobsPerSecond));
			const retainedRate = median(pick('retained', kind, (figures) => figures.jobsPerSecond));
			const emptyLease = median(pick('empty', kind, (figures) => figures.leaseMs.p50));
			const retainedLease = median(pick('retained', kind, (figures) => figures.leaseMs.p50));
			const perRound = rounds.map((entry) => {
				const e = (entry.empty as Record<string, DrainFigures>)[kind].jobsPerSecond;
				const r = (entry.retained as Record<string, DrainFigures>)[kind].jobsPerSecond;
				return round(r / e, 3);
			});
			return {
				medianJobsPerSecond: { empty: emptyRate, retained: retainedRate },
				retainedOverEmpty: round(retainedRate / emptyRate, 3),
				retainedOverEmptyPerRound: perRound,
				medianLeaseP50Ms: { empty: emptyLease, retained: retainedLease },
				withinTwentyPercent: retainedRate >= 0.8 * emptyRate,
			};
		};
		log('stats on both schemas');
		await empty.reset();
		const statsEmpty = await measureOursStats(empty, config.statsIterations);
		const statsRetained = await measureOursStats(retained, config.statsIterations);
		const counts = await tableCounts(retained.pool, retained.schema);
		const sizes = await relationSizes(retained.pool, retained.schema);
		return {
			retainedRows: config.retained,
			loadSeconds: round(loadSeconds, 1),
			retainedTableAtEnd: { counts, sizes },
			leaseSingleFourWorkers: compare('single'),
			leaseBatch100TwoWorkers: compare('batch'),
			stats: {
				empty: { calls: statsEmpty.calls, serverMs: statsEmpty.serverMs },
				retained: {
					calls: statsRetained.calls,
					serverMs: statsRetained.serverMs,
					jit: statsRetained.jit,
					sample: statsRetained.sample,
				},
				underFiveMsP95: statsRetained.calls.p95 < 5,
			},
			rounds,
		};
	} finally {
		await empty.close().catch(() => undefined);
		// The long-transaction part reuses health_retained; it is dropped at the end of the run.
		await retained.pool.end().catch(() => undefined);
	}
}

async function relationSizes(pool: pg.Pool, schema: string): Promise<Record<string, number>> {
	const { rows } = await pool.query<{ name: string; bytes: string }>(
		`SELECT c.relname AS name, pg_relation_size(c.oid) AS bytes
		   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		  WHERE n.nspname = $1 AND c.relkind IN ('r', 'i')
		    AND (c.relname LIKE 'jobs%' OR c.relname LIKE 'job_attempt%')
		  ORDER BY c.relname`,
		[schema],
	);
	return Object.fromEntries(rows.map((row) => [row.name, Number(row.bytes)]));
}

interface Sample {
	t: number;
	phase: string;
	backlog: number;
	sizes: Record<string, number>;
	tuples: Record<
		string,
		{
			live: number;
			dead: number;
			hotUpdates: number;
			updates: number;
			vacuums: number;
			autovacuums: number;
		}
	>;
	oldestXminAgeSeconds: number | null;
}

async function sample(pool: pg.Pool, schema: string, t: number, phase: string): Promise<Sample> {
	const s = quoteIdent(schema);
	const [backlog, tuples, xmin] = await Promise.all([
		pool.query<{ n: string }>(
			`SELECT count(*) AS n FROM ${s}.jobs WHERE queue = $1 AND status = 'queued'`,
			[QUEUE],
		),
		pool.query<{
			relname: string;
			live: string;
			dead: string;
			hot: string;
			upd: string;
			vac: string;
			autovac: string;
		}>(
			`SELECT relname, n_live_tup AS live, n_dead_tup AS dead, n_tup_hot_upd AS hot, n_tup_upd AS upd, vacuum_count AS vac, autovacuum_count AS autovac
			   FROM pg_stat_user_tables WHERE schemaname = $1 AND relname IN ('jobs', 'job_attempt_records')`,
			[schema],
		),
		pool.query<{ age: number | null }>(
			`SELECT extract(epoch FROM now() - min(xact_start))::float8 AS age FROM pg_stat_activity
			  WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`,
		),
	]);
	return {
		t: round(t, 1),
		phase,
		backlog: Number(backlog.rows[0].n),
		sizes: await relationSizes(pool, schema),
		tuples: Object.fromEntries(
			tuples.rows.map((row) => [
				row.relname,
				{
					live: Number(row.live),
					dead: Number(row.dead),
					hotUpdates: Number(row.hot),
					updates: Number(row.upd),
					vacuums: Number(row.vac),
					autovacuums: Number(row.autovac),
				},
			]),
		),
		oldestXminAgeSeconds: xmin.rows[0].age === null ? null : round(xmin.rows[0].age, 1),
	};
}

async function partLongTransaction(
	config: Config,
	url: string,
	autovacuum: boolean,
): Promise<Record<string, unknown>> {
	const engine = new OursEngine(url, 'health_retained', 12);
	const admin = new pg.Pool({ connectionString: url, max: 3 });
	admin.on('error', () => undefined);
	const holder = new pg.Client({ connectionString: url });
	try {
		// Reuse the retained schema when the first part loaded it; otherwise load it now.
		const exists = await admin.query(
			`SELECT 1 FROM pg_namespace WHERE nspname = 'health_retained'`,
		);
		if (exists.rowCount === 0) {
			await engine.reset();
			log(`loading ${config.retained.toLocaleString('en-US')} finished jobs into health_retained`);
			await loadOurs(engine, config.retained, { queued: 0, running: 0, failed: 0 });
		} else {
			engine.attach();
		}
		await vacuumAnalyzeSchema(admin, engine.schema);
		await checkpoint(admin);
		const store = engine.store;
		const t0 = now();
		const elapsed = () => (now() - t0) / 1000;
		const holdStart = config.warmup + config.before;
		const holdEnd = holdStart + config.hold;
		const end = holdEnd + config.after;
		const vacuumAt = autovacuum ? null : holdEnd + Math.floor(config.after / 2);
		const phaseAt = (t: number) =>
			t < config.warmup
				? 'warmup'
				: t < holdStart
					? 'before'
					: t < holdEnd
						? 'during'
						: vacuumAt !== null && t >= vacuumAt
							? 'after-vacuum'
							: 'after';
		let stopping = false;

		// Producer: `rate` jobs per second in batches every 100 ms, on an absolute schedule so
		// that a slow call is caught up by the next one (the offered load stays at `rate`).
		let produced = 0;
		const producer = async () => {
			let tick = 0;
			while (!stopping) {
				const due =
					Math.floor(((tick + 1) * config.rate) / 10) - Math.floor((tick * config.rate) / 10);
				const items: EnqueueInput[] = Array.from({ length: due }, (_, i) => ({
					queue: QUEUE,
					payload: { n: produced + i },
				}));
				if (items.length > 0) ok(await store.enqueue(items));
				produced += items.length;
				tick++;
				const wait = t0 + tick * 100 - now();
				if (wait > 0) await sleep(wait);
			}
		};

		const leases: Array<{ t: number; ms: number; n: number }> = [];
		const completes: Array<{ t: number; ms: number; n: number }> = [];
		const worker = async () => {
			while (!stopping) {
				const t = now();
				const jobs: LeasedJob[] = await store.lease({ queue: QUEUE, limit: 25, leaseMs: 60_000 });
				leases.push({ t: (t - t0) / 1000, ms: now() - t, n: jobs.length });
				if (jobs.length === 0) {
					await sleep(20);
					continue;
				}
				const c = now();
				const results = ok(
					await store.complete(
						jobs.map((job) => ({
							jobId: job.id,
							attemptId: job.attempt_id,
							outcome: 'succeeded' as const,
						})),
					),
				);
				completes.push({ t: (c - t0) / 1000, ms: now() - c, n: jobs.length });
				if (results.some((result) => !result.applied))
					throw new Error('a complete was not applied');
			}
		};

		const statsCalls: Array<{ t: number; ms: number }> = [];
		const statsProbe = async () => {
			while (!stopping) {
				const t = now();
				await store.stats(QUEUE);
				statsCalls.push({ t: (t - t0) / 1000, ms: now() - t });
				await sleep(500);
			}
		};

		const samples: Sample[] = [];
		const sampler = async () => {
			while (!stopping) {
				const t = elapsed();
				samples.push(await sample(admin, engine.schema, t, phaseAt(t)));
				await sleep(5000 - ((now() - t0) % 5000));
			}
		};

		const events: Array<{ t: number; event: string; ms?: number }> = [];
		const timeline = async () => {
			await sleep(holdStart * 1000 - (now() - t0));
			await holder.connect();
			await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
			// The snapshot is taken by the first statement, not by BEGIN.
			await holder.query(
				`SELECT count(*) FROM ${quoteIdent(engine.schema)}.jobs WHERE status = 'queued'`,
			);
			events.push({ t: round(elapsed(), 1), event: 'REPEATABLE READ snapshot taken' });
			log(`  ${round(elapsed(), 0)} s: REPEATABLE READ snapshot taken, holding ${config.hold} s`);
			await sleep(holdEnd * 1000 - (now() - t0));
			await holder.query('COMMIT');
			events.push({ t: round(elapsed(), 1), event: 'REPEATABLE READ transaction committed' });
			log(`  ${round(elapsed(), 0)} s: committed`);
			if (vacuumAt !== null) {
				await sleep(vacuumAt * 1000 - (now() - t0));
				const v = now();
				await admin.query(
					`VACUUM ${quoteIdent(engine.schema)}.jobs, ${quoteIdent(engine.schema)}.job_attempt_records`,
				);
				events.push({
					t: round(elapsed(), 1),
					event:
						'manual VACUUM of jobs and job_attempt_records finished (autovacuum is off on this server)',
					ms: round(now() - v, 0),
				});
				log(`  ${round(elapsed(), 0)} s: VACUUM took ${round(now() - v, 0)} ms`);
			}
			await sleep(end * 1000 - (now() - t0));
			stopping = true;
		};

		log(
			`steady ${config.rate} jobs/s: warm-up ${config.warmup} s, before ${config.before} s, snapshot held ${config.hold} s, after ${config.after} s`,
		);
		await Promise.all([
			producer(),
			worker(),
			worker(),
			worker(),
			worker(),
			statsProbe(),
			sampler(),
			timeline(),
		]);
		samples.push(await sample(admin, engine.schema, elapsed(), 'end'));

		// Figures per phase and per 10-second bucket.
		const phases = ['before', 'during', 'after', 'after-vacuum'];
		const byPhase = Object.fromEntries(
			phases
				.map((phase) => {
					const inPhase = <T extends { t: number }>(list: T[]) =>
						list.filter((entry) => phaseAt(entry.t) === phase);
					const l = inPhase(leases);
					if (l.length === 0) return null;
					const seconds =
						phase === 'before'
							? config.before
							: phase === 'during'
								? config.hold
								: phase === 'after'
									? (vacuumAt ?? end) - holdEnd
									: end - (vacuumAt ?? end);
					return [
						phase,
						{
							seconds,
							leaseMs: summarize(l.map((entry) => entry.ms)),
							leaseMsNonEmpty: summarize(l.filter((entry) => entry.n > 0).map((entry) => entry.ms)),
							completeMs: summarize(inPhase(completes).map((entry) => entry.ms)),
							completedPerSecond: round(
								inPhase(completes).reduce((sum, entry) => sum + entry.n, 0) / seconds,
								0,
							),
							statsMs: summarize(inPhase(statsCalls).map((entry) => entry.ms)),
						},
					] as const;
				})
				.filter((entry): entry is NonNullable<typeof entry> => entry !== null),
		);
		const buckets: Array<Record<string, unknown>> = [];
		for (let from = 0; from < end; from += 10) {
			const l = leases.filter((entry) => entry.t >= from && entry.t < from + 10);
			const c = completes.filter((entry) => entry.t >= from && entry.t < from + 10);
			const last = [...samples].reverse().find((entry) => entry.t < from + 10);
			const leaseMs = summarize(l.map((entry) => entry.ms));
			buckets.push({
				from,
				phase: phaseAt(from),
				leaseP50Ms: leaseMs.p50,
				leaseP95Ms: leaseMs.p95,
				leaseMaxMs: leaseMs.max,
				completedPerSecond: round(c.reduce((sum, entry) => sum + entry.n, 0) / 10, 0),
				backlog: last?.backlog ?? null,
				jobsDeadTuples: last?.tuples.jobs?.dead ?? null,
				jobsBytes: last?.sizes.jobs ?? null,
				queuedIndexBytes: last?.sizes.jobs_queued_claim ?? null,
				runningIndexBytes: last?.sizes.jobs_running ?? null,
				attemptsDeadTuples: last?.tuples.job_attempt_records?.dead ?? null,
			});
		}
		return {
			rate: config.rate,
			workers: 4,
			leaseLimit: 25,
			produced,
			phases: byPhase,
			buckets,
			events,
			samples,
		};
	} finally {
		await holder.end().catch(() => undefined);
		await engine.close().catch(() => undefined);
		await admin.end().catch(() => undefined);
	}
}

async function main(): Promise<void> {
	const config = parseArgs(process.argv.slice(2));
	const postgres = await startPostgres(
		(line) => {
			if (process.env.DEBUG_POSTGRES) log(line);
		},
		['-c', 'fsync=on'],
	);
	log(
		postgres.embedded
			? 'DATABASE_URL not set: using an embedded PostgreSQL (fsync on, autovacuum on)'
			: 'using DATABASE_URL',
	);
	const admin = new pg.Pool({ connectionString: postgres.url, max: 1 });
	admin.on('error', () => undefined);
	const started = new Date();
	const t0 = now();
	try {
		const settings = await admin.query<{ name: string; setting: string; unit: string | null }>(
			`SELECT name, setting, unit FROM pg_settings WHERE name IN
			 ('server_version', 'autovacuum', 'autovacuum_naptime', 'autovacuum_vacuum_scale_factor', 'autovacuum_vacuum_threshold',
			  'autovacuum_vacuum_cost_limit', 'shared_buffers', 'fsync', 'synchronous_commit', 'max_wal_size')`,
		);
		const server = Object.fromEntries(
			settings.rows.map((row) => [row.name, row.unit ? `${row.setting} ${row.unit}` : row.setting]),
		);
		const autovacuum = server.autovacuum === 'on';
		log(
			`PostgreSQL ${server.server_version}, autovacuum ${server.autovacuum}, ${os.cpus().length} cores`,
		);
		const report: Record<string, unknown> = {
			benchmark: 'n8n-nodes-durable-jobs queue health under load',
			startedAt: started.toISOString(),
			command: `npx tsx bench/queue-health.ts${process.argv.length > 2 ? ` ${process.argv.slice(2).join(' ')}` : ''}`,
			environment: {
				node: process.version,
				cpus: os.cpus().length,
				cpuModel: os.cpus()[0]?.model,
				memoryGiB: round(os.totalmem() / 2 ** 30, 1),
				loadAverageAtStart: os.loadavg().map((value) => round(value, 2)),
				embeddedPostgres: postgres.embedded,
				server,
			},
			config,
		};
		if (config.parts.includes('retained'))
			report.retained = await partRetained(config, postgres.url);
		if (config.parts.includes('long-transaction'))
			report.longTransaction = await partLongTransaction(config, postgres.url, autovacuum);
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
		await admin.query('DROP SCHEMA IF EXISTS health_retained CASCADE').catch(() => undefined);
		await admin.query('DROP SCHEMA IF EXISTS health_empty CASCADE').catch(() => undefined);
		await admin.end().catch(() => undefined);
		await postgres.stop();
	}
}

runMain(main);
