import { randomUUID } from 'node:crypto';

import pg from 'pg';

import {
	DurableJobsError,
	JobStore,
	type LeasedJob,
	type LeasedJobEssentials,
} from '../../src/core';
import { extendLeaseQuery, leaseQuery, leaseQueuedQuery } from '../../src/core/sql/lease';
import { BEGIN } from '../../src/core/sql/transaction';
import {
	dropSchema,
	freshStore,
	newPool,
	ok,
	sentTexts,
	statementsSentDuring,
	sleep,
	succeedAll,
	useTestSchema,
	waitFor,
} from '../helpers/db';

const { schema, pool, store } = useTestSchema(__filename, { poolSize: 40, migrate: true });

async function enqueueMany(
	queue: string,
	count: number,
	extra: (n: number) => Record<string, unknown> = () => ({}),
	target: JobStore = store,
): Promise<string[]> {
	const ids: string[] = [];
	for (let start = 0; start < count; start += 1000) {
		const batch = Array.from({ length: Math.min(1000, count - start) }, (_, i) => ({
			queue,
			payload: { n: start + i },
			...extra(start + i),
		}));
		ids.push(...(await target.enqueue(batch)).map((result) => ok(result).jobId));
	}
	return ids;
}

/**
 * Runs the usual lease of one slot and of eight and the full lease of eight on `queue` of the
 * schema `target` under EXPLAIN (ANALYZE, BUFFERS), each rolled back: each plan as JSON text and
 * the buffers it read.
 */
async function explainLeases(
	target: string,
	queue: string,
): Promise<Array<{ explained: string; buffers: number }>> {
	const s = `"${target}"`;
	const slots = (count: number) =>
		Array.from({ length: count }, (_, ord) => ({
			ord,
			attempt_id: randomUUID(),
			lease_ms: 60_000,
			workflow_id: null,
			execution_id: null,
		}));
	const statements = [
		leaseQueuedQuery(target, s, queue, slots(1), { waitForFlush: true }),
		leaseQueuedQuery(target, s, queue, slots(8), { waitForFlush: true }),
		leaseQuery(target, s, queue, slots(8), { waitForFlush: true, callbackQueue: 'callbacks' }),
	];
	const explained: Array<{ explained: string; buffers: number }> = [];
	const client = await pool.connect();
	try {
		for (const query of statements) {
			await client.query('BEGIN');
			const { rows } = await client.query({
				text: `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${query.text}`,
				values: query.values,
			});
			await client.query('ROLLBACK');
			const [{ Plan: plan }] = rows[0]['QUERY PLAN'];
			explained.push({
				explained: JSON.stringify(plan),
				buffers: plan['Shared Hit Blocks'] + plan['Shared Read Blocks'],
			});
		}
	} finally {
		client.release();
	}
	return explained;
}

/** Forces a lease to be expired without waiting for it. */
async function expireLease(jobId: string): Promise<void> {
	await pool.query(
		`UPDATE ${schema}.jobs SET lease_until = now() - interval '1 second', attempt_lease_until = now() - interval '1 second' WHERE id = $1`,
		[jobId],
	);
}

