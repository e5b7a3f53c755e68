/**
 * What one single enqueue costs each side: blocks of sequential one-job enqueues (the
 * benchmark's "enqueue, 1 job per transaction"), the engines taking turns block by block, and
 * per block the p50 latency, the CPU time per call of this process and of the PostgreSQL
 * processes on this machine, the server's minor page faults per call, and the one-row commit
 * and round trip just before the block (lib/commit-probe.ts, as `npm run bench` times them).
 * Prints one JSON document; progress goes to stderr.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/enqueue-cpu.ts [--engines ours,graphile,pgboss] [--blocks 12] [--calls 1000]
 *
 * Each block starts from a freshly reset schema, 20 warm-up calls and a CHECKPOINT, as the
 * benchmark's runs do. The first blocks also warm up the JIT and the connections, so read the
 * later ones. The server's figures come from /proc (see lib/proc.ts): they mean something
 * only when the server runs on this machine and nothing else uses it. Schemas: the engines'
 * `bench_enqueue_cpu*`, and `bench_enqueue_cpu_probe` for the commit probe; all are dropped
 * at the end.
 */
import pg from 'pg';

import { ENGINE_IDS, type EngineId } from './lib/engine';
import { commitProbe, createCommitProbe, dropCommitProbe } from './lib/commit-probe';
import { engineInSchemas } from './lib/engines';
import { postgresUsage } from './lib/proc';
import { checkpoint, log, median, now, readFlags, round, runMain } from './lib/util';

const PROBE_SCHEMA = 'bench_enqueue_cpu_probe';

async function main(): Promise<void> {
	const { flags, int } = readFlags(process.argv.slice(2), ['engines', 'blocks', 'calls']);
	const engineIds = (flags.get('engines') ?? 'ours,graphile,pgboss').split(',') as EngineId[];
	for (const id of engineIds)
		if (!ENGINE_IDS.includes(id)) throw new Error(`--engines takes ${ENGINE_IDS.join(', ')}`);
	const blocks = int('blocks', 12, 1);
	const calls = int('calls', 1000, 10);
	const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
	const admin = new pg.Pool({ connectionString: url, max: 1 });
	admin.on('error', () => undefined);
	const engines = engineIds.map((id) => engineInSchemas(id, url, 'bench_enqueue_cpu'));
	const results = [];
	try {
		await createCommitProbe(admin, PROBE_SCHEMA);
		for (let block = 0; block < blocks; block++) {
			const engine = engines[block % engines.length];
			await engine.reset();
			for (let i = 0; i < 20; i++) await engine.enqueueOne(-i - 1);
			await checkpoint(admin);
			const { commitMs, roundTripMs } = await commitProbe(admin, PROBE_SCHEMA);
			const latencies = new Array<number>(calls);
			const serverBefore = postgresUsage();
			const cpuBefore = process.cpuUsage();
			const started = now();
			for (let i = 0; i < calls; i++) {
				const callStarted = now();
				await engine.enqueueOne(i);
				latencies[i] = now() - callStarted;
			}
			const seconds = (now() - started) / 1000;
			const cpu = process.cpuUsage(cpuBefore);
			const serverAfter = postgresUsage();
			const server =
				serverBefore && serverAfter
					? {
							cpuMicros: round(((serverAfter.cpuMs - serverBefore.cpuMs) * 1000) / calls, 0),
							minorFaults: round((serverAfter.minorFaults - serverBefore.minorFaults) / calls, 1),
						}
					: null;
			const result = {
				block,
				engine: engine.id,
				oneRowCommitMs: commitMs,
				roundTripMs,
				p50Ms: round(median(latencies), 3),
				callsPerSec: Math.round(calls / seconds),
				perCall: {
					nodeCpuMicros: round((cpu.user + cpu.system) / calls, 1),
					nodeSystemCpuMicros: round(cpu.system / calls, 1),
					postgresCpuMicros: server?.cpuMicros ?? null,
					postgresMinorFaults: server?.minorFaults ?? null,
				},
			};
			results.push(result);
			log(
				`${engine.id.padEnd(8)} block ${block}: p50 ${result.p50Ms} ms (commit ${commitMs} ms), per call: Node.js ${result.perCall.nodeCpuMicros} µs, PostgreSQL ${server?.cpuMicros ?? 'n/a'} µs and ${server?.minorFaults ?? 'n/a'} minor faults`,
			);
		}
	} finally {
		for (const engine of engines) await engine.close().catch(() => undefined);
		await dropCommitProbe(admin, PROBE_SCHEMA).catch(() => undefined);
		await admin.end().catch(() => undefined);
	}
	console.log(JSON.stringify({ engines: engineIds, blocks, calls, results }, null, 2));
}

runMain(main);
