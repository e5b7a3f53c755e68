import type pg from 'pg';

import { ok, useTestSchema } from '../helpers/db';

// One connection, so every statement runs on the backend whose prepared plans are checked.
const { schema, pool, store } = useTestSchema(__filename, { poolSize: 1, migrate: true });

async function attemptRows(jobIds: string[]): Promise<number> {
	const { rows } = await pool.query<{ n: number }>(
		`SELECT count(*)::int AS n FROM "${schema}".job_attempts WHERE job_id = ANY($1::uuid[])`,
		[jobIds],
	);
	return rows[0].n;
}

/** Sequential scans of job_attempts so far, with this backend's pending counters flushed first. */
async function attemptSeqScans(db: pg.Pool): Promise<number> {
	await db.query('SELECT pg_stat_force_next_flush()');
	// The flush happens when the backend goes idle after that statement; this one reads it.
	await db.query('SELECT pg_stat_clear_snapshot()');
	const { rows } = await db.query<{ seq_scan: string }>(
		`SELECT seq_scan FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'job_attempts'`,
		[schema],
	);
	return Number(rows[0].seq_scan);
}

/** Leases one job and ends its attempt through each statement that writes attempt rows. */
async function cycle(queue: string): Promise<void> {
	const [enqueued] = await store.enqueue([
		{ queue, payload: {} },
		{ queue, payload: {} },
	]);
	const [job] = await store.lease({ queue, limit: 1 });
	ok(
		(
			await store.extendLease([
				{ jobId: job.id, attemptId: job.attempt_id, checkpoint: 'crm_request', executionId: '7' },
			])
		)[0],
	);
	ok((await store.complete([{ jobId: job.id, attemptId: job.attempt_id, outcome: 'retry' }]))[0]);
	const [next] = await store.lease({ queue, limit: 1 });
	await store.cancel([next.id, ok(enqueued).jobId]);
}

describe('attempt rows', () => {
	it('are deleted with their jobs, by the purge and by a plain DELETE, and only theirs', async () => {
		const ids: string[] = [];
		for (let i = 0; i < 3; i++) {
			const jobId = ok((await store.enqueue([{ queue: 'gone', payload: { i } }]))[0]).jobId;
			const [job] = await store.lease({ queue: 'gone' });
			ok((await store.complete([{ jobId, attemptId: job.attempt_id, outcome: 'succeeded' }]))[0]);
			ids.push(jobId);
		}
		const kept = ok((await store.enqueue([{ queue: 'kept', payload: {} }]))[0]).jobId;
		await store.lease({ queue: 'kept' });
		expect(await attemptRows([...ids, kept])).toBe(4);

		const purged = await store.purge({ queue: 'gone', olderThanMs: 0, limit: 2 });
		expect(purged.deleted).toBe(2);
		expect(await attemptRows(ids)).toBe(1);

		await pool.query(`DELETE FROM "${schema}".jobs WHERE queue = 'gone'`);
		expect(await attemptRows(ids)).toBe(0);
		expect(await attemptRows([kept])).toBe(1);
	});

	it('are found through their primary key after the table has grown under kept plans', async () => {
		await pool.query(
			`ALTER TABLE "${schema}".job_attempts SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)`,
		);
		await pool.query(`TRUNCATE "${schema}".job_attempts`);
		await pool.query(`VACUUM ANALYZE "${schema}".job_attempts`);
		// More runs than PostgreSQL needs before it keeps a generic plan for a prepared statement.
		for (let i = 0; i < 8; i++) await cycle('plans');

		await pool.query(
			`INSERT INTO "${schema}".job_attempts (attempt_id, job_id, attempt)
			SELECT gen_random_uuid(), gen_random_uuid(), 1 FROM generate_series(1, 20000)`,
		);
		const before = await attemptSeqScans(pool);
		for (let i = 0; i < 4; i++) await cycle('plans');
		expect(await attemptSeqScans(pool)).toBe(before);

		const { rows } = await pool.query<{ outcome: string; checkpoint: string | null }>(
			`SELECT a.outcome, a.checkpoint FROM "${schema}".job_attempts a
			JOIN "${schema}".jobs j ON j.id = a.job_id WHERE j.queue = 'plans' ORDER BY a.started_at, a.attempt`,
		);
		// Per cycle: the retried attempt (with its checkpoint), then the cancelled one.
		expect(rows).toHaveLength(24);
		for (let i = 0; i < rows.length; i += 2) {
			expect(rows[i]).toEqual({ outcome: 'retry', checkpoint: 'crm_request' });
			expect(rows[i + 1]).toEqual({ outcome: 'cancelled', checkpoint: null });
		}
	});
});
