import {
	DurableJobsError,
	IdempotencyConflictError,
	JobStore,
	ValidationError,
	type CoalescingStats,
	type EnqueueResult,
	type LeasedJob,
} from '../../src/core';
import { completeQuery } from '../../src/core/sql/complete';
import { completeRow } from '../helpers/sql-rows';

import {
	PoolDate,
	newPool,
	ok,
	poolWithOwnTimestampParser,
	sleep,
	succeedAll,
	useTestSchema,
	waitFor,
} from '../helpers/db';

/**
 * Call coalescing on a real PostgreSQL: concurrent calls of one process share statements, and
 * each caller still gets exactly its own result, after its own commit. Every test reads the
 * coalescer's statistics, so none can pass with calls that were never merged.
 */
const { schema, pool, store } = useTestSchema(__filename, { poolSize: 20, migrate: true });

function stats(): CoalescingStats {
	const current = store.coalescingStats();
	if (current === null) throw new Error('the store does not coalesce');
	return current;
}

function delta(before: CoalescingStats): CoalescingStats {
	const after = stats();
	return {
		flushes: after.flushes - before.flushes,
		calls: after.calls - before.calls,
		mergedFlushes: after.mergedFlushes - before.mergedFlushes,
		largestFlush: after.largestFlush,
		splitAfterError: after.splitAfterError - before.splitAfterError,
		stalledFlushes: after.stalledFlushes - before.stalledFlushes,
	};
}

async function enqueueJobs(queue: string, count: number): Promise<string[]> {
	const results = await store.enqueue(
		Array.from({ length: count }, (_, n) => ({ queue, payload: { n } })),
	);
	return results.map((result) => ok(result).jobId);
}

async function leaseEach(queue: string, count: number): Promise<LeasedJob[]> {
	const jobs = await store.lease({ queue, limit: count, leaseMs: 60_000 });
	expect(jobs).toHaveLength(count);
	return jobs;
}

/**
 * Holds the row lock of one job on a connection of its own (another session's transaction),
 * so that a statement touching that row waits; `lockWaiter` finds that statement's backend.
 */
async function holdJobRow(
	jobId: string,
): Promise<{ rollback: () => Promise<void>; end: () => Promise<void> }> {
	const blocker = newPool(1);
	const client = await blocker.connect();
	await client.query('BEGIN');
	await client.query(`SELECT 1 FROM "${schema}".jobs WHERE id = $1 FOR UPDATE`, [jobId]);
	return {
		rollback: async () => void (await client.query('ROLLBACK')),
		end: async () => {
			client.release();
			await blocker.end();
		},
	};
}

async function lockWaiter(what: string): Promise<number> {
	return await waitFor(async () => {
		const { rows } = await pool.query<{ pid: number }>(
			`SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'
				AND query LIKE $1`,
			[`%"${schema}".jobs%`],
		);
		return rows[0]?.pid;
	}, what);
}

