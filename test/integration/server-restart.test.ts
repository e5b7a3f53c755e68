/**
 * PostgreSQL restarted under a running store: while it is down every call fails with a clear
 * "unreachable" error (503 class), and once it is back the same store — the same cached pool,
 * no new store, no process restart — works again, including the leases taken before the
 * restart. A private embedded server is used whatever DATABASE_URL says, because restarting
 * a shared server would break the other test files.
 */

import {
	DatabaseUnavailableError,
	DurableJobsError,
	cachedPoolCount,
	closeAllPools,
	getPool,
	openStore,
	type JobStore,
	type LeasedJob,
	type StoreConfig,
} from '../../src/core';
import { startEmbeddedPostgres, type EmbeddedServer } from '../../scripts/lib/postgres';
import { connectionConfig, drainQueue, ok, succeedAll, testSchema } from '../helpers/db';

let server: EmbeddedServer;
let config: StoreConfig;
let store: JobStore;

beforeAll(async () => {
	server = await startEmbeddedPostgres();
	config = {
		...connectionConfig(server.url),
		schema: testSchema(__filename),
		connectionTimeoutMs: 2_000,
	};
	store = await openStore(config);
}, 120_000);

afterAll(async () => {
	await closeAllPools();
	await server?.destroy();
});

async function failure(call: () => Promise<unknown>): Promise<unknown> {
	return await call().then(
		() => undefined,
		(caught: unknown) => caught,
	);
}

describe('PostgreSQL restart under a running store', () => {
	it('calls fail with a clear unreachable error while it is down; the same store and pool recover when it is back', async () => {
		const queue = 'restart';
		const enqueued = (
			await store.enqueue(Array.from({ length: 10 }, (_, n) => ({ queue, payload: { n } })))
		).map(ok);
		const leasedBefore = await store.lease({ queue, limit: 4, leaseMs: 600_000 });
		expect(leasedBefore).toHaveLength(4);
		const pool = getPool(config);
		const pools = cachedPoolCount();

		await server.stop();
		const calls: Array<[string, () => Promise<unknown>]> = [
			['enqueue', () => store.enqueue([{ queue, payload: { n: 99 } }])],
			['lease', () => store.lease({ queue, limit: 1 })],
			[
				'complete',
				() =>
					store.complete([
						{
							jobId: leasedBefore[0].id,
							attemptId: leasedBefore[0].attempt_id,
							outcome: 'succeeded',
						},
					]),
			],
			[
				'extendLease',
				() =>
					store.extendLease([{ jobId: leasedBefore[1].id, attemptId: leasedBefore[1].attempt_id }]),
			],
			['stats', () => store.stats(queue)],
		];
		for (const [name, call] of calls) {
			const error = await failure(call);
			expect(error, name).toBeInstanceOf(DatabaseUnavailableError);
			expect((error as DurableJobsError).message, name).toMatch(/PostgreSQL is unreachable/);
			expect((error as DurableJobsError).httpStatus, name).toBe(503);
		}

		await server.start();
		// Same pool object: nothing was re-created, the dead connections were dropped from it.
		expect(getPool(config)).toBe(pool);
		expect(cachedPoolCount()).toBe(pools);
		const completedBefore = (
			await store.complete(
				leasedBefore.map((job) => ({
					jobId: job.id,
					attemptId: job.attempt_id,
					outcome: 'succeeded' as const,
					result: { n: job.payload },
				})),
			)
		).map(ok);
		expect(completedBefore.every((result) => result.applied)).toBe(true);
		const added = ok((await store.enqueue([{ queue, payload: { n: 10 } }]))[0]);
		await drainQueue(store, queue, 3);
		const [stats] = await store.stats(queue);
		expect(stats).toMatchObject({ queued: 0, running: 0, done: enqueued.length + 1 });
		expect(added.deduplicated).toBe(false);
	});

	it('a crash forgets at most the leases after the last flushed commit: each such job is back as before and its attempt gets Lease Lost; nothing else is lost', async () => {
		const queue = 'crash';
		await store.enqueue(Array.from({ length: 30 }, (_, n) => ({ queue, payload: { n } })));
		// Ten jobs done before the crash: their completions waited for their flush.
		const first = await store.lease({ queue, limit: 10 });
		expect((await succeedAll(store, first)).every((result) => result.applied)).toBe(true);
		// Ten leases after the last synchronous commit, one statement each, then the crash.
		const leased: LeasedJob[] = [];
		for (let i = 0; i < 10; i++) leased.push(...(await store.lease({ queue, limit: 1 })));
		expect(leased).toHaveLength(10);
		await server.crash();
		await server.start();

		const { rows } = await getPool(config).query<{
			id: string;
			status: string;
			attempt_id: string | null;
		}>(`SELECT id, status, attempt_id FROM "${config.schema}".jobs WHERE queue = $1`, [queue]);
		expect(rows).toHaveLength(30);
		const byId = new Map(rows.map((row) => [row.id, row]));
		for (const job of first) expect(byId.get(job.id)?.status).toBe('done');
		const kept = leased.filter((job) => byId.get(job.id)?.attempt_id === job.attempt_id);
		const forgotten = leased.filter((job) => byId.get(job.id)?.attempt_id !== job.attempt_id);
		for (const job of kept) expect(byId.get(job.id)?.status).toBe('running');
		for (const job of forgotten)
			expect(byId.get(job.id)).toMatchObject({ status: 'queued', attempt_id: null });
		process.stdout.write(
			`[crash] ${kept.length} of 10 leases after the last flush survived the crash, ${forgotten.length} were forgotten\n`,
		);

		// Every attempt's completion is applied if its lease survived and Lease Lost if not.
		const results = await succeedAll(store, leased);
		results.forEach((result, index) => expect(result.applied).toBe(kept.includes(leased[index])));
		// And the rest of the queue, the forgotten jobs included, runs to the end.
		await drainQueue(store, queue, 5);
		const [stats] = await store.stats(queue);
		expect(stats).toMatchObject({ queued: 0, running: 0, done: 30 });

		// With Durable Leases every lease waits for its flush, and a crash keeps them all.
		const durable = await openStore({ ...config, durableLeases: true });
		await durable.enqueue(
			Array.from({ length: 5 }, (_, n) => ({ queue: 'durable', payload: { n } })),
		);
		const durableLeases: LeasedJob[] = [];
		for (let i = 0; i < 5; i++) durableLeases.push(...(await durable.lease({ queue: 'durable' })));
		await server.crash();
		await server.start();
		const after = await getPool(config).query<{ attempt_id: string }>(
			`SELECT attempt_id FROM "${config.schema}".jobs WHERE queue = 'durable' AND status = 'running'`,
		);
		expect(after.rows.map((row) => row.attempt_id).sort()).toEqual(
			durableLeases.map((job) => job.attempt_id).sort(),
		);
	});
});
