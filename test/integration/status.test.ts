import { ValidationError } from '../../src/core';
import { unknownOutcomeQuery } from '../../src/core/sql/status';
import { ok, planNodes, useTestSchema } from '../helpers/db';

const { schema, pool, store } = useTestSchema(__filename, { poolSize: 20, migrate: true });

async function failJob(
	queue: string,
	errorCode = 'bad_input',
	errorClass: 'needs_mapping' | 'retryable' = 'needs_mapping',
): Promise<string> {
	const jobId = ok((await store.enqueue([{ queue, payload: { q: queue } }]))[0]).jobId;
	const [job] = await store.lease({ queue });
	ok(
		(
			await store.complete([
				{ jobId, attemptId: job.attempt_id, outcome: 'failed', errorCode, errorClass },
			])
		)[0],
	);
	return jobId;
}

describe('job status', () => {
	it('get by id + token returns the job and its attempt timeline', async () => {
		const enqueued = ok(
			(await store.enqueue([{ queue: 'st', payload: { a: 1 }, maxAttempts: 3 }]))[0],
		);
		const [first] = await store.lease({ queue: 'st' });
		ok(
			(
				await store.complete([
					{ jobId: first.id, attemptId: first.attempt_id, outcome: 'retry', delayMs: 0 },
				])
			)[0],
		);
		const [second] = await store.lease({ queue: 'st' });
		ok(
			(
				await store.complete([
					{
						jobId: second.id,
						attemptId: second.attempt_id,
						outcome: 'succeeded',
						result: { ok: true },
					},
				])
			)[0],
		);
		const view = await store.getStatus(enqueued.jobId, enqueued.statusToken!);
		expect(view?.job).toMatchObject({
			id: enqueued.jobId,
			status: 'done',
			attempts: 2,
			result: { ok: true },
		});
		expect(view?.attempts.map((attempt) => [attempt.attempt, attempt.outcome])).toEqual([
			[1, 'retry'],
			[2, 'succeeded'],
		]);
		expect(view?.job).not.toHaveProperty('status_token_hash');
	});

	it('a wrong, empty or missing token answers exactly like an unknown or malformed job id', async () => {
		const enqueued = ok((await store.enqueue([{ queue: 'st2', payload: {} }]))[0]);
		expect(await store.getStatus(enqueued.jobId, 'wrong')).toBeNull();
		expect(await store.getStatus(enqueued.jobId, '')).toBeNull();
		expect(await store.getStatus(enqueued.jobId, undefined as never)).toBeNull();
		expect(
			await store.getStatus('0190d1a2-0000-7000-8000-000000000000', enqueued.statusToken!),
		).toBeNull();
		expect(await store.getStatus("' OR 1=1 --", enqueued.statusToken!)).toBeNull();
		// The token of one job does not open another.
		const other = ok((await store.enqueue([{ queue: 'st2', payload: {} }]))[0]);
		expect(await store.getStatus(other.jobId, enqueued.statusToken!)).toBeNull();
		expect(await store.getStatus(other.jobId, other.statusToken!)).not.toBeNull();
	});

	it('queue stats count by status, oldest ready age, expired leases, retries and dead letters', async () => {
		await store.enqueue(Array.from({ length: 5 }, () => ({ queue: 'stats', payload: {} })));
		await pool.query(
			`UPDATE ${schema}.jobs SET run_at = now() - interval '90 seconds' WHERE queue = 'stats'`,
		);
		const leased = await store.lease({ queue: 'stats', limit: 3 });
		ok(
			(
				await store.complete([
					{ jobId: leased[0].id, attemptId: leased[0].attempt_id, outcome: 'succeeded' },
				])
			)[0],
		);
		ok(
			(
				await store.complete([
					{ jobId: leased[1].id, attemptId: leased[1].attempt_id, outcome: 'failed' },
				])
			)[0],
		);
		await pool.query(
			`UPDATE ${schema}.jobs SET lease_until = now() - interval '1 second', attempt_lease_until = now() - interval '1 second' WHERE id = $1`,
			[leased[2].id],
		);
		const [stats] = await store.stats('stats');
		expect(stats).toMatchObject({
			queue: 'stats',
			queued: 2,
			ready: 2,
			running: 1,
			running_expired: 1,
			done: 1,
			failed: 1,
			dead_letter: 1,
			cancelled: 0,
			retrying: 0,
		});
		expect(stats.oldest_ready_age_seconds).toBeGreaterThanOrEqual(89);
		const all = await store.stats();
		expect(all.map((entry) => entry.queue)).toContain('stats');
		expect(await store.stats('empty-queue')).toEqual([
			expect.objectContaining({ queue: 'empty-queue', queued: 0, done: 0 }),
		]);
	});

	it('requeue replays failed jobs by id, keeps their payload, and gives them new attempts', async () => {
		const jobId = await failJob('rq');
		const [requeued] = await store.requeue({ jobIds: [jobId], additionalAttempts: 2 });
		expect(requeued).toMatchObject({ id: jobId, status: 'queued', attempts: 1, max_attempts: 3 });
		const [job] = await store.lease({ queue: 'rq' });
		expect(job).toMatchObject({ id: jobId, attempts: 2, payload: { q: 'rq' } });
	});

	it('requeue by ids considers every named job, past the filter limit, and answers each id once', async () => {
		const queue = 'rq-many';
		const ids = (
			await store.enqueue(Array.from({ length: 150 }, (_, n) => ({ queue, payload: { n } })))
		).map((result) => ok(result).jobId);
		const leased = await store.lease({ queue, limit: 150 });
		expect(leased).toHaveLength(150);
		await store.complete(
			leased.map((job) => ({
				jobId: job.id,
				attemptId: job.attempt_id,
				outcome: 'failed' as const,
				errorCode: 'boom',
			})),
		);
		const answered = await store.requeue({ jobIds: [...ids, ids[0], ids[1]] });
		expect(answered).toHaveLength(150);
		expect(new Set(answered.map((row) => row.id))).toEqual(new Set(ids));
		expect(answered.every((row) => row.requeued && row.status === 'queued')).toBe(true);
	});

	it('requeue by filter needs a queue and an explicit confirm, and respects the limit', async () => {
		await failJob('rq-filter', 'http_400');
		await failJob('rq-filter', 'http_400');
		await failJob('rq-filter', 'timeout', 'retryable');
		await expect(store.requeue({})).rejects.toBeInstanceOf(ValidationError);
		await expect(store.requeue({ queue: 'rq-filter' })).rejects.toMatchObject({ field: 'confirm' });
		const before = (
			await pool.query(
				`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'rq-filter' AND status = 'failed'`,
			)
		).rows[0].n;
		expect(before).toBe(3);
		const replayed = await store.requeue({
			queue: 'rq-filter',
			errorCode: 'http_400',
			confirm: true,
			limit: 1,
		});
		expect(replayed).toHaveLength(1);
		const byClass = await store.requeue({
			queue: 'rq-filter',
			errorClass: 'retryable',
			confirm: true,
		});
		expect(byClass).toHaveLength(1);
		expect(
			(
				await pool.query(
					`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'rq-filter' AND status = 'failed'`,
				)
			).rows[0].n,
		).toBe(1);
		const [stats] = await store.stats('rq-filter');
		expect(stats.failed).toBe(1);
	});

	it('cancel stops queued and running jobs; the running worker then gets lease lost', async () => {
		const [a, b] = (
			await store.enqueue([
				{ queue: 'cx', payload: {} },
				{ queue: 'cx', payload: {} },
			])
		).map((r) => ok(r).jobId);
		const [running] = await store.lease({ queue: 'cx' });
		const result = await store.cancel([a, b, '00000000-0000-0000-0000-000000000000']);
		expect(result.filter((row) => row.cancelled)).toHaveLength(2);
		const late = ok(
			(
				await store.complete([
					{ jobId: running.id, attemptId: running.attempt_id, outcome: 'succeeded' },
				])
			)[0],
		);
		expect(late).toMatchObject({ applied: false, leaseLostReason: 'job_cancelled' });
		expect(await store.lease({ queue: 'cx' })).toHaveLength(0);
	});

	it('purge removes only terminal jobs older than the retention, with their attempts, and keeps counters right', async () => {
		const old = await failJob('purge');
		const fresh = await failJob('purge');
		await pool.query(
			`UPDATE ${schema}.jobs SET finished_at = now() - interval '10 days' WHERE id = $1`,
			[old],
		);
		const queued = ok((await store.enqueue([{ queue: 'purge', payload: {} }]))[0]).jobId;
		const result = await store.purge({ queue: 'purge', olderThanMs: 7 * 24 * 3600_000 });
		expect(result).toMatchObject({ deleted: 1, failed: 1 });
		const ids = (await pool.query(`SELECT id FROM ${schema}.jobs WHERE queue = 'purge'`)).rows
			.map((row) => row.id)
			.sort();
		expect(ids).toEqual([fresh, queued].sort());
		expect(
			(
				await pool.query(
					`SELECT count(*)::int AS n FROM ${schema}.job_attempts WHERE job_id = $1`,
					[old],
				)
			).rows[0].n,
		).toBe(0);
		const [stats] = await store.stats('purge');
		expect(stats.failed).toBe(1);
		await expect(store.purge({ olderThanMs: 0, statuses: ['queued'] })).rejects.toMatchObject({
			field: 'statuses',
		});
		// No status chosen purges nothing, not everything: the failed job (a dead letter) stays.
		await expect(store.purge({ olderThanMs: 0, statuses: [] })).rejects.toMatchObject({
			field: 'statuses',
			message: expect.stringMatching(/nothing would be purged/),
		});
		const [after] = await store.stats('purge');
		expect(after.failed).toBe(1);
	});

	it('unknown outcomes read the newest expired attempts through their own index, not every record', async () => {
		const queue = 'unknown-many';
		const jobIds = (
			await store.enqueue(Array.from({ length: 5 }, (_, n) => ({ queue, payload: { n } })))
		).map((result) => ok(result).jobId);
		// 20,000 records of attempts that failed or were retried, then five expired ones, one per
		// job, an hour apart: the oldest expired attempt is the first job's.
		await pool.query(
			`INSERT INTO ${schema}.job_attempt_records (attempt_id, job_id, attempt, started_at, finished_at, outcome)
			 SELECT gen_random_uuid(), ($1::uuid[])[1 + n % 5], 1, now() - n * interval '1 second', now(),
				CASE WHEN n % 2 = 0 THEN 'failed' ELSE 'retry' END
			 FROM generate_series(1, 20000) AS n`,
			[jobIds],
		);
		await pool.query(
			`INSERT INTO ${schema}.job_attempt_records (attempt_id, job_id, attempt, execution_id, started_at, finished_at, outcome)
			 SELECT gen_random_uuid(), ($1::uuid[])[n], 2, 'expired-' || n, now() - (6 - n) * interval '1 hour', now(), 'lease_expired'
			 FROM generate_series(1, 5) AS n`,
			[jobIds],
		);
		await pool.query(`ANALYZE ${schema}.job_attempt_records`);
		const rows = await store.unknownOutcomes(queue, 3);
		expect(rows.map((row) => row.execution_id)).toEqual(['expired-5', 'expired-4', 'expired-3']);
		const query = unknownOutcomeQuery(`"${schema}"`, queue, 3);
		const nodes = await planNodes(pool, query);
		expect(nodes).toContain('Index Scan job_attempt_records_lease_expired');
		expect(nodes).not.toContain('Seq Scan job_attempt_records');
		expect(nodes).not.toContain('Sort');
	});

	it('unknown outcomes list attempts whose lease expired with the stable key to check', async () => {
		const jobId = ok((await store.enqueue([{ queue: 'unknown', payload: {} }]))[0]).jobId;
		await store.lease({ queue: 'unknown', executionId: 'exec-1' });
		await pool.query(
			`UPDATE ${schema}.jobs SET lease_until = now() - interval '1 second', attempt_lease_until = now() - interval '1 second' WHERE id = $1`,
			[jobId],
		);
		await store.lease({ queue: 'unknown', executionId: 'exec-2' });
		const rows = await store.unknownOutcomes('unknown');
		expect(rows).toEqual([
			expect.objectContaining({
				job_id: jobId,
				stable_key: jobId,
				execution_id: 'exec-1',
				attempt: 1,
			}),
		]);
	});
});
