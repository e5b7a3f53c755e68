/**
 * Batches whose payloads or results together are too large for one statement are sent as
 * several statements in one transaction (MAX_CHARS_PER_STATEMENT): they commit all or nothing,
 * and every item is answered as it would be by one statement.
 */
import { IdempotencyConflictError, type EnqueueInput } from '../../src/core';
import { MAX_CHARS_PER_STATEMENT } from '../../src/core/statementSize';
import { BEGIN, COMMIT, ROLLBACK } from '../../src/core/sql/transaction';
import { ok, statementsSentDuring, useTestSchema } from '../helpers/db';

const { schema, pool, store } = useTestSchema(__filename, { migrate: true });

/** A payload of about `chars` characters (the default size limit is 1 MiB). */
function bulky(index: number, chars = 1_000_000): { index: number; text: string } {
	return { index, text: String(index % 10).repeat(chars) };
}

/** Enough items of about 1 MB for three statements. */
const ITEMS_FOR_THREE_STATEMENTS = Math.ceil((2.5 * MAX_CHARS_PER_STATEMENT) / 1_000_000);

beforeAll(async () => {
	// The status-token secret is read once per process; it is not part of the batches below.
	ok((await store.enqueue([{ queue: 'warm-up', payload: {} }]))[0]);
});

async function countIn(queue: string): Promise<number> {
	const { rows } = await pool.query<{ n: number }>(
		`SELECT count(*)::int AS n FROM "${schema}".jobs WHERE queue = $1`,
		[queue],
	);
	return rows[0].n;
}

function inserts(statements: string[]): string[] {
	return statements.filter((text) => /^(WITH|INSERT)\b[\s\S]*INSERT INTO "[^"]+"\.jobs/.test(text));
}

