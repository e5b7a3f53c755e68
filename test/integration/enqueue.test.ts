import pg from 'pg';

import {
	DurableJobsError,
	IdempotencyConflictError,
	JobStore,
	hashToken,
	type EnqueueInput,
	type EnqueueResult,
} from '../../src/core';
import { integerArray, textArray } from '../../src/core/sql/arrays';
import {
	PoolDate,
	crossedWritersDeadlock,
	databaseUrl,
	ok,
	poolWithOwnTimestampParser,
	useTestSchema,
} from '../helpers/db';

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

	it('two processes enqueueing the same keys in crossed orders (a deadlock for PostgreSQL) both get every winner', async () => {
		// Two pools: each has its own coalescer, as two n8n processes do.
		const other = new pg.Pool({ connectionString: databaseUrl(), max: 2 });
		try {
			const otherStore = new JobStore(other, { schema });
			for (const allOrNothing of [false, true]) {
				const keys = Array.from({ length: 40 }, (_, n) => `crossed-${allOrNothing}-${n}`);
				const batch = (order: string[]) =>
					order.map((key) => ({ queue: 'crossed', payload: { key }, idempotencyKey: key }));
				const [forward, backward] = await crossedWritersDeadlock(
					pool,
					schema,
					{ queue: 'crossed', key: keys[20] },
					async () =>
						await Promise.all([
							store.enqueue(batch(keys), { allOrNothing }),
							otherStore.enqueue(batch([...keys].reverse()), { allOrNothing }),
						]),
				);
				expect(backward.map((result) => ok(result).jobId).reverse()).toEqual(
					forward.map((result) => ok(result).jobId),
				);
			}
			const { rows } = await pool.query(
				`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'crossed'`,
			);
			expect(rows[0].n).toBe(80);
		} finally {
			await other.end();
		}
	}, 60_000);

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
		expect((result as DurableJobsError).fix).toBe(
			"Send a smaller payload (store large documents elsewhere and pass a reference), or raise the store's maxPayloadBytes option (now 1000)",
		);
		const { rows } = await pool.query(
			`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'big'`,
		);
		expect(rows[0].n).toBe(0);
	});
});

/** Each job's stored run_at in Unix milliseconds (exact, not through a Date parser), by id. */
async function storedRunAts(ids: string[]): Promise<Map<string, number>> {
	const { rows } = await pool.query<{ id: string; ms: string }>(
		`SELECT id, floor(extract(epoch FROM run_at) * 1000)::int8::text AS ms
		FROM ${schema}.jobs WHERE id = ANY($1::uuid[])`,
		[ids],
	);
	return new Map(rows.map((row) => [row.id, Number(row.ms)]));
}

async function expectStored(items: EnqueueInput[], results: EnqueueResult[]): Promise<void> {
	const stored = await storedRunAts(results.map((result) => result.jobId));
	const { rows } = await pool.query<{
		id: string;
		status: string;
		payload: unknown;
		status_token_hash: Buffer;
	}>(
		`SELECT id, status, payload, status_token_hash FROM ${schema}.jobs WHERE id = ANY($1::uuid[])`,
		[results.map((result) => result.jobId)],
	);
	const byId = new Map(rows.map((row) => [row.id, row]));
	results.forEach((result, index) => {
		const row = byId.get(result.jobId);
		expect(row, `job ${index} stored`).toBeDefined();
		expect(result.runAt, `job ${index}`).toBeInstanceOf(Date);
		expect(result.runAt.getTime(), `job ${index} run_at`).toBe(stored.get(result.jobId));
		expect(result.status).toBe(row!.status);
		expect(row!.payload, `job ${index} payload`).toEqual(items[index].payload);
		expect(Buffer.compare(row!.status_token_hash, hashToken(result.statusToken!))).toBe(0);
	});
}

