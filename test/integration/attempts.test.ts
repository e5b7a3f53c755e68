import type pg from 'pg';

import { JobStore, migrate } from '../../src/core';
import { newPool, ok, schemaAtMigration, sleep, testSchema, useTestSchema } from '../helpers/db';

const upgradeSchema = testSchema(__filename, 'upgrade');
const upgradeReader = `${upgradeSchema}_reader`;
// One connection, so every statement runs on the backend whose prepared plans are checked.
const { schema, pool, store } = useTestSchema(__filename, {
	poolSize: 1,
	migrate: true,
	otherSchemas: [upgradeSchema],
	cleanUp: async (db) => {
		await db.query(`DROP OWNED BY "${upgradeReader}"`).catch(() => undefined);
		await db.query(`DROP ROLE IF EXISTS "${upgradeReader}"`);
	},
});

async function recordsOf(jobId: string, db: pg.Pool = pool, inSchema = schema) {
	const { rows } = await db.query(
		`SELECT attempt, outcome, workflow_id, execution_id, started_at, lease_until, finished_at, checkpoint
		FROM "${inSchema}".job_attempt_records WHERE job_id = $1 ORDER BY attempt`,
		[jobId],
	);
	return rows;
}

async function attemptsOf(jobId: string, db: pg.Pool = pool, inSchema = schema) {
	const { rows } = await db.query(
		`SELECT attempt_id, attempt, outcome, workflow_id, execution_id, started_at, lease_until, finished_at, checkpoint
		FROM "${inSchema}".job_attempts WHERE job_id = $1 ORDER BY attempt`,
		[jobId],
	);
	return rows;
}

async function attemptRows(jobIds: string[]): Promise<number> {
	const { rows } = await pool.query<{ n: number }>(
		`SELECT count(*)::int AS n FROM "${schema}".job_attempts WHERE job_id = ANY($1::uuid[])`,
		[jobIds],
	);
	return rows[0].n;
}

