/**
 * Where the time of a drain goes, per SQL statement. Starts a private embedded PostgreSQL with
 * pg_stat_statements (track = all, so statements run inside triggers are listed too), drains a
 * pre-filled queue through one engine and prints, as JSON on stdout:
 *   - pg_stat_statements: calls, planning and execution time, WAL bytes per statement;
 *   - sampled wait events of the worker connections, and the relations of contended row locks;
 *   - WAL bytes per job;
 *   - how fast the machine was just before and after the drain (`speedProbe`): the same
 *     in-server query and Node.js loop every time. This machine's speed changes by a fifth and
 *     more from one half-minute to the next, which tells a slow run of the code from a run on a
 *     slow machine.
 *
 *   npx tsx bench/profile.ts [--engine ours|pgboss|graphile] [--jobs 4000] [--workers 1,8] [--batch 1]
 *     [--plans-log plans.log]   # also write EXPLAIN ANALYZE of 5% of the statements (auto_explain)
 *
 * It never touches DATABASE_URL: pg_stat_statements needs shared_preload_libraries, which only a
 * server of our own can be started with.
 */
import pg from 'pg';

import type { Engine, EngineId } from './lib/engine';
import { GraphileEngine } from './lib/graphile';
import { OursEngine } from './lib/ours';
import { PgBossEngine } from './lib/pgboss';
import { startProfilingPostgres } from './lib/profiling';
import { speedProbe } from './lib/speed-probe';
import { log, now, round, runMain, sleep, vacuumAnalyzeSchema } from './lib/util';

interface Options {
	engine: EngineId;
	jobs: number;
	workers: number[];
	batch: number;
	plansLog: string | null;
}

function parse(argv: string[]): Options {
	const options: Options = {
		engine: 'ours',
		jobs: 4000,
		workers: [1, 8],
		batch: 1,
		plansLog: null,
	};
	for (let i = 0; i < argv.length; i += 2) {
		const [flag, value] = [argv[i], argv[i + 1]];
		if (value === undefined) throw new Error(`${flag} needs a value`);
		if (flag === '--engine') options.engine = value as EngineId;
		else if (flag === '--jobs') options.jobs = Number(value);
		else if (flag === '--workers') options.workers = value.split(',').map(Number);
		else if (flag === '--batch') options.batch = Number(value);
		else if (flag === '--plans-log') options.plansLog = value;
		else throw new Error(`unknown option ${flag}`);
	}
	return options;
}

/** Samples what the benchmark's connections wait on, and which relations hold contended row locks. */
function sampler(
	pool: pg.Pool,
	database: string,
): { stop: () => Promise<Record<string, unknown>> } {
	let running = true;
	const waits = new Map<string, number>();
	const lockRelations = new Map<string, number>();
	let samples = 0;
	const loop = (async () => {
		while (running) {
			samples++;
			const { rows } = await pool.query<{ w: string }>(
				`SELECT coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, 'running') AS w
				 FROM pg_stat_activity WHERE datname = $1 AND state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
				[database],
			);
			for (const row of rows) waits.set(row.w, (waits.get(row.w) ?? 0) + 1);
			// A backend waiting for a row lock holds the tuple lock of that row's relation meanwhile.
			const locks = await pool.query<{ rel: string }>(
				`SELECT coalesce(c.relname, l.locktype) AS rel FROM pg_locks l LEFT JOIN pg_class c ON c.oid = l.relation
				 WHERE l.locktype = 'tuple' OR NOT l.granted`,
			);
			for (const row of locks.rows)
				lockRelations.set(row.rel, (lockRelations.get(row.rel) ?? 0) + 1);
			await sleep(3);
		}
	})();
	return {
		stop: async () => {
			running = false;
			await loop;
			const top = (map: Map<string, number>) =>
				Object.fromEntries([...map.entries()].sort((a, b) => b[1] - a[1]).slice(0, 12));
			return { samples, waitEvents: top(waits), rowLockRelations: top(lockRelations) };
		},
	};
}

async function main(): Promise<void> {
	const options = parse(process.argv.slice(2));
	log('starting a private PostgreSQL with pg_stat_statements');
	const server = await startProfilingPostgres(options.plansLog);
	const admin = new pg.Pool({ connectionString: server.url, max: 2 });
	admin.on('error', () => undefined);
	const engines: Record<EngineId, () => Engine> = {
		ours: () => new OursEngine(server.url),
		pgboss: () => new PgBossEngine(server.url),
		graphile: () => new GraphileEngine(server.url),
	};
	const engine = engines[options.engine]();
	const report: Record<string, unknown> = {
		engine: options.engine,
		jobs: options.jobs,
		batch: options.batch,
		runs: [] as unknown[],
	};
	try {
		await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
		const { rows: version } = await admin.query<{ v: string }>(
			`SELECT current_setting('server_version') AS v`,
		);
		report.postgres = version[0].v;
		for (const workers of options.workers) {
			await engine.reset();
			await engine.prefill(options.jobs);
			await vacuumAnalyzeSchema(admin, engine.schema);
			await admin.query('CHECKPOINT');
			await admin.query('SELECT pg_stat_statements_reset()');
			const [{ lsn: before }] = (
				await admin.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')
			).rows;
			const speedBefore = await speedProbe(admin);
			const watch = sampler(admin, 'postgres');
			const started = now();
			const outcome =
				options.batch === 1
					? await engine.drainSingle(workers)
					: await engine.drainBatch(workers, options.batch);
			const seconds = (now() - started) / 1000;
			const waits = await watch.stop();
			const speedAfter = await speedProbe(admin);
			const [{ bytes }] = (
				await admin.query<{ bytes: string }>(
					'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint AS bytes',
					[before],
				)
			).rows;
			const processed = outcome?.processed ?? 0;
			const { rows: statements } = await admin.query<Record<string, string | number | boolean>>(
				`SELECT toplevel, calls, round(total_exec_time::numeric, 1) AS exec_ms, round(total_plan_time::numeric, 1) AS plan_ms,
					round((total_exec_time / greatest(calls, 1))::numeric, 3) AS mean_exec_ms,
					round((total_plan_time / greatest(calls, 1))::numeric, 3) AS mean_plan_ms,
					rows, wal_bytes, shared_blks_hit + shared_blks_read AS blocks,
					left(regexp_replace(query, '\\s+', ' ', 'g'), 160) AS query
				 FROM pg_stat_statements
				 WHERE query NOT ILIKE '%pg_stat%' AND query NOT ILIKE '%pg_locks%' AND query NOT ILIKE '%pg_current_wal_lsn%'
				 ORDER BY total_exec_time + total_plan_time DESC LIMIT 15`,
			);
			const run = {
				workers,
				processed,
				seconds: round(seconds, 3),
				jobsPerSec: round(processed / seconds, 0),
				walBytesPerJob: round(Number(bytes) / Math.max(1, processed), 0),
				speedProbe: { before: speedBefore, after: speedAfter },
				...waits,
				statements,
			};
			log(
				`${options.engine} workers=${workers}: ${run.jobsPerSec} jobs/s, ${run.walBytesPerJob} WAL bytes/job, speed probe ${JSON.stringify(run.speedProbe)}`,
			);
			(report.runs as unknown[]).push(run);
		}
		process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
	} finally {
		await engine.close().catch(() => undefined);
		await admin.end().catch(() => undefined);
		await server.stop();
	}
}

runMain(main);