describe('enqueue: what a job gets back is what was stored', () => {
	const runAtItems = (queue: string): EnqueueInput[] => [
		{ queue, payload: { n: 0 } },
		{ queue, payload: { n: 1 } },
		{ queue, payload: { n: 2 }, delayMs: 0 },
		{ queue, payload: { n: 3 }, delayMs: 1 },
		{ queue, payload: { n: 4 }, delayMs: 999 },
		{ queue, payload: { n: 5 }, delayMs: 1 },
		{ queue, payload: { n: 6 }, delayMs: 61_001 },
		{ queue, payload: { n: 7 }, delayMs: 365 * 24 * 3600_000 },
		{ queue, payload: { n: 8 }, runAt: new Date(Date.now() + 1234) },
		{ queue, payload: { n: 9 }, runAt: '2030-01-31T12:00:00.123Z' },
		{ queue, payload: { n: 10 }, runAt: new Date('1900-06-15T10:20:30.456Z') },
		{ queue, payload: { n: 11 }, runAt: new Date('1969-12-31T23:59:59.999Z') },
		{ queue, payload: { n: 12 }, runAt: '2030-01-31T12:00:00.123Z', delayMs: 5000 },
		{ queue, payload: null },
		{ queue, payload: 'text "quoted" \\ back\\slash {braces}, commas' },
		{ queue, payload: [1, { nested: [null, true] }, 'ü€😀'] },
	];

	it.each([
		['UTC', 'UTC'],
		['a half-hour offset', 'America/St_Johns'],
		['an offset with seconds in 1900 (+00:19:32)', 'Europe/Amsterdam'],
	])(
		'runAt equals the stored run_at to the millisecond for default, delayMs and runAt, in a session at %s',
		async (_name, timeZone) => {
			const zoned = new pg.Pool({
				connectionString: databaseUrl(),
				max: 2,
				options: `-c TimeZone=${timeZone}`,
			});
			try {
				const zonedStore = new JobStore(zoned, { schema });
				for (const withKeys of [false, true]) {
					const items = runAtItems(`run-at-${timeZone.replace('/', '.')}-${withKeys}`).map(
						(item, n) => (withKeys ? { ...item, idempotencyKey: `key-${n}` } : item),
					);
					const results = (await zonedStore.enqueue(items)).map(ok);
					await expectStored(items, results);
					expect(results.map((result) => result.status)).toEqual(items.map(() => 'queued'));
					// Items with the same delay have the same run_at, each in a Date of its own.
					expect(results[1].runAt.getTime()).toBe(results[0].runAt.getTime());
					expect(results[1].runAt).not.toBe(results[0].runAt);
					expect(results[5].runAt.getTime()).toBe(results[3].runAt.getTime());
					expect(results[3].runAt.getTime()).toBe(results[0].runAt.getTime() + 1);
					expect(results[12].runAt.getTime()).toBe(Date.parse('2030-01-31T12:00:00.123Z'));
				}
				// One job per call, each with the one-row statement.
				const lone = new JobStore(zoned, { schema, coalesceCalls: false });
				const items = runAtItems(`run-at-alone-${timeZone.replace('/', '.')}`);
				const results: EnqueueResult[] = [];
				for (const item of items) results.push(ok((await lone.enqueue([item]))[0]));
				await expectStored(items, results);
				expect(results[12].runAt.getTime()).toBe(Date.parse('2030-01-31T12:00:00.123Z'));
			} finally {
				await zoned.end();
			}
		},
	);

	it.each([
		['without a key', false],
		['with an idempotency key', true],
	])(
		'a job enqueued alone (%s) is stored as the same job in a batch, every field and runAt included',
		async (_name, withKeys) => {
			// A call of one job has a statement of its own (one VALUES row).
			const lone = new JobStore(pool, { schema, coalesceCalls: false });
			const template = runAtItems('');
			const tag = withKeys ? 'keys' : 'plain';
			const items = (queue: string): EnqueueInput[] =>
				template.map((item, n) => ({
					...item,
					queue,
					priority: n % 3 === 0 ? undefined : n - 8,
					maxAttempts: n % 4 === 0 ? undefined : n + 1,
					orderingKey: n % 2 === 0 ? undefined : `order "${n}"\\`,
					callbackUrl: n % 5 === 0 ? `https://example.com/done?n=${n}` : undefined,
					correlationId: n % 3 === 1 ? `corr,${n}` : undefined,
					idempotencyKey: withKeys ? `key "${n}"` : undefined,
				}));
			const batchItems = items(`alone-vs-batch-${tag}-b`);
			const batch = (await store.enqueue(batchItems)).map(ok);
			const aloneItems = items(`alone-vs-batch-${tag}-a`);
			const alone: EnqueueResult[] = [];
			for (const item of aloneItems) {
				const own = await lone.enqueue([item]);
				expect(own).toHaveLength(1);
				alone.push(ok(own[0]));
			}
			await expectStored(aloneItems, alone);
			const columns = async (results: EnqueueResult[]) => {
				const { rows } = await pool.query<Record<string, unknown>>(
					`SELECT id, status, payload, priority, max_attempts, ordering_key, callback_url,
						correlation_id, attempts, payload_fingerprint,
						idempotency_key IS NOT NULL AS has_key,
						extract(epoch FROM run_at - created_at) * 1000 AS delay_ms,
						extract(epoch FROM run_at) * 1000 AS run_at_ms
					FROM ${schema}.jobs WHERE id = ANY($1::uuid[])`,
					[results.map((result) => result.jobId)],
				);
				const byId = new Map(rows.map(({ id, ...row }) => [id, row]));
				return results.map((result, n) => {
					const row = byId.get(result.jobId)!;
					// A delay runs from the statement's now(); an explicit runAt is absolute.
					const explicitRunAt = aloneItems[n].runAt !== undefined;
					const { delay_ms, run_at_ms, ...rest } = row;
					return { ...rest, when: explicitRunAt ? Number(run_at_ms) : Number(delay_ms) };
				});
			};
			expect(await columns(alone)).toEqual(await columns(batch));
			expect(alone.map((result) => result.status)).toEqual(alone.map(() => 'queued'));
			expect(alone.map((result) => result.deduplicated)).toEqual(alone.map(() => false));
			if (!withKeys) return;
			// Sent again alone: the same job and token back, each in one statement (the key's
			// job is committed, so the INSERT's own lookup finds it), or a conflict for another
			// payload.
			const counted = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
			let statements = 0;
			const query = counted.query.bind(counted) as (...args: unknown[]) => unknown;
			(counted as unknown as { query: (...args: unknown[]) => unknown }).query = (
				...args: unknown[]
			) => {
				statements++;
				return query(...args);
			};
			const repeat = new JobStore(counted, { schema, coalesceCalls: false });
			try {
				ok((await repeat.enqueue([aloneItems[0]]))[0]);
				statements = 0;
				for (const [n, item] of aloneItems.entries()) {
					const again = ok((await repeat.enqueue([item]))[0]);
					expect(again.jobId).toBe(alone[n].jobId);
				}
				expect(statements).toBe(aloneItems.length);
			} finally {
				await counted.end();
			}
			for (const [n, item] of aloneItems.entries()) {
				const again = ok((await lone.enqueue([item]))[0]);
				expect(again).toMatchObject({
					jobId: alone[n].jobId,
					statusToken: alone[n].statusToken,
					deduplicated: true,
					conflict: false,
				});
				expect(again.runAt.getTime()).toBe(alone[n].runAt.getTime());
			}
			const [changed] = await lone.enqueue([{ ...aloneItems[0], payload: { other: true } }]);
			expect(changed).toBeInstanceOf(IdempotencyConflictError);
			expect((changed as IdempotencyConflictError).existingJobId).toBe(alone[0].jobId);
			const { rows } = await pool.query<{ count: string }>(
				`SELECT count(*) FROM ${schema}.jobs WHERE queue = $1`,
				[`alone-vs-batch-${tag}-a`],
			);
			expect(Number(rows[0].count)).toBe(aloneItems.length);
		},
	);

	it('a batch of 1,000 jobs without keys: ids, tokens, payloads and runAt as stored, in input order', async () => {
		const queue = 'thousand';
		const items: EnqueueInput[] = Array.from({ length: 1000 }, (_, n) => ({
			queue,
			payload: { n },
			delayMs: n % 3 === 0 ? undefined : n,
			priority: n % 7,
			orderingKey: n % 5 === 0 ? `o-${n % 2}` : undefined,
			correlationId: n % 11 === 0 ? `c"${n}\\` : undefined,
		}));
		const results = (await store.enqueue(items)).map(ok);
		expect(new Set(results.map((result) => result.jobId)).size).toBe(1000);
		expect(new Set(results.map((result) => result.statusToken)).size).toBe(1000);
		await expectStored(items, results);
		const { rows } = await pool.query<{
			id: string;
			priority: number;
			ordering_key: string | null;
			correlation_id: string | null;
		}>(
			`SELECT id, priority, ordering_key, correlation_id FROM ${schema}.jobs WHERE queue = $1 ORDER BY seq`,
			[queue],
		);
		expect(rows.map((row) => row.id)).toEqual(results.map((result) => result.jobId));
		expect(rows.map((row) => row.priority)).toEqual(items.map((item) => item.priority));
		expect(rows.map((row) => row.ordering_key)).toEqual(
			items.map((item) => item.orderingKey ?? null),
		);
		expect(rows.map((row) => row.correlation_id)).toEqual(
			items.map((item) => item.correlationId ?? null),
		);
	});

	it('concurrent single-job enqueues merged into one statement each get their own job, token and runAt', async () => {
		const queue = 'merged-singles';
		const before = store.coalescingStats()!;
		const items: EnqueueInput[] = Array.from({ length: 40 }, (_, n) => ({
			queue,
			payload: { n },
			...(n % 4 === 1 ? { delayMs: n * 10 } : {}),
			...(n % 4 === 2 ? { runAt: new Date(Date.now() + n * 1000 + 7) } : {}),
			...(n % 4 === 3 ? { correlationId: `caller-${n}` } : {}),
		}));
		const perCaller = await Promise.all(items.map(async (item) => await store.enqueue([item])));
		const after = store.coalescingStats()!;
		expect(after.mergedFlushes - before.mergedFlushes).toBeGreaterThanOrEqual(1);
		expect(after.flushes - before.flushes).toBeLessThan(items.length);
		const results = perCaller.map((own) => {
			expect(own).toHaveLength(1);
			return ok(own[0]);
		});
		expect(new Set(results.map((result) => result.jobId)).size).toBe(items.length);
		await expectStored(items, results);
		const { rows } = await pool.query<{ id: string; correlation_id: string | null }>(
			`SELECT id, correlation_id FROM ${schema}.jobs WHERE queue = $1`,
			[queue],
		);
		const correlation = new Map(rows.map((row) => [row.id, row.correlation_id]));
		results.forEach((result, n) =>
			expect(correlation.get(result.jobId)).toBe(items[n].correlationId ?? null),
		);
	});

	it("runAt goes through a pool's own timestamptz parser, as every stored timestamp does", async () => {
		const custom = poolWithOwnTimestampParser();
		try {
			const own = new JobStore(custom, { schema });
			const results = (
				await own.enqueue([
					{ queue: 'own-parser', payload: {} },
					{ queue: 'own-parser', payload: {}, delayMs: 5 },
				])
			).map(ok);
			for (const result of results) expect(result.runAt).toBeInstanceOf(PoolDate);
			const stored = await storedRunAts(results.map((result) => result.jobId));
			for (const result of results) expect(result.runAt.getTime()).toBe(stored.get(result.jobId));
		} finally {
			await custom.end();
		}
	});
});

describe('array parameters', () => {
	it('text and integers reach PostgreSQL unchanged, nulls included', async () => {
		const texts = [
			'plain',
			'NULL',
			'null',
			'',
			' spaced ',
			'"quoted"',
			'back\\slash\\',
			'{braces},commas',
			'ü€😀',
			null,
			'\\"',
		];
		const { rows } = await pool.query<{ value: string | null }>(
			'SELECT value FROM unnest($1::text[]) WITH ORDINALITY AS x(value, ord) ORDER BY ord',
			[textArray(texts)],
		);
		expect(rows.map((row) => row.value)).toEqual(texts);
		const numbers = [0, -1, 2_147_483_647, null, 365 * 24 * 3600_000];
		const { rows: integers } = await pool.query<{ value: string | null }>(
			'SELECT value::text FROM unnest($1::bigint[]) WITH ORDINALITY AS x(value, ord) ORDER BY ord',
			[integerArray(numbers)],
		);
		expect(integers.map((row) => (row.value === null ? null : Number(row.value)))).toEqual(numbers);
		expect(textArray([null, null])).toBe('{}');
		expect(() => integerArray([1.5])).toThrow(TypeError);
	});
});
