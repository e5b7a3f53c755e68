/**
 * Where the CPU time of a drain goes: drains a pre-filled queue through one engine with the V8
 * sampling profiler on for the drain only (not the fill), and prints, as JSON, the drain's
 * throughput, this process's CPU time, the CPU time of the PostgreSQL server's processes, and
 * the functions with the most self and inclusive time.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/drain-cpu.ts [--engine ours|pgboss|graphile] [--batch 100] [--workers 2] [--jobs 40000] [--rounds 3] [--profile on|off] [--metadata off|on]
 *
 * With `--batch 1` each library drains as in the benchmark's "lease 1 + complete 1" scenarios
 * (Engine.drainSingle), otherwise as in "lease N + complete N" (Engine.drainBatch); with
 * `--metadata on` ours and pg-boss lease each job with its metadata, as in the benchmark's row
 * of that name. Each round fills the queue, then runs VACUUM ANALYZE and a CHECKPOINT, as
 * `npm run bench` does before a drain. The last round's profile is reported (the first ones warm up the JIT and the prepared
 * statements). `(idle)` is time the thread waited for PostgreSQL; a native frame such as
 * `writev` also counts the time the thread was descheduled inside it. The sampling costs CPU
 * time of its own: `--profile off` measures the CPU times without it.
 *
 * `postgresCpuMs` adds up the user and system time of every process named `postgres` on this
 * machine (from /proc), so it means something only when the server runs here and nothing else
 * uses it; it is null where /proc cannot be read. On two cores the drain's throughput follows
 * the two sums together: this process and the server share the cores.
 */
import { Session } from 'node:inspector/promises';

import pg from 'pg';

import { ENGINE_IDS, type EngineId } from './lib/engine';
import { engineInSchemas } from './lib/engines';
import { postgresUsage } from './lib/proc';
import { checkpoint, readFlags, round, runMain, vacuumAnalyzeSchema } from './lib/util';

interface ProfileNode {
	id: number;
	callFrame: { functionName: string; url: string; lineNumber: number };
	children?: number[];
}

interface CpuProfile {
	nodes: ProfileNode[];
	samples?: number[];
	timeDeltas?: number[];
}

interface FunctionTime {
	function: string;
	ms: number;
	/** Of all sampled time, `(idle)` included. */
	share: number;
	/** Per job drained, in µs. */
	perJobMicros: number;
}

function frameName(node: ProfileNode): string {
	const frame = node.callFrame;
	return `${frame.functionName || '(anonymous)'} ${frame.url.split('/').pop() ?? ''}:${frame.lineNumber}`;
}

/**
 * The functions with the most time in the profile: `self` counts a sample for the function it
 * was taken in, `inclusive` for that function and every caller on its stack (once each, so a
 * recursive function is not counted twice). Idle samples count for neither list's callers.
 */
function functionTimes(
	profile: CpuProfile,
	jobs: number,
): { self: FunctionTime[]; inclusive: FunctionTime[] } {
	const byId = new Map(profile.nodes.map((node) => [node.id, node]));
	const parentOf = new Map<number, number>();
	for (const node of profile.nodes)
		for (const child of node.children ?? []) parentOf.set(child, node.id);
	const self = new Map<string, number>();
	const inclusive = new Map<string, number>();
	let all = 0;
	(profile.samples ?? []).forEach((id, index) => {
		const micros = profile.timeDeltas?.[index] ?? 0;
		const name = frameName(byId.get(id)!);
		self.set(name, (self.get(name) ?? 0) + micros);
		all += micros;
		if (name.startsWith('(idle)')) return;
		const seen = new Set<string>();
		for (
			let current: number | undefined = id;
			current !== undefined;
			current = parentOf.get(current)
		) {
			const frame = frameName(byId.get(current)!);
			if (seen.has(frame)) continue;
			seen.add(frame);
			inclusive.set(frame, (inclusive.get(frame) ?? 0) + micros);
		}
	});
	const top = (totals: Map<string, number>): FunctionTime[] =>
		[...totals.entries()]
			.sort((a, b) => b[1] - a[1])
			.slice(0, 50)
			.map(([name, micros]) => ({
				function: name,
				ms: round(micros / 1000, 1),
				share: round(micros / all, 3),
				perJobMicros: round(micros / jobs, 2),
			}));
	return { self: top(self), inclusive: top(inclusive) };
}

async function main(): Promise<void> {
	const { flags, int, onOff } = readFlags(process.argv.slice(2), [
		'engine',
		'batch',
		'workers',
		'jobs',
		'rounds',
		'profile',
		'metadata',
	]);
	const engineId = (flags.get('engine') ?? 'ours') as EngineId;
	if (!ENGINE_IDS.includes(engineId))
		throw new Error(`--engine must be one of ${ENGINE_IDS.join(', ')}`);
	const batch = int('batch', 100, 1);
	const workers = int('workers', 2, 1);
	const jobs = int('jobs', 40_000, 1);
	const rounds = int('rounds', 3, 1);
	const profiling = onOff('profile', true);
	const metadata = onOff('metadata', false);
	const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
	const admin = new pg.Pool({ connectionString: url, max: 1 });
	admin.on('error', () => undefined);
	const engine = engineInSchemas(engineId, url, 'bench_drain_cpu');
	const session = new Session();
	session.connect();
	await session.post('Profiler.enable');
	await session.post('Profiler.setSamplingInterval', { interval: 200 });
	const results = [];
	try {
		for (let roundNo = 1; roundNo <= rounds; roundNo++) {
			await engine.reset();
			await engine.prefill(jobs);
			await vacuumAnalyzeSchema(admin, engine.schema);
			await checkpoint(admin);
			if (profiling) await session.post('Profiler.start');
			const postgresBefore = postgresUsage()?.cpuMs ?? null;
			const cpuBefore = process.cpuUsage();
			const started = performance.now();
			const outcome =
				batch === 1
					? await engine.drainSingle(workers)
					: await engine.drainBatch(workers, batch, metadata);
			const seconds = (performance.now() - started) / 1000;
			const cpu = process.cpuUsage(cpuBefore);
			const postgresAfter = postgresUsage()?.cpuMs ?? null;
			const profile: CpuProfile | null = profiling
				? (await session.post('Profiler.stop')).profile
				: null;
			if (outcome === null) throw new Error(`${engineId} has no batch drain`);
			const processed = outcome.processed;
			const postgresMs =
				postgresBefore === null || postgresAfter === null ? null : postgresAfter - postgresBefore;
			results.push({
				round: roundNo,
				jobsPerSec: Math.round(processed / seconds),
				wallMs: Math.round(seconds * 1000),
				userCpuMs: Math.round(cpu.user / 1000),
				systemCpuMs: Math.round(cpu.system / 1000),
				postgresCpuMs: postgresMs,
				perJobMicros: {
					wall: round((seconds * 1e6) / processed, 1),
					nodeCpu: round((cpu.user + cpu.system) / processed, 1),
					postgresCpu: postgresMs === null ? null : round((postgresMs * 1000) / processed, 1),
				},
				profile: profile && roundNo === rounds ? functionTimes(profile, processed) : undefined,
			});
		}
	} finally {
		await engine.close().catch(() => undefined);
		await admin.end().catch(() => undefined);
	}
	console.log(
		JSON.stringify({ engine: engineId, batch, workers, jobs, metadata, rounds: results }, null, 2),
	);
}

runMain(main);
