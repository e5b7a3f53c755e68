/**
 * A lease while many jobs run: the core of a git ref (default HEAD) against the working tree's,
 * each in a schema of its own on one PostgreSQL (DATABASE_URL, else an embedded one). Both are
 * filled alike: `--running` jobs are leased in queue "busy" (an hour's lease) and `--jobs` jobs
 * queued in "work"; then one worker leases and completes one job of "work" at a time,
 * alternating between the two versions call by call. Prints, as JSON on stdout, each side's
 * wall time per lease.
 *
 * Every job has an ordering key of its own unless `--keys off`. With `--queue same`, "work" is
 * "busy" itself: the jobs are queued behind the running ones in the queue they run in.
 *
 *   npx tsx bench/lease-beside-running.ts [--ref HEAD] [--running 2000] [--jobs 1000]
 *     [--keys on|off] [--queue other|same]
 */
import { join } from 'node:path';
import pg from 'pg';

import { startPostgres } from '../scripts/lib/postgres';
import { exportRef } from './lib/ref';
import {
	dropSchema,
	log,
	now,
	readFlags,
	round,
	runMain,
	summarize,
	vacuumAnalyzeSchema,
} from './lib/util';

type Core = typeof import('../src/core');

function jobs(queue: string, start: number, count: number, keys: boolean) {
	return Array.from({ length: count }, (_, n) => ({
		queue,
		payload: { n: start + n },
		...(keys ? { orderingKey: `${queue}-${start + n}` } : {}),
	}));
}

async function main(): Promise<void> {
	const { flags, int, onOff } = readFlags(process.argv.slice(2), [
		'ref',
		'running',
		'jobs',
		'keys',
		'queue',
	]);
	const running = int('running', 2000);
	const jobCount = int('jobs', 1000, 1);
	const keys = onOff('keys', true);
	const queueChoice = flags.get('queue') ?? 'other';
	if (queueChoice !== 'other' && queueChoice !== 'same')
		throw new Error(`--queue must be other or same, not ${queueChoice}`);
	const workQueue = queueChoice === 'same' ? 'busy' : 'work';
	const exported = exportRef(flags.get('ref') ?? 'HEAD');
	log(`before: ${exported.commit}; after: the working tree`);
	const postgres = await startPostgres();
	const pool = new pg.Pool({ connectionString: postgres.url, max: 4 });
	const sides: Array<{ name: string; schema: string; store: InstanceType<Core['JobStore']> }> = [];
	try {
		const cores: Array<[string, Core]> = [
			['before', (await import(join(exported.dir, 'src', 'core'))) as Core],
			['after', (await import('../src/core')) as Core],
		];
		for (const [name, core] of cores) {
			const schema = `bench_beside_running_${name}`;
			await dropSchema(pool, schema);
			await core.migrate(pool, schema);
			const store = new core.JobStore(pool, { schema });
			sides.push({ name, schema, store });
			// `first`: the number of the first job, so keys never repeat within a queue.
			const enqueue = async (queue: string, count: number, first = 0) => {
				for (let start = 0; start < count; start += 1000)
					for (const result of await store.enqueue(
						jobs(queue, first + start, Math.min(1000, count - start), keys),
					))
						if (result instanceof core.DurableJobsError) throw result;
			};
			await enqueue('busy', running);
			let leased = 0;
			while (leased < running)
				leased += (
					await store.lease({
						queue: 'busy',
						limit: Math.min(10_000, running - leased),
						leaseMs: 3_600_000,
						includeMetadata: false,
					})
				).length;
			await enqueue(workQueue, jobCount, running);
			await vacuumAnalyzeSchema(pool, schema);
		}
		log(
			`${running} jobs running in ${queueChoice === 'same' ? 'the same' : 'another'} queue; leasing ${jobCount} per side (ordering keys ${keys ? 'on' : 'off'})`,
		);
		const leaseMs = new Map<string, number[]>(sides.map((side) => [side.name, []]));
		for (let i = 0; i < jobCount; i++) {
			for (const side of i % 2 === 0 ? sides : [...sides].reverse()) {
				const started = now();
				const [job] = await side.store.lease({
					queue: workQueue,
					limit: 1,
					includeMetadata: false,
				});
				leaseMs.get(side.name)!.push(now() - started);
				if (!job) throw new Error(`${side.name}: no job leased at ${i}`);
				await side.store.complete([
					{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' },
				]);
			}
		}
		const summaries = Object.fromEntries(
			sides.map((side) => [side.name, summarize(leaseMs.get(side.name)!)]),
		);
		process.stdout.write(
			`${JSON.stringify(
				{
					before: exported.commit,
					after: 'working tree',
					postgres: (await pool.query<{ version: string }>('SELECT version()')).rows[0].version,
					running,
					jobs: jobCount,
					orderingKeys: keys,
					queue: queueChoice,
					leaseWallMs: summaries,
					afterOverBefore: round(summaries.after.p50 / summaries.before.p50, 3),
				},
				null,
				2,
			)}\n`,
		);
	} finally {
		for (const side of sides) await dropSchema(pool, side.schema);
		await pool.end();
		await postgres.stop();
	}
}

runMain(main);
