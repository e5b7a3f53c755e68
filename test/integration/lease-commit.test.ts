import { randomUUID } from 'node:crypto';

import type pg from 'pg';

import { JobStore } from '../../src/core';
import { leaseQuery } from '../../src/core/sql/lease';
import { newPool, ok, useTestSchema } from '../helpers/db';

const { schema, pool, store } = useTestSchema(__filename, { poolSize: 4, migrate: true });

function slot(ord = 0) {
	return { ord, attempt_id: randomUUID(), lease_ms: 60_000, workflow_id: null, execution_id: null };
}

/** Runs one lease statement in an explicit transaction and reads the setting before its commit. */
async function commitSettingOfLease(waitForFlush: boolean, queue: string): Promise<string> {
	const client = await pool.connect();
	try {
		await client.query('BEGIN');
		const leased = await client.query(
			leaseQuery(schema, `"${schema}"`, queue, [slot()], {
				waitForFlush,
				callbackQueue: 'callbacks',
			}),
		);
		expect(leased.rows).toHaveLength(1);
		const { rows } = await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit');
		await client.query('COMMIT');
		const after = await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit');
		// The setting is the transaction's own: the pooled connection goes back unchanged.
		expect(after.rows[0].synchronous_commit).toBe('on');
		return rows[0].synchronous_commit;
	} finally {
		client.release();
	}
}

/** The texts of the statements a store sends over `db`. */
function recordTexts(db: pg.Pool): string[] {
	const texts: string[] = [];
	const query = db.query.bind(db) as (...args: unknown[]) => unknown;
	(db as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
		const [config] = args;
		texts.push(typeof config === 'string' ? config : String((config as { text: string }).text));
		return query(...args);
	};
	return texts;
}

describe('lease commit', () => {
	it('a lease commits without waiting for the WAL flush unless durable leases are asked for', async () => {
		await store.enqueue([
			{ queue: 'commit', payload: {} },
			{ queue: 'commit', payload: {} },
		]);
		expect(await commitSettingOfLease(false, 'commit')).toBe('off');
		expect(await commitSettingOfLease(true, 'commit')).toBe('on');
	});

	it('the store sends the setting by default, not with durableLeases, and never leaves it on the connection', async () => {
		const single = newPool(1);
		try {
			const texts = recordTexts(single);
			const fast = new JobStore(single, { schema });
			const durable = new JobStore(single, { schema, durableLeases: true });
			ok((await fast.enqueue([{ queue: 'wiring', payload: {} }]))[0]);
			ok((await fast.enqueue([{ queue: 'wiring', payload: {} }]))[0]);

			texts.length = 0;
			const [first] = await fast.lease({ queue: 'wiring' });
			expect(texts.filter((text) => text.includes("set_config('synchronous_commit'"))).toHaveLength(
				1,
			);
			const setting = await single.query<{ synchronous_commit: string }>('SHOW synchronous_commit');
			expect(setting.rows[0].synchronous_commit).toBe('on');

			texts.length = 0;
			const [second] = await durable.lease({ queue: 'wiring' });
			expect(texts.some((text) => text.includes("set_config('synchronous_commit'"))).toBe(false);

			// Both leases are real and complete as usual.
			for (const job of [first, second])
				expect(
					ok(
						(
							await fast.complete([
								{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' },
							])
						)[0],
					).applied,
				).toBe(true);
		} finally {
			await single.end();
		}
	});
});
