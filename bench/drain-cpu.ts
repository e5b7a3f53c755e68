/**
 * Where the Node.js time of a drain goes: drains a pre-filled queue through JobStore with the
 * V8 sampling profiler on for the drain only (not the fill), and prints, as JSON, the drain's
 * throughput, the process's CPU time and the functions with the most self time.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/drain-cpu.ts [--batch 100] [--workers 2] [--jobs 40000] [--rounds 3]
 *
 * The last round's profile is reported (the first ones warm up the JIT and the prepared
 * statements). `(idle)` is time the thread waited for PostgreSQL; a native frame such as
 * `writev` also counts the time the thread was descheduled inside it.
 */
import { Session } from 'node:inspector/promises';

import { OursEngine } from './lib/ours';
import { readFlags, round } from './lib/util';

interface ProfileNode {
	id: number;
	callFrame: { functionName: string; url: string; lineNumber: number };
}

function selfTimes(profile: {
	nodes: ProfileNode[];
	samples?: number[];
	timeDeltas?: number[];
}): Array<{ function: string; ms: number; share: number }> {
	const byId = new Map(profile.nodes.map((node) => [node.id, node]));
	const totals = new Map<string, number>();
	let all = 0;
	(profile.samples ?? []).forEach((id, index) => {
		const frame = byId.get(id)!.callFrame;
		const name = `${frame.functionName || '(anonymous)'} ${frame.url.split('/').pop() ?? ''}:${frame.lineNumber}`;
		const micros = profile.timeDeltas?.[index] ?? 0;
		totals.set(name, (totals.get(name) ?? 0) + micros);
		all += micros;
	});
	return [...totals.entries()]
		.sort((a, b) => b[1] - a[1])
		.slice(0, 25)
		.map(([name, micros]) => ({
			function: name,
			ms: round(micros / 1000, 1),
			share: round(micros / all, 3),
		}));
}

async function main(): Promise<void> {
	const { int } = readFlags(process.argv.slice(2), ['batch', 'workers', 'jobs', 'rounds']);
	const batch = int('batch', 100, 1);
	const workers = int('workers', 2, 1);
	const jobs = int('jobs', 40_000, 1);
	const rounds = int('rounds', 3, 1);
	const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
	const engine = new OursEngine(url, 'bench_drain_cpu', 12);
	const session = new Session();
	session.connect();
	await session.post('Profiler.enable');
	await session.post('Profiler.setSamplingInterval', { interval: 200 });
	const results = [];
	for (let roundNo = 1; roundNo <= rounds; roundNo++) {
		await engine.reset();
		await engine.prefill(jobs);
		await session.post('Profiler.start');
		const cpuBefore = process.cpuUsage();
		const started = performance.now();
		const outcome = await engine.drainBatch(workers, batch);
		const seconds = (performance.now() - started) / 1000;
		const cpu = process.cpuUsage(cpuBefore);
		const { profile } = await session.post('Profiler.stop');
		results.push({
			round: roundNo,
			jobsPerSec: Math.round(outcome.processed / seconds),
			wallMs: Math.round(seconds * 1000),
			userCpuMs: Math.round(cpu.user / 1000),
			systemCpuMs: Math.round(cpu.system / 1000),
			top: roundNo === rounds ? selfTimes(profile) : undefined,
		});
	}
	await engine.close();
	console.log(JSON.stringify({ batch, workers, jobs, rounds: results }, null, 2));
}

void main();