describe('lease and complete', () => {
	it('8 concurrent leasers over 5,000 jobs: every job leased exactly once, none lost, none left running', async () => {
		const ids = await enqueueMany('bulk', 5000);
		const leasedBy = new Map<string, number>();
		let duplicates = 0;
		const worker = async (workerId: number) => {
			const s = new JobStore(pool, { schema });
			for (;;) {
				const jobs = await s.lease({ queue: 'bulk', limit: 25, leaseMs: 60_000 });
				if (jobs.length === 0) return;
				for (const job of jobs) {
					if (leasedBy.has(job.id)) duplicates++;
					leasedBy.set(job.id, workerId);
				}
				const results = await s.complete(
					jobs.map((job) => ({
						jobId: job.id,
						attemptId: job.attempt_id,
						outcome: 'succeeded' as const,
						result: { by: workerId },
					})),
				);
				expect(results.every((result) => ok(result).applied)).toBe(true);
			}
		};
		await Promise.all(Array.from({ length: 8 }, (_, n) => worker(n)));
		expect(duplicates).toBe(0);
		expect(leasedBy.size).toBe(5000);
		expect(new Set(ids)).toEqual(new Set(leasedBy.keys()));
		const workersUsed = new Set(leasedBy.values());
		expect(workersUsed.size).toBeGreaterThan(1);
		const { rows } = await pool.query(
			`SELECT status, count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'bulk' GROUP BY status`,
		);
		expect(rows).toEqual([{ status: 'done', n: 5000 }]);
		const attempts = await pool.query(
			`SELECT count(*)::int AS n, count(*) FILTER (WHERE outcome = 'succeeded')::int AS ok FROM ${schema}.job_attempts a JOIN ${schema}.jobs j ON j.id = a.job_id WHERE j.queue = 'bulk'`,
		);
		expect(attempts.rows[0]).toEqual({ n: 5000, ok: 5000 });
		const [stats] = await store.stats('bulk');
		expect(stats.done).toBe(5000);
		expect(stats.queued + stats.running).toBe(0);
	});

	it('a lease gives a fresh attempt id, increments attempts, sets lease_until and records the execution', async () => {
		const [jobId] = await enqueueMany('single', 1);
		const [job] = await store.lease({
			queue: 'single',
			leaseMs: 30_000,
			workflowId: 'wf-1',
			executionId: 'exec-9',
		});
		expect(job.id).toBe(jobId);
		expect((await store.getJobs([jobId]))[0]?.job.status).toBe('running');
		expect(job.attempts).toBe(1);
		expect(job.attempt_id).toMatch(/^[0-9a-f-]{36}$/);
		expect(job.lease_until.getTime()).toBeGreaterThan(Date.now() + 20_000);
		expect(job.recovered).toBe(false);
		const { rows } = await pool.query(
			`SELECT attempt, workflow_id, execution_id, outcome FROM ${schema}.job_attempts WHERE attempt_id = $1`,
			[job.attempt_id],
		);
		expect(rows[0]).toEqual({
			attempt: 1,
			workflow_id: 'wf-1',
			execution_id: 'exec-9',
			outcome: null,
		});
		expect(await store.lease({ queue: 'single' })).toHaveLength(0);
	});

	it('a lease without metadata returns only what running the attempt needs, and leases and fences like any other', async () => {
		const [jobId] = await enqueueMany('essentials', 1, () => ({
			priority: 3,
			correlationId: 'order-1',
			orderingKey: 'customer-1',
			idempotencyKey: 'k-1',
		}));
		const {
			value: [job],
			statements,
		} = await statementsSentDuring(async () =>
			store.lease({ queue: 'essentials', leaseMs: 30_000, includeMetadata: false }),
		);
		// The statement itself leaves the metadata out of its answer, not only the mapping.
		const [text] = statements.filter((sent) => sent.includes('WITH probe AS'));
		const answer = text.slice(text.lastIndexOf('RETURNING'));
		expect(answer).toMatch(/j\.payload/);
		expect(answer).not.toMatch(/created_at|lease_until|correlation_id|priority/);
		expect(job).toEqual({
			id: jobId,
			queue: 'essentials',
			payload: { n: 0 },
			attempts: 1,
			max_attempts: expect.any(Number),
			attempt_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
			recovered: false,
		});
		const row = (
			await pool.query(
				`SELECT status, attempt_id, lease_until > now() + interval '20 seconds' AS leased FROM ${schema}.jobs WHERE id = $1`,
				[jobId],
			)
		).rows[0];
		expect(row).toEqual({ status: 'running', attempt_id: job.attempt_id, leased: true });
		// A recovered job comes back without metadata too, marked recovered.
		await expireLease(jobId);
		const [again] = await store.lease({ queue: 'essentials', includeMetadata: false });
		expect(again).toMatchObject({ id: jobId, attempts: 2, recovered: true });
		expect(Object.keys(again).sort()).toEqual(Object.keys(job).sort());
		const [lost, applied] = await store.complete([
			{ jobId, attemptId: job.attempt_id, outcome: 'succeeded' },
			{ jobId, attemptId: again.attempt_id, outcome: 'succeeded' },
		]);
		expect(ok(lost)).toMatchObject({ applied: false, leaseLostReason: 'attempt_superseded' });
		expect(ok(applied)).toMatchObject({ applied: true, status: 'done', runAt: null });
		// A lease with a concurrency limit (its own transaction and statement) answers the same shape.
		const [limitedId] = await enqueueMany('essentials', 1);
		const [limited] = await store.lease({
			queue: 'essentials',
			concurrencyLimit: 2,
			includeMetadata: false,
		});
		expect(limited).toMatchObject({ id: limitedId, attempts: 1, recovered: false });
		expect(Object.keys(limited).sort()).toEqual(Object.keys(job).sort());
	});

	it('concurrent leases with and without metadata each get their own shape, every job once', async () => {
		await enqueueMany('shapes', 400);
		const seen = new Set<string>();
		let duplicates = 0;
		// Each worker changes shape every call, so merged statements are started by callers of
		// either shape.
		const worker = async (first: number) => {
			for (let call = first; ; call++) {
				const metadata = call % 2 === 0;
				const jobs = await store.lease({ queue: 'shapes', limit: 5, includeMetadata: metadata });
				if (jobs.length === 0) return;
				for (const job of jobs) {
					if (seen.has(job.id)) duplicates++;
					seen.add(job.id);
					expect(job.queue).toBe('shapes');
					if (metadata) {
						// Values the database sent, not keys the mapping wrote: a caller merged into
						// a statement of the other shape would get undefined here.
						const full = job as LeasedJob;
						expect(full.created_at).toBeInstanceOf(Date);
						expect(full.lease_until).toBeInstanceOf(Date);
						expect(full.priority).toBe(0);
					} else {
						expect(Object.keys(job)).not.toContain('created_at');
						expect(Object.keys(job)).not.toContain('lease_until');
					}
				}
				await succeedAll(store, jobs);
			}
		};
		await Promise.all(Array.from({ length: 16 }, (_, n) => worker(n)));
		expect(duplicates).toBe(0);
		expect(seen.size).toBe(400);
	});

	it('includeMetadata that is not a boolean is refused by name before anything is leased', async () => {
		await enqueueMany('metadata-flag', 1);
		await expect(
			store.lease({ queue: 'metadata-flag', includeMetadata: 'no' as unknown as boolean }),
		).rejects.toThrow(/includeMetadata.*true or false/s);
		const { rows } = await pool.query(
			`SELECT status FROM ${schema}.jobs WHERE queue = 'metadata-flag'`,
		);
		expect(rows).toEqual([{ status: 'queued' }]);
	});

	it('an expired lease is re-leased with a new attempt; the old attempt gets Lease Lost and changes nothing', async () => {
		await enqueueMany('expiry', 1);
		const [first] = await store.lease({ queue: 'expiry', leaseMs: 60_000 });
		await expireLease(first.id);
		const [second] = await store.lease({ queue: 'expiry', leaseMs: 60_000 });
		expect(second.id).toBe(first.id);
		expect(second.attempt_id).not.toBe(first.attempt_id);
		expect(second.attempts).toBe(2);
		expect(second.recovered).toBe(true);

		const before = (await pool.query(`SELECT * FROM ${schema}.jobs WHERE id = $1`, [first.id]))
			.rows[0];
		const [staleHeartbeat] = await store.extendLease([
			{ jobId: first.id, attemptId: first.attempt_id, leaseMs: 600_000 },
		]);
		expect(ok(staleHeartbeat)).toMatchObject({ extended: false, currentStatus: 'running' });
		const [staleComplete] = await store.complete([
			{
				jobId: first.id,
				attemptId: first.attempt_id,
				outcome: 'succeeded',
				result: { from: 'stale' },
			},
		]);
		expect(ok(staleComplete)).toMatchObject({
			applied: false,
			leaseLostReason: 'attempt_superseded',
		});
		for (const outcome of ['failed', 'retry', 'release'] as const) {
			const [result] = await store.complete([
				{ jobId: first.id, attemptId: first.attempt_id, outcome },
			]);
			expect(ok(result).applied).toBe(false);
		}
		const after = (await pool.query(`SELECT * FROM ${schema}.jobs WHERE id = $1`, [first.id]))
			.rows[0];
		expect(after).toEqual(before);

		const [heartbeat] = await store.extendLease([
			{ jobId: second.id, attemptId: second.attempt_id, leaseMs: 120_000 },
		]);
		expect(ok(heartbeat).extended).toBe(true);
		const [done] = await store.complete([
			{
				jobId: second.id,
				attemptId: second.attempt_id,
				outcome: 'succeeded',
				result: { from: 'second' },
			},
		]);
		expect(ok(done)).toMatchObject({ applied: true, status: 'done' });
		const [late] = await store.complete([
			{
				jobId: first.id,
				attemptId: first.attempt_id,
				outcome: 'succeeded',
				result: { from: 'stale' },
			},
		]);
		expect(ok(late)).toMatchObject({ applied: false, leaseLostReason: 'job_done' });
		const final = (
			await pool.query(`SELECT status, result FROM ${schema}.jobs WHERE id = $1`, [first.id])
		).rows[0];
		expect(final).toEqual({ status: 'done', result: { from: 'second' } });
		const history = (
			await pool.query(
				`SELECT attempt, outcome FROM ${schema}.job_attempts WHERE job_id = $1 ORDER BY attempt`,
				[first.id],
			)
		).rows;
		expect(history).toEqual([
			{ attempt: 1, outcome: 'lease_expired' },
			{ attempt: 2, outcome: 'succeeded' },
		]);
	});

	it('the usual lease is one statement for queued jobs; while a lease of the queue has expired it takes nothing, and the full statement recovers that job first, for merged callers too', async () => {
		const queue = 'lean-lease';
		await enqueueMany(queue, 8);
		const spy = jest.spyOn(pg.Client.prototype, 'query');
		/** The lease statements sent since the last call, in order. */
		const leaseStatements = () => {
			const kinds = sentTexts(spy).flatMap((text) => {
				if (text.includes('WITH probe AS')) return ['queued only'];
				return text.includes('WITH queued AS') ? ['full'] : [];
			});
			spy.mockClear();
			return kinds;
		};
		let expiredId: string;
		try {
			const first = await store.lease({ queue, limit: 2 });
			expect(first.map((job) => job.recovered)).toEqual([false, false]);
			expect(leaseStatements()).toEqual(['queued only']);

			expiredId = first[1].id;
			await expireLease(expiredId);
			const callers = await Promise.all([1, 2, 3].map(() => store.lease({ queue, limit: 1 })));
			// One merged statement found the expired lease and took nothing; one merged full
			// statement leased, the recovered job first.
			expect(leaseStatements()).toEqual(['queued only', 'full']);
			expect(callers.map((jobs) => jobs.length)).toEqual([1, 1, 1]);
			expect(callers[0][0]).toMatchObject({ id: expiredId, recovered: true, attempts: 2 });
			expect(callers.slice(1).map(([job]) => job.recovered)).toEqual([false, false]);
			expect(new Set([first[0].id, ...callers.map(([job]) => job.id)]).size).toBe(4);

			const later = await store.lease({ queue, limit: 1 });
			expect(later.map((job) => job.recovered)).toEqual([false]);
			expect(leaseStatements()).toEqual(['queued only']);

			// Without coalescing, the same two steps.
			const alone = new JobStore(pool, { schema, coalesceCalls: false });
			await expireLease(later[0].id);
			const recovered = await alone.lease({ queue, limit: 2 });
			expect(recovered.map((job) => [job.id, job.recovered])).toEqual([
				[later[0].id, true],
				[expect.any(String), false],
			]);
			expect(leaseStatements()).toEqual(['queued only', 'full']);
		} finally {
			spy.mockRestore();
		}
		const history = await pool.query(
			`SELECT attempt, outcome FROM ${schema}.job_attempts WHERE job_id = $1 ORDER BY attempt`,
			[expiredId],
		);
		expect(history.rows).toEqual([
			{ attempt: 1, outcome: 'lease_expired' },
			{ attempt: 2, outcome: null },
		]);
	});

	it('a lease of one slot runs a statement of its own, which takes, writes and answers as the statement for many slots', async () => {
		/** Leases every job it can, `limit` per call; returns what each lease answered and wrote. */
		async function scenario(queue: string, limit: number, includeMetadata: boolean) {
			await enqueueMany(queue, 7, (n) => ({
				priority: n % 3,
				orderingKey: n < 3 ? 'customer-1' : null,
				correlationId: `c-${n}`,
				...(n === 6 ? { delayMs: 60_000 } : {}),
			}));
			const leased: Array<LeasedJob | LeasedJobEssentials> = [];
			const { statements } = await statementsSentDuring(async () => {
				for (;;) {
					const jobs = await store.lease({
						queue,
						limit,
						leaseMs: 45_000,
						workflowId: 'wf-1',
						executionId: 'exec-1',
						includeMetadata,
					});
					leased.push(...jobs);
					if (jobs.length < limit) break;
				}
			});
			const texts = statements.filter((text) => text.includes('WITH probe AS'));
			const { rows } = await pool.query(
				`SELECT payload->>'n' AS n, status, attempts, attempt_id, attempt_workflow_id,
					attempt_execution_id, attempt_checkpoint,
					lease_until BETWEEN now() + interval '40 seconds' AND now() + interval '46 seconds' AS lease_45s,
					attempt_lease_until = lease_until AS attempt_lease_kept, started_at IS NOT NULL AS started
				 FROM ${schema}.jobs WHERE queue = $1 ORDER BY 1`,
				[queue],
			);
			const attemptOf = new Map(leased.map((job) => [job.id, job.attempt_id]));
			expect(rows.filter((row) => row.status === 'running').map((row) => row.attempt_id)).toEqual(
				expect.arrayContaining([...attemptOf.values()]),
			);
			return {
				texts,
				leased: leased.map((job) => ({
					...job,
					id: undefined,
					queue: undefined,
					attempt_id: undefined,
					...('lease_until' in job ? { lease_until: undefined, created_at: undefined } : {}),
				})),
				rows: rows.map((row) => ({ ...row, attempt_id: row.attempt_id === null ? null : 'set' })),
			};
		}
		for (const includeMetadata of [true, false]) {
			const one = await scenario(`one-slot-${includeMetadata}`, 1, includeMetadata);
			const many = await scenario(`two-slots-${includeMetadata}`, 2, includeMetadata);
			expect(one.texts.length).toBeGreaterThan(1);
			for (const text of one.texts) expect(text).not.toContain('::uuid[]');
			for (const text of many.texts) expect(text).toContain('::uuid[]');
			// Priority first, but the ordering key's jobs in enqueue order and one at a time (0
			// before 1 and 2, which wait); the delayed job not yet.
			expect(one.leased.map((job) => (job.payload as { n: number }).n)).toEqual([5, 4, 0, 3]);
			expect(one.leased).toEqual(many.leased);
			expect(one.rows).toEqual(many.rows);
			expect(one.rows.find((row) => row.n === '0')).toMatchObject({
				status: 'running',
				attempts: 1,
				attempt_workflow_id: 'wf-1',
				attempt_execution_id: 'exec-1',
				attempt_checkpoint: null,
				lease_45s: true,
				attempt_lease_kept: true,
				started: true,
			});
		}
		// While a lease of the queue has expired, the one-slot statement takes nothing and the
		// full statement recovers that job, as for many slots.
		const queue = 'one-slot-true';
		const { rows } = await pool.query<{ id: string }>(
			`SELECT id FROM ${schema}.jobs WHERE queue = $1 AND payload->>'n' = '5'`,
			[queue],
		);
		// A due job that nothing holds back: the one-slot statement must not take it either.
		const [due] = await enqueueMany(queue, 1);
		await expireLease(rows[0].id);
		const { value: recovered, statements } = await statementsSentDuring(async () =>
			store.lease({ queue, limit: 1 }),
		);
		const texts = statements.filter((text) => /WITH (probe|queued) AS/.test(text));
		expect(recovered).toEqual([
			expect.objectContaining({ id: rows[0].id, recovered: true, attempts: 2 }),
		]);
		expect(texts).toHaveLength(2);
		expect(texts[0]).toContain('WITH probe AS');
		expect(texts[0]).not.toContain('::uuid[]');
		expect(texts[1]).toContain('WITH queued AS');
		const { rows: dueRows } = await pool.query(
			`SELECT status, attempts FROM ${schema}.jobs WHERE id = $1`,
			[due],
		);
		expect(dueRows).toEqual([{ status: 'queued', attempts: 0 }]);
	});

	it('a checkpoint is recorded on the attempt only while it holds the lease, and Unknown Outcomes shows it', async () => {
		await enqueueMany('checkpoint', 2);
		const [passed, early] = await store.lease({ queue: 'checkpoint', limit: 2, leaseMs: 60_000 });
		const [recorded] = await store.extendLease([
			{ jobId: passed.id, attemptId: passed.attempt_id, checkpoint: 'crm_request' },
		]);
		expect(ok(recorded).extended).toBe(true);
		const attemptRow = async (attemptId: string) =>
			(
				await pool.query(
					`SELECT checkpoint, checkpoint_at, outcome FROM ${schema}.job_attempts WHERE attempt_id = $1`,
					[attemptId],
				)
			).rows[0];
		expect(await attemptRow(passed.attempt_id)).toMatchObject({
			checkpoint: 'crm_request',
			checkpoint_at: expect.any(Date),
			outcome: null,
		});
		// A heartbeat without a checkpoint keeps the one recorded.
		ok((await store.extendLease([{ jobId: passed.id, attemptId: passed.attempt_id }]))[0]);
		expect((await attemptRow(passed.attempt_id)).checkpoint).toBe('crm_request');

		// Both attempts die; the jobs are leased again by new attempts.
		await expireLease(passed.id);
		await expireLease(early.id);
		const again = await store.lease({ queue: 'checkpoint', limit: 2, leaseMs: 60_000 });
		expect(again.map((job) => job.id).sort()).toEqual([passed.id, early.id].sort());
		// The dead attempt that resumes late (n8n re-runs it at boot) is not recorded: it lost its lease.
		const [stale] = await store.extendLease([
			{ jobId: early.id, attemptId: early.attempt_id, checkpoint: 'crm_request' },
		]);
		expect(ok(stale)).toMatchObject({ extended: false, currentStatus: 'running' });
		expect(await attemptRow(early.attempt_id)).toMatchObject({
			checkpoint: null,
			checkpoint_at: null,
			outcome: 'lease_expired',
		});

		const report = await store.unknownOutcomes('checkpoint');
		expect(report).toHaveLength(2);
		const byAttempt = new Map(report.map((row) => [row.attempt_id, row]));
		expect(byAttempt.get(passed.attempt_id)).toMatchObject({
			job_id: passed.id,
			stable_key: passed.id,
			checkpoint: 'crm_request',
			checkpoint_at: expect.any(Date),
		});
		expect(byAttempt.get(early.attempt_id)).toMatchObject({
			job_id: early.id,
			checkpoint: null,
			checkpoint_at: null,
		});
	});

	it('a checkpoint that is too long or holds control characters is rejected before anything is written', async () => {
		await enqueueMany('checkpoint-bad', 1);
		const [job] = await store.lease({ queue: 'checkpoint-bad', leaseMs: 60_000 });
		const before = (
			await pool.query(`SELECT lease_until FROM ${schema}.jobs WHERE id = $1`, [job.id])
		).rows[0];
		const [tooLong, control] = await store.extendLease([
			{ jobId: job.id, attemptId: job.attempt_id, checkpoint: 'x'.repeat(101) },
			{ jobId: job.id, attemptId: job.attempt_id, checkpoint: 'crm\nrequest' },
		]);
		expect(tooLong).toMatchObject({
			field: 'checkpoint',
			message: expect.stringMatching(/101 characters/),
		});
		expect(control).toMatchObject({
			field: 'checkpoint',
			message: expect.stringMatching(/control character/),
		});
		expect(
			(await pool.query(`SELECT lease_until FROM ${schema}.jobs WHERE id = $1`, [job.id])).rows[0],
		).toEqual(before);
		expect(
			(
				await pool.query(`SELECT checkpoint FROM ${schema}.job_attempts WHERE attempt_id = $1`, [
					job.attempt_id,
				])
			).rows[0].checkpoint,
		).toBeNull();
		// Blank means no checkpoint.
		ok(
			(
				await store.extendLease([{ jobId: job.id, attemptId: job.attempt_id, checkpoint: '   ' }])
			)[0],
		);
		expect(
			(
				await pool.query(`SELECT checkpoint FROM ${schema}.job_attempts WHERE attempt_id = $1`, [
					job.attempt_id,
				])
			).rows[0].checkpoint,
		).toBeNull();
	});

	it('items of one attempt in one heartbeat are each extended, one statement after another in one transaction', async () => {
		await enqueueMany('fan-out', 2);
		const [job, other] = await store.lease({ queue: 'fan-out', limit: 2, leaseMs: 60_000 });
		const { value: answers, statements: texts } = await statementsSentDuring(async () =>
			store.extendLease([
				{ jobId: job.id, attemptId: job.attempt_id, leaseMs: 30_000, checkpoint: 'first' },
				{ jobId: other.id, attemptId: other.attempt_id, leaseMs: 30_000 },
				{ jobId: job.id, attemptId: job.attempt_id, leaseMs: 90_000 },
				{ jobId: job.id, attemptId: job.attempt_id, leaseMs: 120_000, checkpoint: 'third' },
			]),
		);
		const results = answers.map(ok);
		// One statement writes a row once: in one statement, items 3 and 4 would have lost.
		expect(results.map((result) => result.extended)).toEqual([true, true, true, true]);
		expect(texts.filter((text) => text.includes('extended AS'))).toHaveLength(3);
		expect(texts[0]).toBe(BEGIN);
		expect(texts[texts.length - 1]).toBe('COMMIT');
		const until = results.map((result) => result.leaseUntil!.getTime());
		expect(until[2] - until[0]).toBeGreaterThanOrEqual(59_000);
		expect(until[3] - until[2]).toBeGreaterThanOrEqual(29_000);
		const { rows } = await pool.query(
			`SELECT id, lease_until, attempt_checkpoint FROM ${schema}.jobs WHERE id = ANY($1)`,
			[[job.id, other.id]],
		);
		const byId = new Map(rows.map((row) => [row.id, row]));
		// The last item ran last, as if the items had been sent one after another.
		expect(byId.get(job.id).lease_until.getTime()).toBe(until[3]);
		expect(byId.get(job.id).attempt_checkpoint).toBe('third');
		expect(byId.get(other.id).lease_until.getTime()).toBe(until[1]);
	});

	it('when a later statement of such a call fails, the call writes nothing', async () => {
		await pool.query(
			`ALTER TABLE ${schema}.jobs ADD CONSTRAINT test_no_poison CHECK (attempt_checkpoint IS DISTINCT FROM 'poison') NOT VALID`,
		);
		try {
			await enqueueMany('fan-out-poison', 1);
			const [job] = await store.lease({ queue: 'fan-out-poison', leaseMs: 60_000 });
			const read = async () =>
				(
					await pool.query(
						`SELECT lease_until, attempt_checkpoint FROM ${schema}.jobs WHERE id = $1`,
						[job.id],
					)
				).rows[0];
			const before = await read();
			await expect(
				store.extendLease([
					{ jobId: job.id, attemptId: job.attempt_id, leaseMs: 90_000, checkpoint: 'fine' },
					{ jobId: job.id, attemptId: job.attempt_id, leaseMs: 90_000, checkpoint: 'poison' },
				]),
			).rejects.toMatchObject({ code: expect.any(String) });
			expect(await read()).toEqual(before);
			expect(before.attempt_checkpoint).toBeNull();
		} finally {
			await pool.query(`ALTER TABLE ${schema}.jobs DROP CONSTRAINT test_no_poison`);
		}
	});

	it('a heartbeat keeps the job from being re-leased', async () => {
		await enqueueMany('heartbeat', 1);
		const [job] = await store.lease({ queue: 'heartbeat', leaseMs: 1_000 });
		await sleep(600);
		ok(
			(await store.extendLease([{ jobId: job.id, attemptId: job.attempt_id, leaseMs: 10_000 }]))[0],
		);
		await sleep(600);
		expect(await store.lease({ queue: 'heartbeat' })).toHaveLength(0);
	});

	it('a heartbeat that extends a lease changes no indexed column, so PostgreSQL makes it a HOT update: one item, many, with a checkpoint', async () => {
		await enqueueMany('hot-heartbeat', 3);
		const leased = await store.lease({ queue: 'hot-heartbeat', limit: 3, leaseMs: 60_000 });
		expect(leased).toHaveLength(3);
		const rows = (jobs: typeof leased, leaseMs: number) =>
			jobs.map((job, ord) => ({
				ord,
				job_id: job.id,
				attempt_id: job.attempt_id,
				lease_ms: leaseMs,
				checkpoint: ord === 0 ? 'crm_request' : null,
				workflow_id: 'wf-heartbeat',
				execution_id: null,
			}));
		const client = await pool.connect();
		// The backend's counts of updates not yet sent to the statistics (this transaction's and
		// possibly earlier ones'): what a statement adds to them is what it did.
		const updates = async () =>
			(
				await client.query<{ updated: number; hot: number }>(
					`SELECT pg_stat_get_xact_tuples_updated($1::regclass)::int AS updated,
						pg_stat_get_xact_tuples_hot_updated($1::regclass)::int AS hot`,
					[`"${schema}".jobs`],
				)
			).rows[0];
		const counted = async (query: { text: string; values: unknown[] }) => {
			const before = await updates();
			const { rows: answers } = await client.query(query.text, query.values);
			const after = await updates();
			return {
				extended: answers.map((answer) => answer.extended as boolean),
				updated: after.updated - before.updated,
				hot: after.hot - before.hot,
			};
		};
		try {
			await client.query('BEGIN');
			for (const jobs of [leased.slice(0, 1), leased.slice(1)])
				expect(await counted(extendLeaseQuery(schema, `"${schema}"`, rows(jobs, 120_000)))).toEqual(
					{
						extended: jobs.map(() => true),
						updated: jobs.length,
						hot: jobs.length,
					},
				);
			// A heartbeat that shortens the lease moves the indexed end with it (not a HOT update):
			// the lease must be found once it ends.
			expect(
				await counted(extendLeaseQuery(schema, `"${schema}"`, rows(leased.slice(0, 1), 1_000))),
			).toEqual({ extended: [true], updated: 1, hot: 0 });
			await client.query('COMMIT');
		} finally {
			await client.query('ROLLBACK').catch(() => undefined);
			client.release();
		}
		const { rows: ends } = await pool.query(
			`SELECT id, attempt_lease_until <= lease_until AS indexed_end_first FROM ${schema}.jobs WHERE queue = 'hot-heartbeat'`,
		);
		expect(ends.every((row) => row.indexed_end_first)).toBe(true);
		await sleep(1_100);
		const [takenOver] = await store.lease({ queue: 'hot-heartbeat' });
		expect(takenOver).toMatchObject({ id: leased[0].id, attempts: 2 });
		expect(await store.lease({ queue: 'hot-heartbeat' })).toEqual([]);
	});

	it('a lease extended past the end it was given is not taken over; one that then ends is', async () => {
		await enqueueMany('extended-past', 1);
		const [job] = await store.lease({ queue: 'extended-past', leaseMs: 1_000 });
		ok(
			(await store.extendLease([{ jobId: job.id, attemptId: job.attempt_id, leaseMs: 2_000 }]))[0],
		);
		await sleep(1_300);
		// Past the end the lease was given (the index finds it), before the extended one.
		expect(await store.lease({ queue: 'extended-past' })).toEqual([]);
		await sleep(1_000);
		const [takenOver] = await store.lease({ queue: 'extended-past' });
		expect(takenOver).toMatchObject({ id: job.id, attempts: 2 });
	});

	it('max attempts reached by expiry → failed with lease_expired', async () => {
		await enqueueMany('exhaust-expiry', 1, () => ({ maxAttempts: 2 }));
		const [a1] = await store.lease({ queue: 'exhaust-expiry' });
		await expireLease(a1.id);
		const [a2] = await store.lease({ queue: 'exhaust-expiry' });
		expect(a2.attempts).toBe(2);
		await expireLease(a2.id);
		expect(await store.lease({ queue: 'exhaust-expiry' })).toHaveLength(0);
		const row = (
			await pool.query(
				`SELECT status, error_code, attempts, finished_at FROM ${schema}.jobs WHERE id = $1`,
				[a1.id],
			)
		).rows[0];
		expect(row).toMatchObject({ status: 'failed', error_code: 'lease_expired', attempts: 2 });
		expect(row.finished_at).toBeInstanceOf(Date);
		const history = (
			await pool.query(
				`SELECT outcome FROM ${schema}.job_attempts WHERE job_id = $1 ORDER BY attempt`,
				[a1.id],
			)
		).rows;
		expect(history.map((h) => h.outcome)).toEqual(['lease_expired', 'lease_expired']);
	});

	it('a job failed by lease expiry names the workflow and execution of the attempt that died, not those of an earlier error', async () => {
		const [id] = await enqueueMany('exhaust-origin', 1, () => ({ maxAttempts: 2 }));
		const [first] = await store.lease({
			queue: 'exhaust-origin',
			workflowId: 'wf-first',
			executionId: 'ex-first',
		});
		ok(
			(
				await store.complete([
					{
						jobId: id,
						attemptId: first.attempt_id,
						outcome: 'retry',
						errorCode: 'http_503',
						errorNode: 'Call CRM',
						errorWorkflow: 'wf-first',
						errorExecution: 'ex-first',
						delayMs: 0,
					},
				])
			)[0],
		);
		const [second] = await store.lease({
			queue: 'exhaust-origin',
			workflowId: 'wf-second',
			executionId: 'ex-second',
		});
		expect(second.attempts).toBe(2);
		await expireLease(id);
		expect(await store.lease({ queue: 'exhaust-origin' })).toEqual([]);
		const { rows } = await pool.query(
			`SELECT status, error_code, error_node, error_workflow, error_execution FROM ${schema}.jobs WHERE id = $1`,
			[id],
		);
		expect(rows[0]).toEqual({
			status: 'failed',
			error_code: 'lease_expired',
			error_node: null,
			error_workflow: 'wf-second',
			error_execution: 'ex-second',
		});
	});

	it('a job with a callback URL failed by lease expiry gets its job-finished event, once, as a failure by Job Complete does', async () => {
		const [id] = await enqueueMany('exhaust-callback', 1, () => ({
			maxAttempts: 1,
			callbackUrl: 'https://example.com/hook',
			correlationId: 'corr-9',
		}));
		const [leased] = await store.lease({ queue: 'exhaust-callback' });
		await expireLease(leased.id);
		expect(await store.lease({ queue: 'exhaust-callback' })).toEqual([]);
		expect(await store.lease({ queue: 'exhaust-callback' })).toEqual([]);
		const { rows } = await pool.query(
			`SELECT payload, correlation_id, status FROM ${schema}.jobs WHERE queue = 'callbacks' AND payload->'payload'->>'job_id' = $1`,
			[id],
		);
		expect(rows).toHaveLength(1);
		expect(rows[0]).toMatchObject({ status: 'queued', correlation_id: 'corr-9' });
		expect(rows[0].payload).toMatchObject({
			event_id: `job_${id}_failed_1`,
			event_type: 'job.failed',
			destination: 'https://example.com/hook',
			payload: {
				job_id: id,
				queue: 'exhaust-callback',
				status: 'failed',
				attempts: 1,
				error: expect.objectContaining({ code: 'lease_expired', class: 'retryable' }),
			},
		});
	});

	it('a Retry without an error code: retry while attempts remain, retries_exhausted only when it fails the job', async () => {
		await enqueueMany('retry-no-code', 1, () => ({ maxAttempts: 2 }));
		const codes: Array<string | null> = [];
		for (let attempt = 1; attempt <= 2; attempt++) {
			await pool.query(
				`UPDATE ${schema}.jobs SET run_at = now() WHERE queue = 'retry-no-code' AND status = 'queued'`,
			);
			const [job] = await store.lease({ queue: 'retry-no-code' });
			const [result] = await store.complete([
				{ jobId: job.id, attemptId: job.attempt_id, outcome: 'retry' },
			]);
			codes.push(`${ok(result).status}:${ok(result).errorCode}`);
		}
		expect(codes).toEqual(['queued:retry', 'failed:retries_exhausted']);
	});

	it('max attempts reached by retry → failed, keeping the error code; backoff lands inside the documented bounds', async () => {
		await enqueueMany('exhaust-retry', 1, () => ({ maxAttempts: 3 }));
		const base = 2_000;
		for (let attempt = 1; attempt <= 3; attempt++) {
			await pool.query(
				`UPDATE ${schema}.jobs SET run_at = now() WHERE queue = 'exhaust-retry' AND status = 'queued'`,
			);
			const [job] = await store.lease({ queue: 'exhaust-retry' });
			expect(job.attempts).toBe(attempt);
			const before = Date.now();
			const [result] = await store.complete([
				{
					jobId: job.id,
					attemptId: job.attempt_id,
					outcome: 'retry',
					errorCode: 'http_503',
					errorMessage: 'CRM unavailable',
					backoffBaseMs: base,
					backoffMaxMs: 5_000,
				},
			]);
			const applied = ok(result);
			expect(applied.applied).toBe(true);
			if (attempt < 3) {
				expect(applied.status).toBe('queued');
				const d = Math.min(5_000, base * 2 ** (attempt - 1));
				const delay = applied.runAt!.getTime() - before;
				expect(delay).toBeGreaterThanOrEqual(d / 2 - 50);
				expect(delay).toBeLessThanOrEqual(d + 250);
			} else {
				expect(applied).toMatchObject({
					status: 'failed',
					errorCode: 'http_503',
					errorClass: 'retryable',
				});
			}
		}
		const row = (
			await pool.query(
				`SELECT status, error_code, error_message, attempts FROM ${schema}.jobs WHERE queue = 'exhaust-retry'`,
			)
		).rows[0];
		expect(row).toEqual({
			status: 'failed',
			error_code: 'http_503',
			error_message: 'CRM unavailable',
			attempts: 3,
		});
	});

	it('backoff with jitter spreads over [d/2, d] and is capped', async () => {
		const ids = await enqueueMany('jitter', 200, () => ({ maxAttempts: 10 }));
		const jobs = await store.lease({ queue: 'jitter', limit: 200 });
		expect(jobs).toHaveLength(ids.length);
		const before = Date.now();
		const results = (
			await store.complete(
				jobs.map((job) => ({
					jobId: job.id,
					attemptId: job.attempt_id,
					outcome: 'retry' as const,
					backoffBaseMs: 100_000,
					backoffMaxMs: 60_000,
				})),
			)
		).map(ok);
		const delays = results.map((result) => result.runAt!.getTime() - before);
		expect(Math.min(...delays)).toBeGreaterThanOrEqual(30_000 - 50);
		expect(Math.max(...delays)).toBeLessThanOrEqual(60_000 + 250);
		// Jitter: not all equal, and spread over a good part of the window.
		expect(Math.max(...delays) - Math.min(...delays)).toBeGreaterThan(10_000);
	});

	it('explicit retry delay, release without penalty, and permanent failure with a class', async () => {
		await enqueueMany('outcomes', 3, () => ({ maxAttempts: 2 }));
		const jobs = await store.lease({ queue: 'outcomes', limit: 3 });
		const before = Date.now();
		const [retry, release, failed] = (
			await store.complete([
				{ jobId: jobs[0].id, attemptId: jobs[0].attempt_id, outcome: 'retry', delayMs: 30_000 },
				{ jobId: jobs[1].id, attemptId: jobs[1].attempt_id, outcome: 'release' },
				{
					jobId: jobs[2].id,
					attemptId: jobs[2].attempt_id,
					outcome: 'failed',
					errorCode: 'invalid_document',
					errorMessage: 'No text found',
					errorClass: 'needs_mapping',
					errorNode: 'Validate',
					errorWorkflow: 'wf-7',
					errorExecution: '77',
				},
			])
		).map(ok);
		expect(retry.runAt!.getTime() - before).toBeGreaterThanOrEqual(29_000);
		expect(release).toMatchObject({ status: 'queued', attempts: 0 });
		expect(release.runAt).toBeInstanceOf(Date);
		// runAt says when the job is due again, so a job that is not queued again has none.
		expect(failed).toMatchObject({
			status: 'failed',
			errorCode: 'invalid_document',
			errorClass: 'needs_mapping',
			runAt: null,
		});
		const dead = (
			await pool.query(
				`SELECT payload, error_node, error_workflow, error_execution, attempts FROM ${schema}.jobs WHERE id = $1`,
				[jobs[2].id],
			)
		).rows[0];
		expect(dead).toEqual({
			payload: { n: 2 },
			error_node: 'Validate',
			error_workflow: 'wf-7',
			error_execution: '77',
			attempts: 1,
		});
		const [again] = await store.lease({ queue: 'outcomes' });
		expect(again.id).toBe(jobs[1].id);
		expect(again.attempts).toBe(1);
	});

	it('ordering key: under 4 concurrent leasers, jobs sharing a key never overlap and finish in enqueue order', async () => {
		const keys = ['a', 'b', 'c'];
		const ids = await enqueueMany('ordered', 60, (n) => ({ orderingKey: keys[n % 3] }));
		const order = new Map<string, number>(ids.map((id, index) => [id, index]));
		const running = new Map<string, string>();
		const finished: Record<string, number[]> = { a: [], b: [], c: [] };
		let overlaps = 0;
		const worker = async () => {
			const s = new JobStore(pool, { schema });
			let idle = 0;
			while (idle < 5) {
				const jobs = await s.lease({ queue: 'ordered', limit: 3 });
				if (jobs.length === 0) {
					idle++;
					await sleep(5);
					continue;
				}
				idle = 0;
				for (const job of jobs) {
					const key = job.ordering_key!;
					if (running.has(key)) overlaps++;
					running.set(key, job.id);
				}
				await sleep(2);
				for (const job of jobs) {
					running.delete(job.ordering_key!);
					finished[job.ordering_key!].push(order.get(job.id)!);
				}
				const results = await succeedAll(s, jobs);
				expect(results.every((result) => result.applied)).toBe(true);
			}
		};
		await Promise.all([worker(), worker(), worker(), worker()]);
		expect(overlaps).toBe(0);
		for (const key of keys) {
			expect(finished[key]).toHaveLength(20);
			expect(finished[key]).toEqual([...finished[key]].sort((x, y) => x - y));
		}
		const { rows } = await pool.query(
			`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'ordered' AND status = 'done'`,
		);
		expect(rows[0].n).toBe(60);
	});

	it('ordering key: a lease checks for a running job of the key with one probe of jobs_ordering_running, never by reading every running job', async () => {
		const other = `${schema}_keys`;
		try {
			const keyed = await freshStore(pool, other);
			const enqueueKeyed = (queue: string, count: number) =>
				enqueueMany(queue, count, (n) => ({ orderingKey: `${queue}-${n}` }), keyed);
			await enqueueKeyed('busy', 2000);
			expect(await keyed.lease({ queue: 'busy', limit: 2000, leaseMs: 3_600_000 })).toHaveLength(
				2000,
			);
			await enqueueKeyed('keyed', 1000);
			await pool.query(`ANALYZE "${other}".jobs`);
			const buffers: number[] = [];
			for (const { explained, buffers: read } of await explainLeases(other, 'keyed')) {
				expect(explained).not.toContain('hashed SubPlan');
				expect(explained).toContain('jobs_ordering_running');
				buffers.push(read);
			}
			// A lease of one keyed job reads a few dozen buffers; a hashed check of every running
			// job's key read over a hundred more.
			expect(buffers[0]).toBeLessThan(60);
		} finally {
			await dropSchema(pool, other);
		}
	});

	it('leases, with and without a concurrency limit, keep their generic plans while another queue has thousands of running jobs', async () => {
		const other = `${schema}_generic`;
		// One connection, so pg_prepared_statements below is the connection that leased.
		const onePool = newPool(1);
		try {
			const filler = await freshStore(pool, other);
			await enqueueMany('busy', 10_000, undefined, filler);
			expect(await filler.lease({ queue: 'busy', limit: 10_000, leaseMs: 3_600_000 })).toHaveLength(
				10_000,
			);
			for (const queue of ['quiet', 'limited']) await enqueueMany(queue, 12, undefined, filler);
			await pool.query(`ANALYZE "${other}".jobs`);
			const quiet = new JobStore(onePool, { schema: other });
			for (const [queue, concurrencyLimit] of [
				['quiet', null],
				['limited', 5],
			] as const)
				for (let n = 0; n < 12; n++) {
					const [job] = await quiet.lease({ queue, limit: 1, concurrencyLimit });
					ok(
						(
							await quiet.complete([
								{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' },
							])
						)[0],
					);
				}
			// A plan made for each execution costs more than the lease itself (about 0.8 ms here);
			// it happened when the search for an expired lease estimated the running jobs of an
			// average queue, here 5,000. The usual lease asks in its probe, a lease under a
			// concurrency limit in its `expired` CTE.
			const plans = async (marker: string) => {
				const { rows } = await onePool.query<{ generic_plans: string; custom_plans: string }>(
					`SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE $1`,
					[`%${marker}%`],
				);
				expect(rows).toHaveLength(1);
				return { generic: Number(rows[0].generic_plans), custom: Number(rows[0].custom_plans) };
			};
			for (const marker of ['probe AS MATERIALIZED', 'exhausted_jobs AS']) {
				const { generic, custom } = await plans(marker);
				expect(custom).toBeLessThanOrEqual(5);
				expect(generic).toBeGreaterThanOrEqual(7);
			}
		} finally {
			await onePool.end();
			await dropSchema(pool, other);
		}
	});

	it('a lease of a queue with thousands of running jobs finds an expired lease, or that none expired, without reading them all', async () => {
		const busy = `${schema}_busy`;
		try {
			const filler = await freshStore(pool, busy);
			// Written as running, not leased: a lease leaves a dead entry of each job in
			// jobs_queued_claim, which the statements below would read while a concurrent test's
			// snapshot keeps VACUUM from removing them.
			const { rows } = await pool.query<{ id: string; seq: string }>(
				`INSERT INTO "${busy}".jobs (id, queue, payload, status, attempts, attempt_id, lease_until,
					attempt_lease_until, started_at, attempt_started_at)
				SELECT gen_random_uuid(), 'busy', '{}', 'running', 1, gen_random_uuid(), now() + interval '1 hour',
					now() + interval '1 hour', now(), now()
				FROM generate_series(1, 5000) RETURNING id, seq`,
			);
			const running = rows.sort((a, b) => Number(a.seq) - Number(b.seq)).map((row) => row.id);
			await enqueueMany('busy', 20, undefined, filler);
			await pool.query(`ANALYZE "${busy}".jobs`);
			// None expired. The three statements read about 20, 100 and 110 buffers (the last two
			// lease 8 jobs); reading every running job to learn that none expired added about 110.
			const [one, eight, full] = await explainLeases(busy, 'busy');
			expect(one.buffers).toBeLessThan(60);
			expect(eight.buffers).toBeLessThan(160);
			expect(full.buffers).toBeLessThan(160);

			const expired = [running[0], running[2500], running[4999]];
			await pool.query(
				`UPDATE "${busy}".jobs SET lease_until = now() - interval '1 second', attempt_lease_until = now() - interval '1 second' WHERE id = ANY($1::uuid[])`,
				[expired],
			);
			await pool.query(`ANALYZE "${busy}".jobs`);
			// Three expired. The usual leases stop at the first; the full lease reads the three, not
			// all 5,000 (about 110 buffers; 200 when it read them all).
			const recovering = await explainLeases(busy, 'busy');
			expect(recovering[2].buffers).toBeLessThan(160);

			// What the statements do, beyond what they read: the usual leases step aside for the
			// full one, which takes over the three expired jobs first.
			const leased = await filler.lease({ queue: 'busy', limit: 8 });
			expect(leased.slice(0, 3).map((job) => job.id)).toEqual(expired);
			expect(leased.map((job) => job.recovered)).toEqual([
				...Array<boolean>(3).fill(true),
				...Array<boolean>(5).fill(false),
			]);
		} finally {
			await dropSchema(pool, busy);
		}
	});

	it('a job with an ordering key waits while an earlier job of that key is retrying', async () => {
		await enqueueMany('ordered-retry', 2, () => ({ orderingKey: 'k' }));
		const [first] = await store.lease({ queue: 'ordered-retry', limit: 5 });
		ok(
			(
				await store.complete([
					{ jobId: first.id, attemptId: first.attempt_id, outcome: 'retry', delayMs: 60_000 },
				])
			)[0],
		);
		expect(await store.lease({ queue: 'ordered-retry', limit: 5 })).toHaveLength(0);
	});

	it('ordering key: a job requeued while a later job of its key runs waits until that one ends', async () => {
		const [first, second] = await enqueueMany('ordered-requeue', 2, () => ({ orderingKey: 'k' }));
		const [leasedFirst] = await store.lease({ queue: 'ordered-requeue' });
		expect(leasedFirst.id).toBe(first);
		ok(
			(
				await store.complete([
					{ jobId: first, attemptId: leasedFirst.attempt_id, outcome: 'failed', errorCode: 'x' },
				])
			)[0],
		);
		const [leasedSecond] = await store.lease({ queue: 'ordered-requeue' });
		expect(leasedSecond.id).toBe(second);
		expect((await store.requeue({ jobIds: [first] }))[0].requeued).toBe(true);

		expect(await store.lease({ queue: 'ordered-requeue', limit: 5 })).toEqual([]);
		await succeedAll(store, [leasedSecond]);
		expect(
			(await store.lease({ queue: 'ordered-requeue', limit: 5 })).map((job) => job.id),
		).toEqual([first]);
	});

	it('ordering key: a job whose enqueue commits after a later job of its key was leased waits for that one', async () => {
		const early = await pool.connect();
		try {
			await early.query('BEGIN');
			const { rows } = await early.query<{ id: string }>(
				`INSERT INTO ${schema}.jobs (id, queue, payload, ordering_key) VALUES (gen_random_uuid(), 'ordered-late', '{}', 'k') RETURNING id`,
			);
			const [later] = await enqueueMany('ordered-late', 1, () => ({ orderingKey: 'k' }));
			const [leased] = await store.lease({ queue: 'ordered-late', limit: 5 });
			expect(leased.id).toBe(later);
			await early.query('COMMIT');

			expect(await store.lease({ queue: 'ordered-late', limit: 5 })).toEqual([]);
			await succeedAll(store, [leased]);
			expect((await store.lease({ queue: 'ordered-late' })).map((job) => job.id)).toEqual([
				rows[0].id,
			]);
		} finally {
			await early.query('ROLLBACK').catch(() => undefined);
			early.release();
		}
	});

	it('ordering key: two leases whose snapshots cross never run two jobs of one key; the index refuses the second, which runs again', async () => {
		// The first lease is held after writing (an AFTER trigger sleeps) while a job of the same
		// key, with a lower seq, becomes visible; the second lease sees the first's job as queued.
		const otherPool = newPool(2);
		const early = await pool.connect();
		const s = schema;
		try {
			const [higherSeq] = await enqueueMany('ordered-cross', 1, () => ({ orderingKey: 'k' }));
			await pool.query(`CREATE FUNCTION ${s}.hold_lease() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$`);
			await pool.query(`CREATE TRIGGER hold_lease AFTER UPDATE ON ${s}.jobs FOR EACH ROW
				WHEN (NEW.id = '${higherSeq}' AND NEW.status = 'running') EXECUTE FUNCTION ${s}.hold_lease()`);
			// Inserted with a lower seq than the job above (an explicit one), committed later.
			await early.query('BEGIN');
			const { rows } = await early.query<{ id: string }>(
				`INSERT INTO ${s}.jobs (id, queue, payload, ordering_key, seq) OVERRIDING SYSTEM VALUE
				SELECT gen_random_uuid(), 'ordered-cross', '{}', 'k', seq - 1 FROM ${s}.jobs WHERE id = $1
				RETURNING id`,
				[higherSeq],
			);
			const lowerSeq = rows[0].id;
			const firstLease = store.lease({ queue: 'ordered-cross', limit: 5 });
			await waitFor(
				async () =>
					(
						await pool.query(
							`SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`,
						)
					).rowCount! > 0,
				'the first lease to hold its job',
			);
			await early.query('COMMIT');
			const secondLease = new JobStore(otherPool, { schema }).lease({
				queue: 'ordered-cross',
				limit: 5,
			});

			const [first, second] = await Promise.all([firstLease, secondLease]);
			expect(first.map((job) => job.id)).toEqual([higherSeq]);
			expect(second).toEqual([]);
			const { rows: running } = await pool.query(
				`SELECT id FROM ${s}.jobs WHERE queue = 'ordered-cross' AND status = 'running'`,
			);
			expect(running).toEqual([{ id: higherSeq }]);
			await pool.query(`DROP TRIGGER hold_lease ON ${s}.jobs`);
			await succeedAll(store, first);
			expect((await store.lease({ queue: 'ordered-cross' })).map((job) => job.id)).toEqual([
				lowerSeq,
			]);
		} finally {
			await early.query('ROLLBACK').catch(() => undefined);
			early.release();
			await pool.query(`DROP TRIGGER IF EXISTS hold_lease ON ${s}.jobs`);
			await pool.query(`DROP FUNCTION IF EXISTS ${s}.hold_lease()`);
			await otherPool.end();
		}
	}, 20_000);

	it('concurrency limit: a job whose lease expired keeps its slot, so a heartbeat in flight on it cannot put the queue over the limit', async () => {
		const [, second, third] = await enqueueMany('limited-expired', 3);
		const leased = await store.lease({ queue: 'limited-expired', limit: 2, concurrencyLimit: 2 });
		expect(leased).toHaveLength(2);
		const expiring = leased.find((job) => job.id === second)!;
		await expireLease(second);
		// The worker of the expired job is extending its lease right now: its row is locked.
		const heartbeat = await pool.connect();
		try {
			await heartbeat.query('BEGIN');
			await heartbeat.query(
				`UPDATE ${schema}.jobs SET lease_until = now() + interval '1 minute' WHERE id = $1 AND attempt_id = $2`,
				[second, expiring.attempt_id],
			);
			expect(
				await store.lease({ queue: 'limited-expired', limit: 2, concurrencyLimit: 2 }),
			).toEqual([]);
			await heartbeat.query('COMMIT');
		} finally {
			await heartbeat.query('ROLLBACK').catch(() => undefined);
			heartbeat.release();
		}
		const { rows } = await pool.query(
			`SELECT id FROM ${schema}.jobs WHERE queue = 'limited-expired' AND status = 'running' ORDER BY seq`,
		);
		expect(rows.map((row) => row.id)).not.toContain(third);
		expect(rows).toHaveLength(2);

		// Not locked, the expired job is taken over in its own slot, and its old attempt is fenced.
		await expireLease(second);
		const [takenOver] = await store.lease({
			queue: 'limited-expired',
			limit: 2,
			concurrencyLimit: 2,
		});
		expect(takenOver).toMatchObject({ id: second, recovered: true });
		const [late] = await store.extendLease([
			{ jobId: second, attemptId: expiring.attempt_id, leaseMs: 60_000 },
		]);
		expect(ok(late).extended).toBe(false);
		const { rows: after } = await pool.query(
			`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'limited-expired' AND status = 'running'`,
		);
		expect(after[0].n).toBe(2);
	});

	it('concurrency limit: a job that expired on its last attempt is failed by the next lease, which frees its slot', async () => {
		const [first, second] = await enqueueMany('limited-exhausted', 2, () => ({ maxAttempts: 1 }));
		const [leased] = await store.lease({ queue: 'limited-exhausted', concurrencyLimit: 1 });
		expect(leased.id).toBe(first);
		await expireLease(first);
		expect(await store.lease({ queue: 'limited-exhausted', concurrencyLimit: 1 })).toEqual([]);
		const { rows } = await pool.query(
			`SELECT status, error_code FROM ${schema}.jobs WHERE id = $1`,
			[first],
		);
		expect(rows[0]).toEqual({ status: 'failed', error_code: 'lease_expired' });
		const [next] = await store.lease({ queue: 'limited-exhausted', concurrencyLimit: 1 });
		expect(next.id).toBe(second);
	});

	it('concurrency limit K: under 8 leasers never more than K running in the queue', async () => {
		const K = 3;
		await enqueueMany('limited', 120);
		let running = 0;
		let maxRunning = 0;
		let dbMax = 0;
		const worker = async () => {
			const s = new JobStore(pool, { schema });
			let idle = 0;
			while (idle < 10) {
				const jobs: LeasedJob[] = await s.lease({
					queue: 'limited',
					limit: 2,
					concurrencyLimit: K,
				});
				if (jobs.length === 0) {
					idle++;
					await sleep(3);
					continue;
				}
				idle = 0;
				running += jobs.length;
				maxRunning = Math.max(maxRunning, running);
				const { rows } = await pool.query(
					`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'limited' AND status = 'running'`,
				);
				dbMax = Math.max(dbMax, rows[0].n);
				await sleep(3);
				running -= jobs.length;
				const results = await succeedAll(s, jobs);
				expect(results.every((result) => result.applied)).toBe(true);
			}
		};
		await Promise.all(Array.from({ length: 8 }, () => worker()));
		expect(maxRunning).toBeLessThanOrEqual(K);
		expect(dbMax).toBeLessThanOrEqual(K);
		expect(maxRunning).toBe(K);
		const { rows } = await pool.query(
			`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'limited' AND status = 'done'`,
		);
		expect(rows[0].n).toBe(120);
	});

	it('priority: higher priority leases first', async () => {
		await store.enqueue([
			{ queue: 'prio', payload: { p: 0 } },
			{ queue: 'prio', payload: { p: 10 }, priority: 10 },
			{ queue: 'prio', payload: { p: -5 }, priority: -5 },
		]);
		const jobs = await store.lease({ queue: 'prio', limit: 3 });
		expect(jobs.map((job) => (job.payload as { p: number }).p)).toEqual([10, 0, -5]);
	});

	it('a job can be completed after its lease expired as long as nobody re-leased it', async () => {
		await enqueueMany('late-but-ok', 1);
		const [job] = await store.lease({ queue: 'late-but-ok' });
		await expireLease(job.id);
		const [result] = await store.complete([
			{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' },
		]);
		expect(ok(result).applied).toBe(true);
	});

	it('malformed ids are rejected per item, unknown ids route to lease lost', async () => {
		const results = await store.complete([
			{
				jobId: 'not-a-uuid',
				attemptId: '00000000-0000-0000-0000-000000000000',
				outcome: 'succeeded',
			},
			{ jobId: '00000000-0000-0000-0000-000000000000', attemptId: 'x', outcome: 'succeeded' },
			{
				jobId: '00000000-0000-0000-0000-000000000000',
				attemptId: '00000000-0000-0000-0000-000000000000',
				outcome: 'bogus' as never,
			},
			{
				jobId: '00000000-0000-0000-0000-000000000001',
				attemptId: '00000000-0000-0000-0000-000000000000',
				outcome: 'succeeded',
			},
		]);
		expect((results[0] as DurableJobsError).field).toBe('jobId');
		expect((results[1] as DurableJobsError).field).toBe('attemptId');
		expect((results[2] as DurableJobsError).field).toBe('outcome');
		expect(ok(results[3])).toMatchObject({ applied: false, leaseLostReason: 'not_found' });
	});
});
