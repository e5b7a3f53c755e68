import { DurableJobsError } from '../../src/core';
import { newPool, ok, useTestSchema, waitFor } from '../helpers/db';

/**
 * A connection lost while a client is checked out for a transaction (the outbox with its
 * companion SQL, an all-or-nothing enqueue, a lease with a concurrency limit, migrations): the
 * call fails with a classified error, nothing of the transaction is written, the process keeps
 * running (node-postgres emits the loss as an 'error' event on the client, which pg-pool stops
 * listening to while the client is checked out) and the pool serves the next call.
 */
const { schema, pool, store } = useTestSchema(__filename, { poolSize: 4, migrate: true });

const LOCK_KEY = 8_675_309;

/** Holds an advisory lock on a connection of its own until `release`. */
async function holdAdvisoryLock(): Promise<{ release: () => Promise<void> }> {
	const holder = newPool(1);
	const client = await holder.connect();
	await client.query('SELECT pg_advisory_lock($1)', [LOCK_KEY]);
	return {
		release: async () => {
			await client.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]);
			client.release();
			await holder.end();
		},
	};
}

async function backendWaitingForTheLock(): Promise<number> {
	return await waitFor(async () => {
		const { rows } = await pool.query<{ pid: number }>(
			`SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'
				AND query LIKE '%pg_advisory_xact_lock%'`,
		);
		return rows[0]?.pid;
	}, 'the transaction to wait for the advisory lock');
}

describe('transactions', () => {
	it('a backend terminated inside a transaction: the call fails with a classified error, nothing is written, and the pool serves the next call', async () => {
		await pool.query(`CREATE TABLE "${schema}".orders (id int PRIMARY KEY)`);
		const uncaught: unknown[] = [];
		const onUncaught = (error: unknown) => uncaught.push(error);
		process.on('uncaughtException', onUncaught);
		const lock = await holdAdvisoryLock();
		try {
			const call = store
				.writeOutbox(
					[
						{
							eventId: 'order-1',
							eventType: 'order.created',
							payload: { order: 1 },
							companionSql: `INSERT INTO "${schema}".orders (id) SELECT 1 FROM pg_advisory_xact_lock($1::bigint)`,
							companionParams: [LOCK_KEY],
						},
					],
					{ allOrNothing: true },
				)
				.then(
					() => undefined,
					(error: unknown) => error,
				);
			const pid = await backendWaitingForTheLock();
			await pool.query('SELECT pg_terminate_backend($1)', [pid]);
			const error = await call;
			// The loss is also emitted as an event after the query fails; give it a turn.
			await new Promise((resolve) => setTimeout(resolve, 50));

			expect(error).toBeInstanceOf(DurableJobsError);
			expect(uncaught).toEqual([]);
		} finally {
			process.removeListener('uncaughtException', onUncaught);
			await lock.release();
		}

		const { rows: orders } = await pool.query(`SELECT id FROM "${schema}".orders`);
		expect(orders).toEqual([]);
		const { rows: events } = await pool.query(`SELECT id FROM "${schema}".jobs`);
		expect(events).toEqual([]);

		// Every connection of the store's pool works: as many outbox writes at once as it has.
		const results = await Promise.all(
			[2, 3, 4, 5].map(
				async (order) =>
					await store.writeOutbox([
						{
							eventId: `order-${order}`,
							eventType: 'order.created',
							payload: { order },
							companionSql: `INSERT INTO "${schema}".orders (id) VALUES ($1)`,
							companionParams: [order],
						},
					]),
			),
		);
		for (const result of results) ok(result[0]);
		const { rows: written } = await pool.query<{ id: number }>(
			`SELECT id FROM "${schema}".orders ORDER BY id`,
		);
		expect(written.map((row) => row.id)).toEqual([2, 3, 4, 5]);
	});
});
