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
	type StoreConfig,
} from '../../src/core';
import { startEmbeddedPostgres, type EmbeddedServer } from '../../scripts/lib/postgres';
import { connectionConfig, ok, testSchema } from '../helpers/db';

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
		for (;;) {
			const leased = await store.lease({ queue, limit: 3 });
			if (leased.length === 0) break;
			const results = (
				await store.complete(
					leased.map((job) => ({
						jobId: job.id,
						attemptId: job.attempt_id,
						outcome: 'succeeded' as const,
					})),
				)
			).map(ok);
			expect(results.every((result) => result.applied)).toBe(true);
		}
		const [stats] = await store.stats(queue);
		expect(stats).toMatchObject({ queued: 0, running: 0, done: enqueued.length + 1 });
		expect(added.deduplicated).toBe(false);
	});
});