describe('call coalescing', () => {
	it('64 concurrent callers mixing enqueue, lease, extend and complete: one lease per attempt, each caller gets its own rows', async () => {
		const queue = 'mixed';
		const enqueuers = 16;
		const workers = 48;
		const batchesPerEnqueuer = 5;
		const perBatch = 4;
		/** Enqueuers i and i + 8 send the same keys and payloads: one job per key, both get its id. */
		const keyOf = (enqueuer: number, batch: number, n: number) => `k-${enqueuer % 8}-${batch}-${n}`;
		const expectedJobs = 8 * batchesPerEnqueuer * perBatch;
		const before = stats();

		const idsByKey = new Map<string, Set<string>>();
		let enqueueDone = 0;
		const enqueuer = async (index: number) => {
			for (let batch = 0; batch < batchesPerEnqueuer; batch++) {
				const results = await store.enqueue(
					Array.from({ length: perBatch }, (_, n) => ({
						queue,
						payload: { key: keyOf(index, batch, n), retryFirst: n === 0 },
						idempotencyKey: keyOf(index, batch, n),
					})),
				);
				results.forEach((result, n) => {
					const key = keyOf(index, batch, n);
					const ids = idsByKey.get(key) ?? new Set<string>();
					ids.add(ok(result).jobId);
					idsByKey.set(key, ids);
				});
				await sleep(1);
			}
			enqueueDone++;
		};

		/** attempt id → the worker it was handed to. */
		const attemptOwner = new Map<string, number>();
		let duplicateAttempts = 0;
		let succeeded = 0;
		const worker = async (index: number) => {
			const leaseMs = 60_000 + index * 1000;
			while (succeeded < expectedJobs) {
				const jobs = await store.lease({
					queue,
					limit: 1 + (index % 3),
					leaseMs,
					workflowId: `wf-${index}`,
					executionId: `ex-${index}`,
				});
				if (jobs.length === 0) {
					if (enqueueDone === enqueuers && succeeded >= expectedJobs) return;
					await sleep(2);
					continue;
				}
				for (const job of jobs) {
					if (attemptOwner.has(job.attempt_id)) duplicateAttempts++;
					attemptOwner.set(job.attempt_id, index);
					expect(job.lease_until.getTime()).toBeGreaterThan(Date.now() + leaseMs - 30_000);
				}
				const extended = await store.extendLease(
					jobs.map((job) => ({
						jobId: job.id,
						attemptId: job.attempt_id,
						leaseMs,
						checkpoint: `cp-${index}`,
					})),
				);
				expect(extended.map((result) => ok(result).extended)).toEqual(jobs.map(() => true));
				const completed = await store.complete(
					jobs.map((job) => {
						const retry = (job.payload as { retryFirst: boolean }).retryFirst && job.attempts === 1;
						return retry
							? {
									jobId: job.id,
									attemptId: job.attempt_id,
									outcome: 'retry' as const,
									delayMs: 0,
								}
							: {
									jobId: job.id,
									attemptId: job.attempt_id,
									outcome: 'succeeded' as const,
									result: { by: index, attempt: job.attempt_id },
								};
					}),
				);
				completed.forEach((result, n) => {
					const value = ok(result);
					expect(value.applied).toBe(true);
					if (value.status === 'done') succeeded++;
					else expect(value.status).toBe('queued');
					expect(value.attempts).toBe(jobs[n].attempts);
				});
			}
		};

		await Promise.all([
			...Array.from({ length: enqueuers }, (_, index) => enqueuer(index)),
			...Array.from({ length: workers }, (_, index) => worker(index)),
		]);

		expect(duplicateAttempts).toBe(0);
		expect(succeeded).toBe(expectedJobs);
		expect(idsByKey.size).toBe(expectedJobs);
		for (const ids of idsByKey.values()) expect(ids.size).toBe(1);

		const { rows: jobs } = await pool.query<{
			id: string;
			status: string;
			attempts: number;
			result: { by: number; attempt: string };
			attempt_id: string;
		}>(`SELECT id, status, attempts, result, attempt_id FROM "${schema}".jobs WHERE queue = $1`, [
			queue,
		]);
		expect(jobs).toHaveLength(expectedJobs);
		for (const job of jobs) {
			expect(job.status).toBe('done');
			// The result was written by the worker the final attempt was handed to.
			expect(job.result.attempt).toBe(job.attempt_id);
			expect(attemptOwner.get(job.attempt_id)).toBe(job.result.by);
		}
		// A quarter of the jobs were retried once.
		expect(jobs.filter((job) => job.attempts === 2)).toHaveLength(expectedJobs / 4);

		// Every attempt row belongs to the caller the attempt was handed to: its workflow and
		// execution ids, its lease length and its checkpoint.
		const { rows: attempts } = await pool.query<{
			attempt_id: string;
			workflow_id: string;
			execution_id: string;
			lease_ms: number;
			checkpoint: string;
			outcome: string;
		}>(
			`SELECT a.attempt_id, a.workflow_id, a.execution_id, a.checkpoint, a.outcome,
				(extract(epoch FROM a.lease_until - a.started_at) * 1000)::int AS lease_ms
			FROM "${schema}".job_attempts a JOIN "${schema}".jobs j ON j.id = a.job_id WHERE j.queue = $1`,
			[queue],
		);
		expect(attempts).toHaveLength(expectedJobs + expectedJobs / 4);
		expect(attempts.length).toBe(attemptOwner.size);
		for (const attempt of attempts) {
			const owner = attemptOwner.get(attempt.attempt_id);
			expect(owner).toBeDefined();
			expect(attempt.workflow_id).toBe(`wf-${owner}`);
			expect(attempt.execution_id).toBe(`ex-${owner}`);
			expect(attempt.lease_ms).toBe(60_000 + owner! * 1000);
			expect(attempt.checkpoint).toBe(`cp-${owner}`);
			expect(['succeeded', 'retry']).toContain(attempt.outcome);
		}

		const merged = delta(before);
		expect(merged.mergedFlushes).toBeGreaterThan(0);
		expect(merged.flushes).toBeLessThan(merged.calls);
		expect(merged.splitAfterError).toBe(0);
	});

	it('a stale attempt in the same flush as the fresh one gets Lease Lost, and the fresh one applies', async () => {
		const queue = 'stale';
		const [jobId] = await enqueueJobs(queue, 1);
		const [first] = await leaseEach(queue, 1);
		await pool.query(
			`UPDATE "${schema}".jobs SET lease_until = now() - interval '1 second', attempt_lease_until = now() - interval '1 second' WHERE id = $1`,
			[jobId],
		);
		const [second] = await leaseEach(queue, 1);
		expect(second.id).toBe(jobId);
		expect(second.recovered).toBe(true);

		const before = stats();
		const [staleExtend, freshExtend] = await Promise.all([
			store.extendLease([{ jobId, attemptId: first.attempt_id, leaseMs: 30_000 }]),
			store.extendLease([{ jobId, attemptId: second.attempt_id, leaseMs: 30_000 }]),
		]);
		expect(delta(before)).toMatchObject({ flushes: 1, calls: 2, mergedFlushes: 1 });
		expect(ok(staleExtend[0]).extended).toBe(false);
		expect(ok(freshExtend[0]).extended).toBe(true);

		const beforeComplete = stats();
		const [stale, fresh] = await Promise.all([
			store.complete([
				{ jobId, attemptId: first.attempt_id, outcome: 'succeeded', result: { from: 'stale' } },
			]),
			store.complete([
				{ jobId, attemptId: second.attempt_id, outcome: 'succeeded', result: { from: 'fresh' } },
			]),
		]);
		expect(delta(beforeComplete)).toMatchObject({ flushes: 1, calls: 2, mergedFlushes: 1 });
		expect(ok(stale[0])).toMatchObject({ applied: false, leaseLostReason: 'attempt_superseded' });
		expect(ok(fresh[0])).toMatchObject({ applied: true, status: 'done' });
		const { rows } = await pool.query(`SELECT status, result FROM "${schema}".jobs WHERE id = $1`, [
			jobId,
		]);
		expect(rows[0]).toEqual({ status: 'done', result: { from: 'fresh' } });
	});

	it('two heartbeats of one attempt at once both extend it, one statement after the other', async () => {
		const queue = 'same-attempt-extend';
		const [jobId] = await enqueueJobs(queue, 1);
		const [job] = await leaseEach(queue, 1);

		const before = stats();
		const [first, second] = await Promise.all([
			store.extendLease([
				{ jobId, attemptId: job.attempt_id, leaseMs: 60_000, checkpoint: 'first' },
			]),
			store.extendLease([
				{ jobId, attemptId: job.attempt_id, leaseMs: 90_000, checkpoint: 'second' },
			]),
		]);
		// One statement writes a row once: merged, the second heartbeat would have lost.
		expect(delta(before)).toMatchObject({ flushes: 2, calls: 2, mergedFlushes: 0 });
		expect(ok(first[0]).extended).toBe(true);
		expect(ok(second[0]).extended).toBe(true);
		const { rows } = await pool.query(
			`SELECT lease_until, attempt_checkpoint FROM "${schema}".jobs WHERE id = $1`,
			[jobId],
		);
		// The later call ran last, as it would alone.
		expect(rows[0].attempt_checkpoint).toBe('second');
		expect(rows[0].lease_until.getTime()).toBe(ok(second[0]).leaseUntil!.getTime());
		expect(ok(second[0]).leaseUntil!.getTime()).toBeGreaterThan(
			ok(first[0]).leaseUntil!.getTime() + 25_000,
		);
	});

	it('two completions of one attempt at once: the first applies, the second is answered as it would be after it; other calls still merge', async () => {
		const queue = 'same-attempt-complete';
		const [jobId, otherId] = await enqueueJobs(queue, 2);
		const [job, other] = await leaseEach(queue, 2);
		expect([job.id, other.id]).toEqual([jobId, otherId]);

		const before = stats();
		const [first, again, elsewhere] = await Promise.all([
			store.complete([
				{ jobId, attemptId: job.attempt_id, outcome: 'succeeded', result: { from: 'first' } },
			]),
			store.complete([
				{ jobId, attemptId: job.attempt_id, outcome: 'failed', errorCode: 'late_duplicate' },
			]),
			store.complete([
				{ jobId: otherId, attemptId: other.attempt_id, outcome: 'succeeded', result: {} },
			]),
		]);
		// The repeat waits for the next flush; the third call, another job, joins the first.
		expect(delta(before)).toMatchObject({ flushes: 2, calls: 3, mergedFlushes: 1 });
		expect(ok(first[0])).toMatchObject({ applied: true, status: 'done' });
		expect(ok(again[0])).toMatchObject({
			applied: false,
			status: 'done',
			leaseLostReason: 'job_done',
		});
		expect(ok(elsewhere[0])).toMatchObject({ applied: true, status: 'done' });
		const { rows } = await pool.query(
			`SELECT status, result, error_code FROM "${schema}".jobs WHERE id = $1`,
			[jobId],
		);
		expect(rows[0]).toEqual({ status: 'done', result: { from: 'first' }, error_code: null });
	});

	describe('an item the database rejects', () => {
		beforeAll(async () => {
			// Stands for any value PostgreSQL refuses after validation passed.
			await pool.query(
				`ALTER TABLE "${schema}".jobs ADD CONSTRAINT test_no_poison CHECK (NOT (payload ? 'poison')) NOT VALID`,
			);
		});
		afterAll(async () => {
			await pool.query(`ALTER TABLE "${schema}".jobs DROP CONSTRAINT test_no_poison`);
		});

		async function jobsOf(queue: string): Promise<Array<{ payload: Record<string, unknown> }>> {
			const { rows } = await pool.query<{ payload: Record<string, unknown> }>(
				`SELECT payload FROM "${schema}".jobs WHERE queue = $1 ORDER BY seq`,
				[queue],
			);
			return rows;
		}

		it.each([
			['without idempotency keys', false],
			['with idempotency keys', true],
		])(
			'%s: fails only the call it belongs to, as that call alone would; the other calls of the flush are written',
			async (_name, withKeys) => {
				const queue = withKeys ? 'poison-keys' : 'poison';
				const item = (payload: Record<string, unknown>, n: number) => ({
					queue,
					payload,
					idempotencyKey: withKeys ? `key-${JSON.stringify(payload)}-${n}` : undefined,
				});
				const before = stats();
				const [clean, poisoned, invalidItem, allOrNothing, cleanToo] = await Promise.allSettled([
					store.enqueue([item({ call: 'clean', n: 1 }, 1), item({ call: 'clean', n: 2 }, 2)]),
					store.enqueue([item({ call: 'poisoned', n: 1 }, 1), item({ poison: true }, 2)]),
					// A validation error: that item alone fails, before any statement.
					store.enqueue([
						{ queue: 'not a valid queue name!', payload: {} },
						item({ call: 'invalid-item', n: 2 }, 2),
					]),
					store.enqueue([item({ call: 'all-or-nothing', n: 1 }, 1), { queue: '', payload: {} }], {
						allOrNothing: true,
					}),
					store.enqueue([item({ call: 'clean-too', n: 1 }, 1)]),
				]);
				const merged = delta(before);
				expect(merged.splitAfterError).toBe(1);
				expect(merged.mergedFlushes).toBeGreaterThanOrEqual(1);

				expect(clean.status).toBe('fulfilled');
				expect(
					(clean as PromiseFulfilledResult<Array<EnqueueResult | DurableJobsError>>).value.every(
						(result) => !(result instanceof DurableJobsError),
					),
				).toBe(true);
				expect(cleanToo.status).toBe('fulfilled');

				expect(poisoned.status).toBe('rejected');
				expect((poisoned as PromiseRejectedResult).reason).toBeInstanceOf(DurableJobsError);

				expect(invalidItem.status).toBe('fulfilled');
				const invalid = (
					invalidItem as PromiseFulfilledResult<Array<EnqueueResult | DurableJobsError>>
				).value;
				expect(invalid[0]).toBeInstanceOf(ValidationError);
				expect(invalid[1]).not.toBeInstanceOf(DurableJobsError);

				expect(allOrNothing.status).toBe('rejected');
				expect((allOrNothing as PromiseRejectedResult).reason).toBeInstanceOf(ValidationError);

				const calls = (await jobsOf(queue)).map((row) => row.payload.call);
				expect(calls.sort()).toEqual(['clean', 'clean', 'clean-too', 'invalid-item']);
			},
		);
	});

	it('a connection killed mid-flush: every waiting caller gets an error and nothing of the flush is written', async () => {
		const queue = 'killed';
		await enqueueJobs(queue, 8);
		const jobs = await leaseEach(queue, 8);
		// Holds one job's row, so the merged complete waits on it with its other rows updated.
		const held = await holdJobRow(jobs[7].id);
		try {
			const before = stats();
			const calls = jobs.map((job) =>
				store.complete([{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' }]),
			);
			const settled = Promise.allSettled(calls);
			const pid = await lockWaiter('the merged complete to wait on the locked row');
			await pool.query('SELECT pg_terminate_backend($1)', [pid]);
			const outcomes = await settled;
			await held.rollback();

			expect(delta(before)).toMatchObject({ flushes: 1, calls: 8, mergedFlushes: 1 });
			for (const outcome of outcomes) {
				expect(outcome.status).toBe('rejected');
				expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(DurableJobsError);
			}
			const { rows } = await pool.query<{ status: string; attempt_id: string }>(
				`SELECT status, attempt_id FROM "${schema}".jobs WHERE queue = $1`,
				[queue],
			);
			expect(rows).toHaveLength(8);
			for (const row of rows) expect(row.status).toBe('running');
			expect(new Set(rows.map((row) => row.attempt_id))).toEqual(
				new Set(jobs.map((job) => job.attempt_id)),
			);
			const { rows: open } = await pool.query<{ count: number }>(
				`SELECT count(*)::int AS count FROM "${schema}".job_attempts
				WHERE attempt_id = ANY($1::uuid[]) AND outcome IS NULL AND finished_at IS NULL`,
				[jobs.map((job) => job.attempt_id)],
			);
			expect(open[0].count).toBe(8);

			// The store works again on the pool's other connections.
			const retried = await succeedAll(store, jobs);
			expect(retried.every((result) => result.applied)).toBe(true);
		} finally {
			await held.end();
		}
	});

	it('a flush stuck on a row lock does not hold back the next flush of its key', async () => {
		const queue = 'stuck';
		await enqueueJobs(queue, 4);
		const jobs = await leaseEach(queue, 4);
		const held = await holdJobRow(jobs[0].id);
		try {
			const before = stats();
			const stuck = store.complete([
				{ jobId: jobs[0].id, attemptId: jobs[0].attempt_id, outcome: 'succeeded' },
			]);
			let stuckSettled = false;
			void stuck.finally(() => (stuckSettled = true));
			await lockWaiter('the first complete to wait on the locked row');

			// Same statement key (complete), other jobs: they finish while the first still waits.
			const others = await Promise.all(
				jobs
					.slice(1)
					.map((job) =>
						store.complete([{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' }]),
					),
			);
			for (const [result] of others) expect(ok(result).applied).toBe(true);
			expect(stuckSettled).toBe(false);
			expect(delta(before).stalledFlushes).toBeGreaterThanOrEqual(1);

			await held.rollback();
			expect(ok((await stuck)[0]).applied).toBe(true);
		} finally {
			await held.end();
		}
	}, 30_000);

	it('a repeat completion of one attempt waits for the stalled flush that carries the first, and is answered as after it; other jobs pass the stall', async () => {
		const queue = 'stalled-repeat';
		await enqueueJobs(queue, 3);
		const [job, locked, other] = await leaseEach(queue, 3);
		const held = await holdJobRow(locked.id);
		try {
			const before = stats();
			// One call, two rows: its flush updates job's row, then waits on locked's.
			const first = store.complete([
				{
					jobId: job.id,
					attemptId: job.attempt_id,
					outcome: 'succeeded',
					result: { from: 'first' },
				},
				{ jobId: locked.id, attemptId: locked.attempt_id, outcome: 'succeeded' },
			]);
			await lockWaiter('the first complete to wait on the locked row');
			let repeatSettled = false;
			const repeat = store.complete([
				{
					jobId: job.id,
					attemptId: job.attempt_id,
					outcome: 'failed',
					errorCode: 'late_duplicate',
				},
			]);
			void repeat.finally(() => (repeatSettled = true));
			let otherResult: Awaited<ReturnType<typeof store.complete>> | undefined;
			void store
				.complete([{ jobId: other.id, attemptId: other.attempt_id, outcome: 'succeeded' }])
				.then((result) => (otherResult = result));

			// The stall lets the other job's call run; the repeat stays behind the first.
			const otherDone = await waitFor(() => otherResult, 'the other job to complete', 5_000);
			expect(ok(otherDone[0]).applied).toBe(true);
			expect(delta(before).stalledFlushes).toBeGreaterThanOrEqual(1);
			expect(repeatSettled).toBe(false);

			await held.rollback();
			const firstResults = await first;
			expect(firstResults.map((result) => ok(result).applied)).toEqual([true, true]);
			expect(ok((await repeat)[0])).toMatchObject({
				applied: false,
				status: 'done',
				leaseLostReason: 'job_done',
			});
			const { rows } = await pool.query(
				`SELECT status, result, error_code FROM "${schema}".jobs WHERE id = $1`,
				[job.id],
			);
			expect(rows[0]).toEqual({ status: 'done', result: { from: 'first' }, error_code: null });
		} finally {
			await held.end();
		}
	}, 30_000);

	it('one idempotency key in two merged calls: the same job for the same payload, a conflict for another', async () => {
		const queue = 'merged-keys';
		const before = stats();
		const [first, same, different] = await Promise.all([
			store.enqueue([{ queue, payload: { v: 1 }, idempotencyKey: 'shared' }]),
			store.enqueue([{ queue, payload: { v: 1 }, idempotencyKey: 'shared' }]),
			store.enqueue([{ queue, payload: { v: 2 }, idempotencyKey: 'shared' }]),
		]);
		expect(delta(before).mergedFlushes).toBe(1);
		const twins = [ok(first[0]), ok(same[0])];
		expect(twins[1].jobId).toBe(twins[0].jobId);
		expect(twins.map((result) => result.deduplicated).sort()).toEqual([false, true]);
		expect(different[0]).toBeInstanceOf(IdempotencyConflictError);
		const { rows } = await pool.query<{ count: number }>(
			`SELECT count(*)::int AS count FROM "${schema}".jobs WHERE queue = $1`,
			[queue],
		);
		expect(rows[0].count).toBe(1);
	});

	it('sequential calls are sent one by one, unmerged; a call of more than 32 rows is not merged; a flush takes at most 2,000 rows', async () => {
		const queue = 'sequential';
		const before = stats();
		for (let n = 0; n < 5; n++) ok((await store.enqueue([{ queue, payload: { n } }]))[0]);
		expect(delta(before)).toMatchObject({ flushes: 5, calls: 5, mergedFlushes: 0 });

		const beforeLarge = stats();
		const [large, ...small] = await Promise.all([
			store.enqueue(Array.from({ length: 33 }, (_, n) => ({ queue, payload: { large: n } }))),
			...Array.from({ length: 4 }, (_, n) => store.enqueue([{ queue, payload: { small: n } }])),
		]);
		// The large call goes straight to the pool; the small ones share a flush.
		expect(delta(beforeLarge)).toMatchObject({ flushes: 1, calls: 4, mergedFlushes: 1 });
		expect(large.map((result) => ok(result).jobId)).toHaveLength(33);
		for (const results of small) ok(results[0]);
		const { rows } = await pool.query<{ count: number }>(
			`SELECT count(*)::int AS count FROM "${schema}".jobs WHERE queue = $1`,
			[queue],
		);
		expect(rows[0].count).toBe(5 + 33 + 4);

		// 70 calls of 32 rows pass the 2,000 rows a flush takes: they need two flushes.
		const beforeMany = stats();
		const many = await Promise.all(
			Array.from({ length: 70 }, (_, call) =>
				store.enqueue(Array.from({ length: 32 }, (_, n) => ({ queue, payload: { call, n } }))),
			),
		);
		expect(delta(beforeMany)).toMatchObject({ flushes: 2, calls: 70, mergedFlushes: 2 });
		for (const results of many) {
			expect(results).toHaveLength(32);
			for (const result of results) ok(result);
			expect(new Set(results.map((result) => ok(result).jobId)).size).toBe(32);
		}
		const { rows: after } = await pool.query<{ count: number }>(
			`SELECT count(*)::int AS count FROM "${schema}".jobs WHERE queue = $1`,
			[queue],
		);
		expect(after[0].count).toBe(5 + 33 + 4 + 70 * 32);
	});

	it('calls through different stores over one pool share statements; coalesceCalls: false sends each alone', async () => {
		const queue = 'stores';
		await enqueueJobs(queue, 6);
		const other = new JobStore(pool, { schema });
		const before = stats();
		const leased = await Promise.all([
			store.lease({ queue, limit: 2 }),
			other.lease({ queue, limit: 2 }),
			other.lease({ queue, limit: 2 }),
		]);
		expect(delta(before)).toMatchObject({ flushes: 1, calls: 3, mergedFlushes: 1 });
		const ids = leased.flat().map((job) => job.id);
		expect(new Set(ids).size).toBe(6);
		for (const jobs of leased) expect(jobs).toHaveLength(2);

		const separate = new JobStore(pool, { schema, coalesceCalls: false });
		expect(separate.coalescingStats()).toBeNull();
		const beforeSeparate = stats();
		const results = await Promise.all(
			leased
				.flat()
				.map((job) =>
					separate.complete([{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' }]),
				),
		);
		expect(results.every(([result]) => ok(result).applied)).toBe(true);
		expect(delta(beforeSeparate)).toMatchObject({ flushes: 0, calls: 0 });
	});

	it('a completion that waits for another session completing the same attempt gets Lease Lost with job_done, the status that commit left', async () => {
		const queue = 'completed-elsewhere';
		await enqueueJobs(queue, 2);
		const jobs = await leaseEach(queue, 2);
		for (const [index, outcome] of (['succeeded', 'release'] as const).entries()) {
			const job = jobs[index];
			const elsewhere = newPool(1);
			const session = await elsewhere.connect();
			try {
				await session.query('BEGIN');
				const first = completeQuery(
					schema,
					`"${schema}"`,
					[completeRow(0, job, outcome)],
					store.callbackQueue,
				);
				const { rows } = await session.query({
					text: first.text,
					values: first.values as unknown[],
				});
				expect(rows[0].applied).toBe(true);
				const second = store.complete([
					{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' },
				]);
				await lockWaiter('the second completion to wait for the first');
				await session.query('COMMIT');
				const [result] = await second;
				expect(ok(result)).toMatchObject({
					applied: false,
					status: outcome === 'succeeded' ? 'done' : 'queued',
					leaseLostReason: outcome === 'succeeded' ? 'job_done' : 'job_queued',
				});
			} finally {
				session.release();
				await elsewhere.end();
			}
		}
	});

	it('stores with different callback queues do not share a lease statement (it writes the failure events of jobs whose last attempt expired into one callback queue); stores with the same one do', async () => {
		const queue = 'callback-queues';
		await enqueueJobs(queue, 4);
		const elsewhere = new JobStore(pool, { schema, callbackQueue: 'elsewhere_callbacks' });
		const before = stats();
		const leased = await Promise.all([
			store.lease({ queue, limit: 1 }),
			elsewhere.lease({ queue, limit: 1 }),
		]);
		expect(delta(before)).toMatchObject({ flushes: 2, calls: 2, mergedFlushes: 0 });
		expect(leased.flat()).toHaveLength(2);

		const sameQueue = new JobStore(pool, { schema, callbackQueue: store.callbackQueue });
		const beforeSame = stats();
		await Promise.all([store.lease({ queue, limit: 1 }), sameQueue.lease({ queue, limit: 1 })]);
		expect(delta(beforeSame)).toMatchObject({ flushes: 1, calls: 2, mergedFlushes: 1 });
	});
});

describe('result parsers', () => {
	it("a pool created with parsers of its own keeps them (the core's faster timestamptz parser applies only to pools without)", async () => {
		const custom = poolWithOwnTimestampParser();
		try {
			const own = new JobStore(custom, { schema });
			const queue = 'own-parsers';
			ok((await own.enqueue([{ queue, payload: {} }]))[0]);
			const [job] = await own.lease({ queue, limit: 1 });
			expect(job.lease_until).toBeInstanceOf(PoolDate);
			const [plain] = await store.lease({ queue, limit: 1 });
			expect(plain).toBeUndefined();
			ok((await store.enqueue([{ queue, payload: {} }]))[0]);
			const [other] = await store.lease({ queue, limit: 1 });
			expect(other.lease_until).toBeInstanceOf(Date);
			expect(other.lease_until).not.toBeInstanceOf(PoolDate);
		} finally {
			await custom.end();
		}
	});
});