describe('a batch larger than one statement', () => {
	it('without keys: three INSERTs in one transaction, every job stored with its own payload', async () => {
		const items: EnqueueInput[] = Array.from(
			{ length: ITEMS_FOR_THREE_STATEMENTS },
			(_, index) => ({
				queue: 'large-plain',
				payload: bulky(index),
			}),
		);
		const { value: results, statements } = await statementsSentDuring(() => store.enqueue(items));
		expect(inserts(statements)).toHaveLength(3);
		expect(statements[0]).toBe(BEGIN);
		expect(statements.at(-1)).toBe(COMMIT);
		const ids = results.map((result) => ok(result).jobId);
		expect(new Set(ids).size).toBe(items.length);
		const { rows } = await pool.query<{ id: string; index: number; length: number }>(
			`SELECT id, (payload->>'index')::int AS index, length(payload->>'text') AS length
			 FROM "${schema}".jobs WHERE queue = 'large-plain'`,
		);
		expect(rows).toHaveLength(items.length);
		for (const row of rows) {
			expect(ids[row.index]).toBe(row.id);
			expect(row.length).toBe(1_000_000);
		}
	});

	it('a call of few rows (20 of 1 MB) is not merged with others but split: two INSERTs in one transaction', async () => {
		const items: EnqueueInput[] = Array.from({ length: 20 }, (_, index) => ({
			queue: 'large-few-rows',
			payload: bulky(index),
		}));
		const before = store.coalescingStats()!;
		const { value: results, statements } = await statementsSentDuring(() => store.enqueue(items));
		expect(store.coalescingStats()!.calls).toBe(before.calls);
		const firstInsert = statements.findIndex((text) => inserts([text]).length === 1);
		expect(statements.slice(firstInsert - 1, firstInsert + 3)).toEqual([
			BEGIN,
			expect.stringContaining('INSERT INTO'),
			expect.stringContaining('INSERT INTO'),
			COMMIT,
		]);
		results.forEach((result) => ok(result));
		expect(await countIn('large-few-rows')).toBe(20);
	});

	it('payloads past what one string can hold (600 of 1 MB) are stored; it was "RangeError: Invalid string length"', async () => {
		const payload = { text: 'x'.repeat(1_000_000) };
		const results = await store.enqueue(
			Array.from({ length: 600 }, () => ({ queue: 'large-past-string', payload })),
		);
		expect(results.every((result) => !(result instanceof Error))).toBe(true);
		expect(await countIn('large-past-string')).toBe(600);
		await pool.query(`DELETE FROM "${schema}".jobs WHERE queue = 'large-past-string'`);
	}, 120_000);

	it('with keys, all or nothing: a conflict in the last statement rolls back the first two', async () => {
		const queue = 'large-keyed-atomic';
		ok((await store.enqueue([{ queue, payload: { other: true }, idempotencyKey: 'taken' }]))[0]);
		const items: EnqueueInput[] = Array.from(
			{ length: ITEMS_FOR_THREE_STATEMENTS },
			(_, index) => ({
				queue,
				payload: bulky(index),
				idempotencyKey: index === ITEMS_FOR_THREE_STATEMENTS - 1 ? 'taken' : `key-${index}`,
			}),
		);
		let thrown: unknown;
		const { statements } = await statementsSentDuring(async () => {
			try {
				await store.enqueue(items, { allOrNothing: true });
			} catch (error) {
				thrown = error;
			}
		});
		expect(thrown).toBeInstanceOf(IdempotencyConflictError);
		expect((thrown as IdempotencyConflictError).itemPosition).toBe(ITEMS_FOR_THREE_STATEMENTS - 1);
		expect(inserts(statements)).toHaveLength(3);
		expect(statements.at(-1)).toBe(ROLLBACK);
		expect(await countIn(queue)).toBe(1);
	});

	it('with keys, item by item: the conflicting item fails, every other is stored', async () => {
		const queue = 'large-keyed-items';
		const existing = ok(
			(await store.enqueue([{ queue, payload: { other: true }, idempotencyKey: 'taken' }]))[0],
		);
		const conflicting = 30;
		const items: EnqueueInput[] = Array.from(
			{ length: ITEMS_FOR_THREE_STATEMENTS },
			(_, index) => ({
				queue,
				payload: bulky(index),
				idempotencyKey: index === conflicting ? 'taken' : `key-${index}`,
			}),
		);
		const { value: results, statements } = await statementsSentDuring(() => store.enqueue(items));
		expect(inserts(statements)).toHaveLength(3);
		const conflict = results[conflicting];
		expect(conflict).toBeInstanceOf(IdempotencyConflictError);
		expect((conflict as IdempotencyConflictError).existingJobId).toBe(existing.jobId);
		results.forEach((result, index) => {
			if (index !== conflicting) expect(ok(result).deduplicated).toBe(false);
		});
		expect(await countIn(queue)).toBe(ITEMS_FOR_THREE_STATEMENTS);
	});

	it("one key in the first and the last statement: the later item gets the earlier one's job, as in one statement", async () => {
		const queue = 'large-repeated-key';
		const last = ITEMS_FOR_THREE_STATEMENTS - 1;
		const items: EnqueueInput[] = Array.from(
			{ length: ITEMS_FOR_THREE_STATEMENTS },
			(_, index) => ({
				queue,
				payload: index === last ? bulky(0) : bulky(index),
				idempotencyKey: index === last ? 'key-0' : `key-${index}`,
			}),
		);
		const { value, statements } = await statementsSentDuring(() =>
			store.enqueue(items, { allOrNothing: true }),
		);
		expect(inserts(statements)).toHaveLength(3);
		const results = value.map(ok);
		expect(results[last].jobId).toBe(results[0].jobId);
		expect(results[last].deduplicated).toBe(true);
		expect(results[0].deduplicated).toBe(false);
		expect(await countIn(queue)).toBe(ITEMS_FOR_THREE_STATEMENTS - 1);
	});

	it('completions with large results: three statements, every result stored', async () => {
		const queue = 'large-results';
		const count = ITEMS_FOR_THREE_STATEMENTS;
		await store.enqueue(
			Array.from({ length: count }, (_, index) => ({ queue, payload: { index } })),
		);
		const leased = await store.lease({ queue, limit: count, leaseMs: 60_000 });
		expect(leased).toHaveLength(count);
		const { value: results, statements } = await statementsSentDuring(() =>
			store.complete(
				leased.map((job, index) => ({
					jobId: job.id,
					attemptId: job.attempt_id,
					outcome: 'succeeded' as const,
					result: bulky(index),
				})),
			),
		);
		expect(results.map((result) => ok(result).applied)).toEqual(leased.map(() => true));
		expect(
			statements.filter((text) => /\bUPDATE\b/.test(text) && /"\.jobs\b/.test(text)).length,
		).toBe(3);
		const { rows } = await pool.query<{ n: number }>(
			`SELECT count(*)::int AS n FROM "${schema}".jobs
			 WHERE queue = $1 AND status = 'done' AND length(result->>'text') = 1000000`,
			[queue],
		);
		expect(rows[0].n).toBe(count);
	});

	it('outbox events with large payloads: stored in one transaction, a repeated event id deduplicated', async () => {
		const count = ITEMS_FOR_THREE_STATEMENTS;
		const events = Array.from({ length: count }, (_, index) => ({
			eventId: index === count - 1 ? 'event-0' : `event-${index}`,
			eventType: 'bulky',
			queue: 'large-outbox',
			payload: index === count - 1 ? bulky(0) : bulky(index),
		}));
		const { value: results, statements } = await statementsSentDuring(() =>
			store.writeOutbox(events),
		);
		const written = results.map(ok);
		expect(written[count - 1].deduplicated).toBe(true);
		expect(written[count - 1].jobId).toBe(written[0].jobId);
		expect(inserts(statements)).toHaveLength(3);
		expect(await countIn('large-outbox')).toBe(count - 1);
	});

	it('settled idempotency keys with large results: three statements, every result stored', async () => {
		const count = ITEMS_FOR_THREE_STATEMENTS;
		const claims = (
			await store.claim(
				Array.from({ length: count }, (_, index) => ({ scope: 'large', key: `k-${index}` })),
			)
		).map(ok);
		const { value: settled, statements } = await statementsSentDuring(() =>
			store.completeClaims(
				claims.map((claim, index) => ({
					scope: 'large',
					key: `k-${index}`,
					claimId: claim.claimId,
					result: bulky(index),
				})),
			),
		);
		expect(settled.map((result) => ok(result).applied)).toEqual(claims.map(() => true));
		expect(statements.filter((text) => /idempotency_keys/.test(text)).length).toBe(3);
		const again = (await store.claim([{ scope: 'large', key: `k-${count - 1}` }])).map(ok)[0];
		expect(again.route).toBe('duplicate');
		expect((again.storedResult as { index: number; text: string }).text).toHaveLength(1_000_000);
	});

	it('concurrent calls are merged only while their payloads fit one statement', async () => {
		const before = store.coalescingStats()!;
		const call = (group: string, chars: number) =>
			store.enqueue(
				Array.from({ length: 10 }, (_, index) => ({
					queue: 'large-merged',
					payload: { group, ...bulky(index, chars) },
				})),
			);
		// Four calls of 10 MB each: no two fit one statement, so each is a flush of its own.
		const large = await Promise.all(['a', 'b', 'c', 'd'].map((group) => call(group, 1_000_000)));
		const afterLarge = store.coalescingStats()!;
		// Four calls of 10 kB each: one flush.
		const small = await Promise.all(['e', 'f', 'g', 'h'].map((group) => call(group, 1_000)));
		const afterSmall = store.coalescingStats()!;
		for (const results of [...large, ...small]) results.forEach((result) => ok(result));
		expect(afterLarge.calls - before.calls).toBe(4);
		expect(afterLarge.flushes - before.flushes).toBe(4);
		expect(afterSmall.flushes - afterLarge.flushes).toBe(1);
		expect(afterSmall.largestFlush).toBeGreaterThanOrEqual(4);
		expect(await countIn('large-merged')).toBe(80);
	});
});