/** Sequential scans of job_attempt_records so far, with this backend's pending counters flushed first. */
async function attemptSeqScans(db: pg.Pool): Promise<number> {
	await db.query('SELECT pg_stat_force_next_flush()');
	// The flush happens when the backend goes idle after that statement; this one reads it.
	await db.query('SELECT pg_stat_clear_snapshot()');
	const { rows } = await db.query<{ seq_scan: string }>(
		`SELECT seq_scan FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'job_attempt_records'`,
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
	it('are written when the attempt ends; job_attempts shows the running attempt from its job row', async () => {
		const jobId = ok(
			(await store.enqueue([{ queue: 'timeline', payload: {}, maxAttempts: 3 }]))[0],
		).jobId;
		const [first] = await store.lease({
			queue: 'timeline',
			leaseMs: 60_000,
			workflowId: 'wf-1',
			executionId: 'ex-1',
		});
		expect(await recordsOf(jobId)).toEqual([]);
		const [running] = await attemptsOf(jobId);
		expect(running).toMatchObject({
			attempt_id: first.attempt_id,
			attempt: 1,
			outcome: null,
			workflow_id: 'wf-1',
			execution_id: 'ex-1',
			finished_at: null,
			checkpoint: null,
		});
		expect(running.lease_until.getTime() - running.started_at.getTime()).toBe(60_000);

		ok(
			(
				await store.complete([{ jobId, attemptId: first.attempt_id, outcome: 'retry', delayMs: 0 }])
			)[0],
		);
		expect(await recordsOf(jobId)).toEqual([
			expect.objectContaining({
				attempt: 1,
				outcome: 'retry',
				workflow_id: 'wf-1',
				execution_id: 'ex-1',
			}),
		]);
		const [ended] = await attemptsOf(jobId);
		expect(ended).toMatchObject({ attempt: 1, outcome: 'retry' });
		expect(ended.started_at).toEqual(running.started_at);
		expect(ended.lease_until).toEqual(running.lease_until);

		// A lease without n8n ids (a Job Trigger's): the heartbeats' ids and checkpoint go to the
		// job row; the completion writes the record with them.
		const [second] = await store.lease({ queue: 'timeline' });
		ok(
			(
				await store.extendLease([
					{ jobId, attemptId: second.attempt_id, workflowId: 'wf-2', executionId: 'ex-2' },
				])
			)[0],
		);
		expect(await recordsOf(jobId)).toHaveLength(1);
		expect((await attemptsOf(jobId))[1]).toMatchObject({
			workflow_id: 'wf-2',
			execution_id: 'ex-2',
		});
		ok(
			(
				await store.extendLease([
					{ jobId, attemptId: second.attempt_id, checkpoint: 'crm_request' },
				])
			)[0],
		);
		expect(await recordsOf(jobId)).toHaveLength(1);
		const beforeEnd = await attemptsOf(jobId);
		expect(beforeEnd).toHaveLength(2);
		expect(beforeEnd[1]).toMatchObject({
			outcome: null,
			checkpoint: 'crm_request',
			execution_id: 'ex-2',
		});

		ok((await store.complete([{ jobId, attemptId: second.attempt_id, outcome: 'succeeded' }]))[0]);
		const finished = await attemptsOf(jobId);
		expect(finished.map((row) => [row.attempt, row.outcome, row.checkpoint])).toEqual([
			[1, 'retry', null],
			[2, 'succeeded', 'crm_request'],
		]);
		expect(finished[1].started_at).toEqual(beforeEnd[1].started_at);
		expect(finished[1].lease_until).toEqual(beforeEnd[1].lease_until);
		expect(finished[1]).toMatchObject({
			attempt_id: second.attempt_id,
			attempt: 2,
			outcome: 'succeeded',
			checkpoint: 'crm_request',
			workflow_id: 'wf-2',
			execution_id: 'ex-2',
			finished_at: expect.any(Date),
		});
		// A success writes no record (migration 0012): the done job's row keeps its last attempt.
		expect(await recordsOf(jobId)).toEqual([
			expect.objectContaining({ attempt: 1, outcome: 'retry' }),
		]);
		const { rows: jobRow } = await pool.query(
			`SELECT finished_at FROM "${schema}".jobs WHERE id = $1`,
			[jobId],
		);
		expect(finished[1].finished_at).toEqual(jobRow[0].finished_at);
	});

	it('of a success: the completing execution fills the ids the lease did not know; a record an older version wrote is listed once', async () => {
		const [a, b] = (
			await store.enqueue([
				{ queue: 'success', payload: {} },
				{ queue: 'success', payload: {} },
			])
		).map((result) => ok(result).jobId);
		// A Job Trigger's lease knows no n8n ids; Job Complete sends its workflow and execution.
		const leased = await store.lease({ queue: 'success', limit: 2 });
		const byId = new Map(leased.map((job) => [job.id, job]));
		const results = await store.complete([
			{
				jobId: a,
				attemptId: byId.get(a)!.attempt_id,
				outcome: 'succeeded',
				errorWorkflow: 'wf-caller',
				errorExecution: '901',
			},
			{ jobId: b, attemptId: byId.get(b)!.attempt_id, outcome: 'succeeded' },
		]);
		results.map(ok);
		expect(await attemptsOf(a)).toEqual([
			expect.objectContaining({
				attempt_id: byId.get(a)!.attempt_id,
				attempt: 1,
				outcome: 'succeeded',
				workflow_id: 'wf-caller',
				execution_id: '901',
			}),
		]);
		expect(await attemptsOf(b)).toEqual([
			expect.objectContaining({ attempt: 1, outcome: 'succeeded', workflow_id: null }),
		]);
		expect(await recordsOf(a)).toEqual([]);

		// What a completion by an instance still on the previous version adds: the record of the
		// same attempt. The attempt is listed once, as that record tells it.
		await pool.query(
			`INSERT INTO "${schema}".job_attempt_records (attempt_id, job_id, attempt, workflow_id, execution_id,
				started_at, finished_at, outcome)
			SELECT attempt_id, id, attempts, 'wf-old-instance', '902', attempt_started_at, finished_at, 'succeeded'
			FROM "${schema}".jobs WHERE id = $1`,
			[b],
		);
		expect(await attemptsOf(b)).toEqual([
			expect.objectContaining({
				attempt_id: byId.get(b)!.attempt_id,
				outcome: 'succeeded',
				workflow_id: 'wf-old-instance',
				execution_id: '902',
			}),
		]);
	});

	it('of failures still get their records; a requeued failed job keeps its history', async () => {
		const jobId = ok(
			(await store.enqueue([{ queue: 'failing', payload: {}, maxAttempts: 1 }]))[0],
		).jobId;
		const [first] = await store.lease({ queue: 'failing', executionId: 'ex-f1' });
		ok(
			(
				await store.complete([
					{ jobId, attemptId: first.attempt_id, outcome: 'failed', errorCode: 'crm_down' },
				])
			)[0],
		);
		expect(await recordsOf(jobId)).toEqual([
			expect.objectContaining({ attempt: 1, outcome: 'failed', execution_id: 'ex-f1' }),
		]);
		await store.requeue({ jobIds: [jobId] });
		const [second] = await store.lease({ queue: 'failing', executionId: 'ex-f2' });
		ok((await store.complete([{ jobId, attemptId: second.attempt_id, outcome: 'succeeded' }]))[0]);
		expect(
			(await attemptsOf(jobId)).map((row) => [row.attempt, row.outcome, row.execution_id]),
		).toEqual([
			[1, 'failed', 'ex-f1'],
			[2, 'succeeded', 'ex-f2'],
		]);
	});

	it('of an expired lease are written by the lease that takes the job over, with the old attempt as it was', async () => {
		const jobId = ok(
			(await store.enqueue([{ queue: 'expiry', payload: {}, maxAttempts: 2 }]))[0],
		).jobId;
		const [first] = await store.lease({ queue: 'expiry', leaseMs: 1_000, workflowId: 'wf-dead' });
		await pool.query(
			`UPDATE "${schema}".jobs SET lease_until = lease_until - interval '1 hour',
				attempt_lease_until = attempt_lease_until - interval '1 hour',
				attempt_started_at = attempt_started_at - interval '1 hour' WHERE id = $1`,
			[jobId],
		);
		const [second] = await store.lease({ queue: 'expiry', workflowId: 'wf-next' });
		expect(second.recovered).toBe(true);
		const afterTakeOver = await attemptsOf(jobId);
		expect(afterTakeOver).toEqual([
			expect.objectContaining({
				attempt_id: first.attempt_id,
				outcome: 'lease_expired',
				workflow_id: 'wf-dead',
			}),
			expect.objectContaining({
				attempt_id: second.attempt_id,
				outcome: null,
				workflow_id: 'wf-next',
			}),
		]);
		expect(afterTakeOver[0].lease_until.getTime() - afterTakeOver[0].started_at.getTime()).toBe(
			1_000,
		);

		// The last allowed attempt expires too: the lease fails the job and ends that attempt.
		await pool.query(
			`UPDATE "${schema}".jobs SET lease_until = lease_until - interval '1 hour',
				attempt_lease_until = attempt_lease_until - interval '1 hour',
				attempt_started_at = attempt_started_at - interval '1 hour' WHERE id = $1`,
			[jobId],
		);
		expect(await store.lease({ queue: 'expiry' })).toEqual([]);
		expect(
			(await attemptsOf(jobId)).map((row) => [row.attempt, row.outcome, row.workflow_id]),
		).toEqual([
			[1, 'lease_expired', 'wf-dead'],
			[2, 'lease_expired', 'wf-next'],
		]);
		const cancelledId = ok((await store.enqueue([{ queue: 'expiry', payload: {} }]))[0]).jobId;
		await store.lease({ queue: 'expiry', executionId: 'ex-cancelled' });
		await store.cancel([cancelledId]);
		expect(await recordsOf(cancelledId)).toEqual([
			expect.objectContaining({ attempt: 1, outcome: 'cancelled', execution_id: 'ex-cancelled' }),
		]);
	});

	it('of a job a lease takes while a cancel waits for it: the cancel ends the new attempt', async () => {
		const jobId = ok((await store.enqueue([{ queue: 'race', payload: {} }]))[0]).jobId;
		const other = newPool(2);
		const leasing = await other.connect();
		try {
			// A lease that has updated the job and not committed yet, as the lease statement does.
			await leasing.query('BEGIN');
			await leasing.query(
				`UPDATE "${schema}".jobs SET status = 'running', attempts = 1, attempt_id = $2,
					lease_until = now() + interval '1 minute', attempt_started_at = now(),
					attempt_lease_until = now() + interval '1 minute', attempt_execution_id = 'ex-race'
				WHERE id = $1`,
				[jobId, '00000000-0000-7000-8000-0000000000c1'],
			);
			const cancelling = store.cancel([jobId]);
			// The cancel is blocked on the job's lock until the lease commits.
			const cancelsWaiting = async () =>
				(
					await other.query<{ n: number }>(
						`SELECT count(*)::int AS n FROM pg_stat_activity
						WHERE wait_event_type = 'Lock' AND query LIKE '%WITH target AS MATERIALIZED%'`,
					)
				).rows[0].n;
			for (let i = 0; i < 100 && (await cancelsWaiting()) === 0; i++) await sleep(20);
			expect(await cancelsWaiting()).toBe(1);
			await leasing.query('COMMIT');
			expect(await cancelling).toEqual([{ id: jobId, cancelled: true, status: 'cancelled' }]);
		} finally {
			leasing.release();
			await other.end();
		}
		expect(await attemptsOf(jobId)).toEqual([
			expect.objectContaining({
				attempt_id: '00000000-0000-7000-8000-0000000000c1',
				outcome: 'cancelled',
				execution_id: 'ex-race',
			}),
		]);
	});

	it('of attempts an older version started are ended by the new statements after the upgrade', async () => {
		const s = `"${upgradeSchema}"`;
		await schemaAtMigration(pool, upgradeSchema, 8);
		await pool.query(`CREATE ROLE "${upgradeReader}"`);
		await pool.query(`GRANT USAGE ON SCHEMA ${s} TO "${upgradeReader}"`);
		await pool.query(`GRANT SELECT, INSERT, UPDATE ON ${s}.job_attempts TO "${upgradeReader}"`);
		// What version 0008 left: a running job whose lease inserted its attempt row (with a
		// checkpoint since), and a finished one.
		const running = '00000000-0000-7000-8000-000000000001';
		const finished = '00000000-0000-7000-8000-000000000002';
		await pool.query(
			`INSERT INTO ${s}.jobs (id, queue, status, payload, attempts, attempt_id, lease_until, started_at)
			VALUES ($1, 'old', 'running', '{}', 1, $3, now() + interval '1 hour', now() - interval '5 minutes'),
				($2, 'old', 'done', '{}', 1, $4, NULL, now() - interval '9 minutes')`,
			[
				running,
				finished,
				'00000000-0000-7000-8000-0000000000a1',
				'00000000-0000-7000-8000-0000000000a2',
			],
		);
		await pool.query(
			`INSERT INTO ${s}.job_attempts (attempt_id, job_id, attempt, workflow_id, started_at, lease_until, checkpoint, checkpoint_at, outcome, finished_at)
			VALUES ($1, $3, 1, 'wf-old', now() - interval '5 minutes', (SELECT lease_until FROM ${s}.jobs WHERE id = $3), 'crm_request', now(), NULL, NULL),
				($2, $4, 1, 'wf-old', now() - interval '9 minutes', now() - interval '8 minutes', NULL, NULL, 'succeeded', now() - interval '8 minutes'),
				($5, $4, 2, 'wf-orphan', now() - interval '7 minutes', now() - interval '6 minutes', NULL, NULL, NULL, NULL)`,
			[
				'00000000-0000-7000-8000-0000000000a1',
				'00000000-0000-7000-8000-0000000000a2',
				running,
				finished,
				// Inconsistent older data: an open record whose job is not running on it.
				'00000000-0000-7000-8000-0000000000a3',
			],
		);
		const before = await attemptsOf(running, pool, upgradeSchema);

		expect((await migrate(pool, upgradeSchema)).applied).toEqual([
			'0009_attempt_rows_at_end.sql',
			'0010_finished_event_function.sql',
			'0011_statements_count_their_own_rows.sql',
			'0012_succeeded_attempt_on_job_row.sql',
			'0013_single_enqueue_counts_itself.sql',
			'0014_unknown_outcomes_index.sql',
			'0015_column_domains.sql',
			'0016_ordering_key_runs_alone.sql',
			'0017_running_by_lease_end.sql',
			'0018_running_by_attempt_lease_end.sql',
		]);
		const upgraded = new JobStore(pool, { schema: upgradeSchema });
		expect(await attemptsOf(running, pool, upgradeSchema)).toEqual(before);
		expect(await recordsOf(running, pool, upgradeSchema)).toEqual([]);
		expect(await attemptsOf(finished, pool, upgradeSchema)).toEqual([
			expect.objectContaining({ attempt: 1, outcome: 'succeeded', workflow_id: 'wf-old' }),
			expect.objectContaining({
				attempt: 2,
				outcome: 'lease_expired',
				workflow_id: 'wf-orphan',
				finished_at: expect.any(Date),
			}),
		]);
		ok(
			(
				await upgraded.complete([
					{
						jobId: running,
						attemptId: '00000000-0000-7000-8000-0000000000a1',
						outcome: 'succeeded',
					},
				])
			)[0],
		);
		const after = await attemptsOf(running, pool, upgradeSchema);
		expect(after).toEqual([{ ...before[0], outcome: 'succeeded', finished_at: expect.any(Date) }]);
		expect(before[0]).toMatchObject({
			checkpoint: 'crm_request',
			workflow_id: 'wf-old',
			outcome: null,
		});
		const { rows: privileges } = await pool.query(
			`SELECT has_table_privilege($1, '${s}.job_attempts', 'SELECT') AS view_select,
				has_table_privilege($1, '${s}.job_attempt_records', 'INSERT') AS records_insert`,
			[upgradeReader],
		);
		expect(privileges[0]).toEqual({ view_select: true, records_insert: true });
		const { rows: owners } = await pool.query(
			`SELECT (SELECT relowner FROM pg_class WHERE oid = '${s}.job_attempts'::regclass) =
				(SELECT relowner FROM pg_class WHERE oid = '${s}.job_attempt_records'::regclass) AS same`,
		);
		expect(owners[0].same).toBe(true);
	});

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
			`ALTER TABLE "${schema}".job_attempt_records SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)`,
		);
		await pool.query(`TRUNCATE "${schema}".job_attempt_records`);
		await pool.query(`VACUUM ANALYZE "${schema}".job_attempt_records`);
		// More runs than PostgreSQL needs before it keeps a generic plan for a prepared statement.
		for (let i = 0; i < 8; i++) await cycle('plans');

		await pool.query(
			`INSERT INTO "${schema}".job_attempt_records (attempt_id, job_id, attempt, outcome)
			SELECT gen_random_uuid(), gen_random_uuid(), 1, 'succeeded' FROM generate_series(1, 20000)`,
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
