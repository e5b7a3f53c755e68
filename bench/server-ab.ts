/**
 * Server time per statement of two versions of the core, measured in one run: the core of a git
 * ref (default HEAD) and the working tree's, each with its own database on one private
 * PostgreSQL with pg_stat_statements (see bench/profile.ts). Both are filled alike, then one
 * worker leases and completes `--batch` jobs at a time, alternating between the two versions
 * call by call, so a noisy machine slows both alike. Prints, as JSON on stdout, the mean
 * execution time of each top-level statement per version and their ratio, and each side's mean
 * wall time per lease and per completion call (pg_stat_statements does not count the executor's
 * start, which the wall time does).
 *
 *   npx tsx bench/server-ab.ts [--ref HEAD] [--jobs 3000] [--batch 1] [--heartbeat on]
 *
 * With `--enqueue on`, both sides instead enqueue `--jobs` jobs, `--batch` per call, alternating
 * call by call, and the report adds each side's mean wall time per call (client and server).
 *
 *   npx tsx bench/server-ab.ts --enqueue on [--jobs 3000] [--batch 1] [--keys on]
 *
 * (`--keys on`: every job has an idempotency key of its own.)
 *
 * Separate databases, not schemas: pg_stat_statements may count statements of the same shape
 * on tables of the same name in two schemas as one. Separate runs of bench/profile.ts varied by
 * more than a fifth on a shared machine, for the same code.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

import { startProfilingPostgres } from './lib/profiling';
import { exportRef } from './lib/ref';
import { log, readFlags, round, runMain, vacuumAnalyzeSchema } from './lib/util';

type Core = typeof import('../src/core');

interface Side {
	name: 'before' | 'after';
	core: Core;
	pool: pg.Pool;
	store: InstanceType<Core['JobStore']>;
}

const SCHEMA = 'bench_ab';
const QUEUE = 'bench';

function statementKind(query: string): string {
	if (query.includes('extended AS')) return 'heartbeat';
	// Both completion statements (any outcome, and all succeeded) end with the callbacks CTE.
	if (query.includes('callbacks AS MATERIALIZED')) return 'complete';
	if (query.includes('WITH queued AS') || query.includes('WITH probe AS')) return 'lease';
	if (/INSERT INTO \S+\.jobs \(id, queue/.test(query)) return 'enqueue';
	return query.replace(/\s+/g, ' ').slice(0, 60);
}

async function main(): Promise<void> {
	const { flags, int, onOff } = readFlags(process.argv.slice(2), [
		'ref',
		'jobs',
		'batch',
		'heartbeat',
		'enqueue',
		'keys',
	]);
	const ref = flags.get('ref') ?? 'HEAD';
	const jobs = int('jobs', 3000, 1);
	const batch = int('batch', 1, 1);
	const heartbeat = onOff('heartbeat', false);
	const enqueueOnly = onOff('enqueue', false);
	const withKeys = onOff('keys', false);
	const key = (n: number) => (withKeys ? { idempotencyKey: `key-${n}` } : {});
	/** Wall time per side (enqueue) or per side and call (`before:lease`, …), in ms. */
	const wallMs: Record<string, number> = {};
	const addWall = (key: string, started: number) => {
		wallMs[key] = (wallMs[key] ?? 0) + performance.now() - started;
	};
	const perCall = (key: string) => round(wallMs[key] / Math.ceil(jobs / batch), 4);
	const exported = exportRef(ref);
	log(`before: ${exported.commit}; after: the working tree`);
	const server = await startProfilingPostgres(null);
	const admin = new pg.Pool({ connectionString: server.url, max: 2 });
	const sides: Side[] = [];
	try {
		await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
		const cores: Array<[Side['name'], Core]> = [
			['before', (await import(join(exported.dir, 'src', 'core'))) as Core],
			['after', (await import('../src/core')) as Core],
		];
		for (const [name, core] of cores) {
			await admin.query(`CREATE DATABASE ab_${name}`);
			const pool = new pg.Pool({
				connectionString: server.url.replace(/\/postgres$/, `/ab_${name}`),
				max: 4,
			});
			await core.migrate(pool, SCHEMA);
			const store = new core.JobStore(pool, { schema: SCHEMA });
			if (enqueueOnly) {
				// Warm both sides' code and plans, so neither is measured while V8 compiles it.
				for (let n = 0; n < 500; n++)
					await store.enqueue([{ queue: QUEUE, payload: { n }, ...key(-n - 1) }]);
			}
			for (let start = 0; start < jobs && !enqueueOnly; start += 1000) {
				const size = Math.min(1000, jobs - start);
				await store.enqueue(
					Array.from({ length: size }, (_, n) => ({ queue: QUEUE, payload: { n: start + n } })),
				);
			}
			await vacuumAnalyzeSchema(pool, SCHEMA);
			sides.push({ name, core, pool, store });
		}
		await admin.query('CHECKPOINT');
		await admin.query('SELECT pg_stat_statements_reset()');
		if (enqueueOnly) {
			log(`enqueueing ${jobs} jobs per side, ${batch} per call, alternating`);
			for (let done = 0; done < jobs; done += batch) {
				for (const side of sides) {
					const items = Array.from({ length: batch }, (_, n) => ({
						queue: QUEUE,
						payload: { n: done + n },
						...key(done + n),
					}));
					const started = performance.now();
					const results = await side.store.enqueue(items);
					addWall(side.name, started);
					for (const result of results)
						if (!('jobId' in result)) throw new Error(`${side.name}: an enqueue failed`);
				}
			}
		}
		if (!enqueueOnly) log(`draining ${jobs} jobs per side, ${batch} per call, alternating`);
		for (let done = 0; done < jobs && !enqueueOnly; done += batch) {
			for (const side of sides) {
				const leaseStarted = performance.now();
				const leased = await side.store.lease({ queue: QUEUE, limit: batch });
				addWall(`${side.name}:lease`, leaseStarted);
				if (heartbeat)
					await side.store.extendLease(
						leased.map((job) => ({ jobId: job.id, attemptId: job.attempt_id })),
					);
				const completeStarted = performance.now();
				const results = await side.store.complete(
					leased.map((job) => ({
						jobId: job.id,
						attemptId: job.attempt_id,
						outcome: 'succeeded' as const,
					})),
				);
				addWall(`${side.name}:complete`, completeStarted);
				for (const result of results)
					if (!('applied' in result) || !result.applied)
						throw new Error(`${side.name}: a completion was not applied`);
			}
		}
		const { rows } = await admin.query<{
			side: Side['name'];
			query: string;
			calls: string;
			total_exec_time: number;
		}>(
			`SELECT substr(d.datname, 4) AS side, s.query, s.calls, s.total_exec_time
			 FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
			 WHERE s.toplevel AND d.datname IN ('ab_before', 'ab_after') AND s.calls >= $1`,
			[Math.floor(jobs / batch)],
		);
		const meanMs: Record<string, Record<string, number>> = { before: {}, after: {} };
		for (const row of rows)
			meanMs[row.side][statementKind(row.query)] = round(
				row.total_exec_time / Number(row.calls),
				4,
			);
		const ratio: Record<string, number> = {};
		for (const kind of Object.keys(meanMs.after))
			if (meanMs.before[kind]) ratio[kind] = round(meanMs.after[kind] / meanMs.before[kind], 3);
		const postgres = (await admin.query<{ v: string }>(`SELECT version() AS v`)).rows[0].v;
		console.log(
			JSON.stringify(
				{
					before: exported.commit,
					after: 'working tree',
					jobs,
					batch,
					heartbeat,
					enqueue: enqueueOnly,
					keys: withKeys,
					postgres,
					meanExecMs: meanMs,
					afterOverBefore: ratio,
					meanWallMsPerCall: Object.fromEntries(
						(['before', 'after'] as const).map((name) => [
							name,
							enqueueOnly
								? perCall(name)
								: { lease: perCall(`${name}:lease`), complete: perCall(`${name}:complete`) },
						]),
					),
				},
				null,
				2,
			),
		);
	} finally {
		for (const side of sides) await side.pool.end();
		await admin.end();
		await server.stop();
		rmSync(exported.dir, { recursive: true, force: true });
	}
}

runMain(main);
