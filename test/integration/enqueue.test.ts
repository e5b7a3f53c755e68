import { DurableJobsError, IdempotencyConflictError, JobStore, hashToken } from '../../src/core';
import { ok, useTestSchema } from '../helpers/db';

const { schema, pool, store } = useTestSchema(__filename, { poolSize: 80, migrate: true });

describe('enqueue', () => {
	it('inserts one job per item in one statement and returns ids, tokens and status', async () => {
		const results = await store.enqueue([
			{ queue: 'docs', payload: { n: 1 } },
			{
				queue: 'docs',
				payload: { n: 2 },
				priority: 5,
				maxAttempts: 3,
				orderingKey: 'customer-1',
				correlationId: 'corr-1',
			},
		]);
		const [first, second] = results.map(ok);
		expect(first.jobId).not.toBe(second.jobId);
		expect(first.status).toBe('queued');
		expect(first.deduplicated).toBe(false);
		expect(first.statusToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
		const { rows } = await pool.query(
			`SELECT id, payload, priority, max_attempts, ordering_key, correlation_id, status_token_hash FROM ${schema}.jobs WHERE id = ANY($1::uuid[]) ORDER BY seq`,
			[[first.jobId, second.jobId]],
		);
		expect(rows.map((row) => row.payload)).toEqual([{ n: 1 }, { n: 2 }]);
		expect(rows[1]).toMatchObject({
			priority: 5,
			max_attempts: 3,
			ordering_key: 'customer-1',
			correlation_id: 'corr-1',
		});
		// Only the hash of the token is stored.
		expect(Buffer.compare(rows[0].status_token_hash, hashToken(first.statusToken!))).toBe(0);
	});

	it('ids are time-ordered UUIDs (v7)', async () => {
		const results = (
			await store.enqueue(
				Array.from({ length: 20 }, (_, n) => ({ queue: 'ordered', payload: { n } })),
			)
		).map(ok);
		const ids = results.map((result) => result.jobId);
		expect(ids.every((id) => id[14] === '7')).toBe(true);
		expect([...ids].sort()).toEqual(ids);
	});

	it('64 concurrent enqueues with one key give exactly one row and every caller the same id', async () => {
		const payload = { document: 'contract.pdf', customer: 42 };
		const stores = Array.from({ length: 64 }, () => new JobStore(pool, { schema }));
		const results = await Promise.all(
			stores.map(async (s) =>
				ok((await s.enqueue([{ queue: 'race', payload, idempotencyKey: 'key-64' }]))[0]),
			),
		);
		const ids = new Set(results.map((result) => result.jobId));
		expect(ids.size).toBe(1);
		expect(results.filter((result) => !result.deduplicated)).toHaveLength(1);
		// Every caller presented the key and payload, so every caller can follow the job.
		expect(new Set(results.map((result) => result.statusToken)).size).toBe(1);
		const { rows } = await pool.query(
			`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'race' AND idempotency_key = 'key-64'`,
		);
		expect(rows[0].n).toBe(1);
	});

	it('same key with the same payload (any key order) returns the existing job, deduplicated', async () => {
		const first = ok(
			(
				await store.enqueue([
					{ queue: 'dedupe', payload: { a: 1, b: [1, 2] }, idempotencyKey: 'k1' },
				])
			)[0],
		);
		const again = ok(
			(
				await store.enqueue([
					{ queue: 'dedupe', payload: { b: [1, 2], a: 1 }, idempotencyKey: 'k1' },
				])
			)[0],
		);
		expect(again.jobId).toBe(first.jobId);
		expect(again.deduplicated).toBe(true);
		expect(again.statusToken).toBe(first.statusToken);
	});

	it('same key with a different payload is a conflict and changes nothing', async () => {
		const first = ok(
			(
				await store.enqueue([
					{ queue: 'conflict', payload: { v: 1 }, idempotencyKey: 'k-conflict' },
				])
			)[0],
		);
		const before = await pool.query(`SELECT * FROM ${schema}.jobs WHERE queue = 'conflict'`);
		const [result] = await store.enqueue([
			{ queue: 'conflict', payload: { v: 2 }, idempotencyKey: 'k-conflict' },
		]);
		expect(result).toBeInstanceOf(IdempotencyConflictError);
		expect((result as IdempotencyConflictError).httpStatus).toBe(422);
		expect((result as IdempotencyConflictError).existingJobId).toBe(first.jobId);
		const after = await pool.query(`SELECT * FROM ${schema}.jobs WHERE queue = 'conflict'`);
		expect(after.rows).toEqual(before.rows);
	});

	it('concurrent same-key enqueues with different payloads: one wins, the rest conflict, one row', async () => {
		const results = await Promise.all(
			Array.from(
				{ length: 16 },
				async (_, n) =>
					(
						await new JobStore(pool, { schema }).enqueue([
							{ queue: 'race2', payload: { n }, idempotencyKey: 'k' },
						])
					)[0],
			),
		);
		const winners = results.filter((result) => !(result instanceof DurableJobsError));
		expect(winners).toHaveLength(1);
		expect(results.filter((result) => result instanceof IdempotencyConflictError)).toHaveLength(15);
		const { rows } = await pool.query(
			`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'race2'`,
		);
		expect(rows[0].n).toBe(1);
	});

	it('a repeated key inside one batch yields one job for both items', async () => {
		const results = (
			await store.enqueue([
				{ queue: 'batchdup', payload: { x: 1 }, idempotencyKey: 'same' },
				{ queue: 'batchdup', payload: { x: 1 }, idempotencyKey: 'same' },
			])
		).map(ok);
		expect(results[0].jobId).toBe(results[1].jobId);
		expect(results[1].deduplicated).toBe(true);
	});

	it('allOrNothing rolls back the whole batch when one item conflicts', async () => {
		ok((await store.enqueue([{ queue: 'atomic', payload: { v: 1 }, idempotencyKey: 'taken' }]))[0]);
		await expect(
			store.enqueue(
				[
					{ queue: 'atomic', payload: { v: 9 }, idempotencyKey: 'fresh' },
					{ queue: 'atomic', payload: { v: 2 }, idempotencyKey: 'taken' },
				],
				{ allOrNothing: true },
			),
		).rejects.toBeInstanceOf(IdempotencyConflictError);
		const { rows } = await pool.query(
			`SELECT idempotency_key FROM ${schema}.jobs WHERE queue = 'atomic'`,
		);
		expect(rows.map((row) => row.idempotency_key)).toEqual(['taken']);
	});

	it('run_at and delay schedule the job in the future', async () => {
		const runAt = new Date(Date.now() + 3600_000);
		const [a, b] = (
			await store.enqueue([
				{ queue: 'later', payload: {}, runAt },
				{ queue: 'later', payload: {}, delayMs: 60_000 },
			])
		).map(ok);
		expect(a.runAt.getTime()).toBe(runAt.getTime());
		expect(b.runAt.getTime()).toBeGreaterThan(Date.now() + 50_000);
		expect(await store.lease({ queue: 'later', limit: 10 })).toHaveLength(0);
	});

	it('bad items are rejected with the field named, and the good items of the batch still go in', async () => {
		const results = await store.enqueue([
			{ queue: 'bad queue name!', payload: {} },
			{ queue: 'fine', payload: {}, idempotencyKey: 'x'.repeat(256) },
			{ queue: 'fine', payload: {}, idempotencyKey: '   ' },
			{ queue: 'fine', payload: {}, idempotencyKey: 'tab\tkey' },
			{ queue: 'fine', payload: {}, maxAttempts: 0 },
			{ queue: 'fine', payload: {}, runAt: 'not a date' },
			{ queue: 'fine', payload: {}, callbackUrl: 'ftp://example.com' },
			{ queue: 'fine', payload: undefined },
			{ queue: 'fine', payload: { ok: true } },
		]);
		const fields = results.slice(0, 8).map((result) => (result as DurableJobsError).field);
		expect(fields).toEqual([
			'queue',
			'idempotencyKey',
			'idempotencyKey',
			'idempotencyKey',
			'maxAttempts',
			'runAt',
			'callbackUrl',
			'payload',
		]);
		for (const result of results.slice(0, 8)) {
			expect(result).toBeInstanceOf(DurableJobsError);
			expect((result as DurableJobsError).fix).toBeTruthy();
			expect((result as DurableJobsError).httpStatus).toBe(400);
		}
		expect(ok(results[8]).status).toBe('queued');
		const { rows } = await pool.query(
			`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'fine'`,
		);
		expect(rows[0].n).toBe(1);
	});

	it('payloads over the configured limit are rejected before any SQL', async () => {
		const small = new JobStore(pool, { schema, maxPayloadBytes: 1000 });
		const [result] = await small.enqueue([{ queue: 'big', payload: { text: 'x'.repeat(2000) } }]);
		expect(result).toBeInstanceOf(DurableJobsError);
		expect((result as DurableJobsError).message).toMatch(
			/payload: is \d+ bytes; the limit is 1000/,
		);
		const { rows } = await pool.query(
			`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'big'`,
		);
		expect(rows[0].n).toBe(0);
	});
});
