import { createHash } from 'node:crypto';

import pg from 'pg';

import { DurableJobsError, EventIdReusedError, JobStore } from '../../src/core';
import { crossedWritersDeadlock, databaseUrl, ok, useTestSchema } from '../helpers/db';

const { schema, pool, store } = useTestSchema(__filename, {
	poolSize: 20,
	migrate: true,
	cleanUp: async (pool) => await pool.query(`DROP TABLE IF EXISTS public.${schema}_orders`),
});

beforeAll(async () => {
	await pool.query(`DROP TABLE IF EXISTS public.${schema}_orders`);
	await pool.query(
		`CREATE TABLE public.${schema}_orders (id text PRIMARY KEY, amount int NOT NULL CHECK (amount > 0))`,
	);
});

const orders = `public.${schema}_orders`;

describe('outbox write', () => {
	it('two processes writing the same events in crossed orders (a deadlock for PostgreSQL) both get every stored event', async () => {
		const other = new pg.Pool({ connectionString: databaseUrl(), max: 2 });
		try {
			const otherStore = new JobStore(other, { schema });
			// Events alone go in one INSERT; events with companion SQL each in a savepoint.
			for (const companion of [false, true]) {
				const ids = Array.from({ length: 40 }, (_, n) => `crossed-${companion}-${n}`);
				const events = (order: string[]) =>
					order.map((eventId) => ({
						eventId,
						eventType: 'crossed',
						payload: { eventId },
						...(companion ? { companionSql: 'SELECT $1::text', companionParams: [eventId] } : {}),
					}));
				const [forward, backward] = await crossedWritersDeadlock(
					pool,
					schema,
					{ queue: 'outbox', key: ids[20] },
					async () =>
						await Promise.all([
							store.writeOutbox(events(ids)),
							otherStore.writeOutbox(events([...ids].reverse())),
						]),
				);
				expect(backward.map((result) => ok(result).jobId).reverse()).toEqual(
					forward.map((result) => ok(result).jobId),
				);
			}
		} finally {
			await other.end();
		}
	}, 60_000);

	it('companion SQL succeeding → business row and event committed together', async () => {
		const [result] = await store.writeOutbox([
			{
				eventId: 'order-1.created',
				eventType: 'order.created',
				payload: { id: 'order-1', amount: 5 },
				tenantId: 't1',
				correlationId: 'c1',
				orderingKey: 'order-1',
				destination: 'https://crm.example/hooks',
				companionSql: `INSERT INTO ${orders} (id, amount) VALUES ($1, $2) RETURNING id`,
				companionParams: ['order-1', 5],
			},
		]);
		const written = ok(result);
		expect(written).toMatchObject({
			eventId: 'order-1.created',
			queue: 'outbox',
			status: 'queued',
			deduplicated: false,
			companionRowCount: 1,
			companionRows: [{ id: 'order-1' }],
		});
		const event = (
			await pool.query(
				`SELECT payload, ordering_key, correlation_id FROM ${schema}.jobs WHERE id = $1`,
				[written.jobId],
			)
		).rows[0];
		expect(event.payload).toMatchObject({
			event_id: 'order-1.created',
			event_type: 'order.created',
			event_version: 1,
			tenant_id: 't1',
			correlation_id: 'c1',
			ordering_key: 'order-1',
			destination: 'https://crm.example/hooks',
			payload: { id: 'order-1', amount: 5 },
			source: null,
		});
		expect(event.payload.occurred_at).toMatch(/^\d{4}-\d\d-\d\dT/);
		expect(event.ordering_key).toBe('order-1');
		expect((await pool.query(`SELECT amount FROM ${orders} WHERE id = 'order-1'`)).rows).toEqual([
			{ amount: 5 },
		]);
	});

	it('companion SQL failing → no event and no business row', async () => {
		const before = (await pool.query(`SELECT count(*)::int AS n FROM ${schema}.jobs`)).rows[0].n;
		const [result] = await store.writeOutbox([
			{
				eventId: 'order-2.created',
				eventType: 'order.created',
				payload: { id: 'order-2' },
				companionSql: `INSERT INTO ${orders} (id, amount) VALUES ($1, $2)`,
				companionParams: ['order-2', -1],
			},
		]);
		expect(result).toBeInstanceOf(DurableJobsError);
		expect((result as DurableJobsError).field).toBe('companionSql');
		expect((await pool.query(`SELECT count(*)::int AS n FROM ${schema}.jobs`)).rows[0].n).toBe(
			before,
		);
		expect(
			(await pool.query(`SELECT count(*)::int AS n FROM ${orders} WHERE id = 'order-2'`)).rows[0].n,
		).toBe(0);
	});

	it('per item: one failing companion does not stop the others (savepoints); allOrNothing rolls back all', async () => {
		const results = await store.writeOutbox([
			{
				eventId: 'o3',
				eventType: 'order.created',
				payload: {},
				companionSql: `INSERT INTO ${orders} VALUES ($1, $2)`,
				companionParams: ['order-3', 3],
			},
			{
				eventId: 'o4',
				eventType: 'order.created',
				payload: {},
				companionSql: `INSERT INTO ${orders} VALUES ($1, $2)`,
				companionParams: ['order-4', 0],
			},
			{
				eventId: 'o5',
				eventType: 'order.created',
				payload: {},
				companionSql: `INSERT INTO ${orders} VALUES ($1, $2)`,
				companionParams: ['order-5', 5],
			},
		]);
		expect(ok(results[0]).deduplicated).toBe(false);
		expect(results[1]).toBeInstanceOf(DurableJobsError);
		expect(ok(results[2]).deduplicated).toBe(false);
		expect(
			(
				await pool.query(
					`SELECT id FROM ${orders} WHERE id IN ('order-3','order-4','order-5') ORDER BY id`,
				)
			).rows.map((row) => row.id),
		).toEqual(['order-3', 'order-5']);

		await expect(
			store.writeOutbox(
				[
					{
						eventId: 'o6',
						eventType: 'order.created',
						payload: {},
						companionSql: `INSERT INTO ${orders} VALUES ($1, $2)`,
						companionParams: ['order-6', 6],
					},
					{
						eventId: 'o7',
						eventType: 'order.created',
						payload: {},
						companionSql: `INSERT INTO ${orders} VALUES ($1, $2)`,
						companionParams: ['order-7', 0],
					},
				],
				{ allOrNothing: true },
			),
		).rejects.toMatchObject({ code: 'companion_sql_failed' });
		expect(
			(
				await pool.query(
					`SELECT count(*)::int AS n FROM ${orders} WHERE id IN ('order-6', 'order-7')`,
				)
			).rows[0].n,
		).toBe(0);
		expect(
			(
				await pool.query(
					`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE idempotency_key IN ('o6', 'o7')`,
				)
			).rows[0].n,
		).toBe(0);
	});

	it('a duplicate event id is accepted once', async () => {
		const first = ok(
			(await store.writeOutbox([{ eventId: 'dup-evt', eventType: 'x', payload: { a: 1 } }]))[0],
		);
		const second = ok(
			(await store.writeOutbox([{ eventId: 'dup-evt', eventType: 'x', payload: { a: 1 } }]))[0],
		);
		expect(second.jobId).toBe(first.jobId);
		expect(second.deduplicated).toBe(true);
		expect(
			(
				await pool.query(
					`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE idempotency_key = 'dup-evt'`,
				)
			).rows[0].n,
		).toBe(1);
	});

	it('a repeated event with companion SQL is accepted once and its SQL is not run again', async () => {
		const event = (amount: number) => ({
			eventId: 'paid-1',
			eventType: 'order.paid',
			payload: { id: 'paid-1', amount: 10 },
			// Not idempotent on purpose: run twice, it would add the amount twice.
			companionSql: `INSERT INTO ${orders} (id, amount) VALUES ($1, $2)
				ON CONFLICT (id) DO UPDATE SET amount = ${orders}.amount + EXCLUDED.amount`,
			companionParams: ['paid-1', amount],
		});
		const first = ok((await store.writeOutbox([event(10)]))[0]);
		expect(first).toMatchObject({ deduplicated: false, companionRowCount: 1 });
		for (const allOrNothing of [false, true]) {
			const again = ok((await store.writeOutbox([event(10)], { allOrNothing }))[0]);
			expect(again).toMatchObject({
				jobId: first.jobId,
				deduplicated: true,
				companionRowCount: null,
				companionRows: [],
			});
		}
		const { rows } = await pool.query(`SELECT amount FROM ${orders} WHERE id = 'paid-1'`);
		expect(rows).toEqual([{ amount: 10 }]);
	});

	it('items are written in input order: of two items with one event id, the earlier wins, whether it has SQL or not', async () => {
		const results = await store.writeOutbox([
			{ eventId: 'order-first-plain', eventType: 'probe', payload: { n: 1 } },
			{
				eventId: 'order-first-plain',
				eventType: 'probe',
				payload: { n: 2 },
				companionSql: `INSERT INTO ${orders} (id, amount) VALUES ('order-second', 1)`,
			},
			{
				eventId: 'order-first-sql',
				eventType: 'probe',
				payload: { n: 3 },
				companionSql: `INSERT INTO ${orders} (id, amount) VALUES ('order-third', 1)`,
			},
			{ eventId: 'order-first-sql', eventType: 'probe', payload: { n: 4 } },
		]);
		expect(ok(results[0]).deduplicated).toBe(false);
		expect(results[1]).toMatchObject({ code: 'event_id_reused' });
		expect(ok(results[2]).companionRowCount).toBe(1);
		expect(results[3]).toMatchObject({ code: 'event_id_reused' });
		const stored = await pool.query(
			`SELECT idempotency_key AS id, (payload->'payload'->>'n')::int AS n FROM ${schema}.jobs
			WHERE idempotency_key LIKE 'order-first-%' ORDER BY 1`,
		);
		expect(stored.rows).toEqual([
			{ id: 'order-first-plain', n: 1 },
			{ id: 'order-first-sql', n: 3 },
		]);
		const written = await pool.query(
			`SELECT id FROM ${orders} WHERE id IN ('order-second', 'order-third') ORDER BY 1`,
		);
		expect(written.rows).toEqual([{ id: 'order-third' }]);
	});

	it('SQL to run in the same transaction is one statement that cannot end the transaction: a COMMIT or several statements fail the item and nothing of it is written', async () => {
		const cases: Array<[string, string, RegExp]> = [
			[
				`BEGIN; INSERT INTO ${orders} (id, amount) VALUES ('tx-1', 1); COMMIT;`,
				'invalid_input',
				/BEGIN controls the transaction/,
			],
			[`/* mine */ -- note\n COMMIT`, 'invalid_input', /COMMIT controls the transaction/],
			[`;COMMIT`, 'invalid_input', /COMMIT controls the transaction/],
			[`/* a /* nested */ comment */ commit`, 'invalid_input', /COMMIT controls the transaction/],
			[`-- note\rbegin`, 'invalid_input', /BEGIN controls the transaction/],
			[
				`INSERT INTO ${orders} (id, amount) VALUES ('tx-2', 1); COMMIT`,
				'companion_sql_failed',
				/multiple commands/,
			],
			[
				`INSERT INTO ${orders} (id, amount) VALUES ('tx-3', 1); SELECT 1`,
				'companion_sql_failed',
				/multiple commands/,
			],
		];
		for (const [sql, code, message] of cases) {
			const eventId = `one-statement-${code}-${cases.findIndex(([text]) => text === sql)}`;
			const [result] = await store.writeOutbox([
				{ eventId, eventType: 'probe', payload: { sql }, companionSql: sql },
			]);
			expect(result).toBeInstanceOf(DurableJobsError);
			expect(result).toMatchObject({ code, field: 'companionSql' });
			expect((result as DurableJobsError).message).toMatch(message);
			const written = await pool.query(
				`SELECT (SELECT count(*)::int FROM ${orders} WHERE id LIKE 'tx-%') AS orders,
					(SELECT count(*)::int FROM ${schema}.jobs WHERE idempotency_key = $1) AS events`,
				[eventId],
			);
			expect(written.rows[0]).toEqual({ orders: 0, events: 0 });
		}
		// One statement without parameters still runs, with the event.
		const [single] = await store.writeOutbox([
			{
				eventId: 'one-statement-ok',
				eventType: 'probe',
				payload: {},
				companionSql: `INSERT INTO ${orders} (id, amount) VALUES ('tx-ok', 1)`,
			},
		]);
		expect(ok(single).companionRowCount).toBe(1);
	});

	it('one event id and payload for another event type or destination is another event: event_id_reused, its SQL undone, not a silent repeat', async () => {
		const payload = { event_id: 'e-shared', order_id: 7 };
		const first = ok(
			(await store.writeOutbox([{ eventId: 'e-shared', eventType: 'order.paid', payload }]))[0],
		);
		const results = await store.writeOutbox([
			{
				eventId: 'e-shared',
				eventType: 'invoice.requested',
				payload,
				companionSql: `INSERT INTO ${orders} (id, amount) VALUES ('invoice-for-e-shared', 1)`,
			},
			{
				eventId: 'e-shared',
				eventType: 'order.paid',
				payload,
				destination: 'https://b.example/hook',
			},
			{ eventId: 'e-shared', eventType: 'order.paid', payload },
		]);
		for (const conflicted of [results[0], results[1]])
			expect(conflicted).toMatchObject({ code: 'event_id_reused', existingJobId: first.jobId });
		expect(ok(results[2])).toMatchObject({ deduplicated: true, jobId: first.jobId });
		expect(
			(
				await pool.query(
					`SELECT count(*)::int AS n FROM ${orders} WHERE id = 'invoice-for-e-shared'`,
				)
			).rows[0].n,
		).toBe(0);

		// The stored fingerprint is the payload's alone, as older versions of the package write
		// and compare it: they and this one answer each other's retries alike.
		const stored = await pool.query(
			`SELECT payload_fingerprint FROM ${schema}.jobs WHERE id = $1`,
			[first.jobId],
		);
		expect(stored.rows[0].payload_fingerprint).toBe(
			createHash('sha256').update('{"event_id":"e-shared","order_id":7}').digest('hex'),
		);
	});

	it('one event id with another payload fails as event_id_reused and writes nothing of its item', async () => {
		const first = ok(
			(
				await store.writeOutbox([
					{
						eventId: 'customer.updated:7',
						eventType: 'customer.updated',
						payload: { id: 7, email: 'a@x' },
					},
				])
			)[0],
		);
		const results = await store.writeOutbox([
			{
				eventId: 'customer.updated:7',
				eventType: 'customer.updated',
				payload: { id: 7, email: 'b@x' },
				companionSql: `INSERT INTO ${orders} (id, amount) VALUES ('reused-with-sql', 1)`,
			},
			{
				eventId: 'customer.updated:7',
				eventType: 'customer.updated',
				payload: { id: 7, email: 'c@x' },
			},
			{
				eventId: 'customer.updated:8',
				eventType: 'customer.updated',
				payload: { id: 8, email: 'd@x' },
			},
		]);
		for (const conflicted of [results[0], results[1]]) {
			expect(conflicted).toBeInstanceOf(EventIdReusedError);
			expect(conflicted).toMatchObject({
				code: 'event_id_reused',
				field: 'eventId',
				httpStatus: 422,
				existingJobId: first.jobId,
			});
		}
		expect(ok(results[2]).deduplicated).toBe(false);
		expect(
			(await pool.query(`SELECT count(*)::int AS n FROM ${orders} WHERE id = 'reused-with-sql'`))
				.rows[0].n,
		).toBe(0);
		const stored = await pool.query(
			`SELECT payload->'payload'->>'email' AS email FROM ${schema}.jobs WHERE idempotency_key = 'customer.updated:7'`,
		);
		expect(stored.rows).toEqual([{ email: 'a@x' }]);

		await expect(
			store.writeOutbox(
				[
					{ eventId: 'customer.updated:9', eventType: 'customer.updated', payload: { id: 9 } },
					{
						eventId: 'customer.updated:7',
						eventType: 'customer.updated',
						payload: { id: 7, email: 'e@x' },
					},
				],
				{ allOrNothing: true },
			),
		).rejects.toMatchObject({ code: 'event_id_reused', itemPosition: 1 });
		expect(
			(
				await pool.query(
					`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE idempotency_key = 'customer.updated:9'`,
				)
			).rows[0].n,
		).toBe(0);
	});

	it('concurrent writers of one new event with companion SQL: one business write, one event, the others deduplicated', async () => {
		const writers = 8;
		const results = await Promise.all(
			Array.from({ length: writers }, async () =>
				ok(
					(
						await store.writeOutbox([
							{
								eventId: 'race-1',
								eventType: 'order.paid',
								payload: { id: 'race-1' },
								companionSql: `INSERT INTO ${orders} (id, amount) VALUES ('race-1', 1)
									ON CONFLICT (id) DO UPDATE SET amount = ${orders}.amount + 1`,
							},
						])
					)[0],
				),
			),
		);
		expect(results.filter((result) => !result.deduplicated)).toHaveLength(1);
		expect(new Set(results.map((result) => result.jobId)).size).toBe(1);
		const { rows } = await pool.query(`SELECT amount FROM ${orders} WHERE id = 'race-1'`);
		expect(rows).toEqual([{ amount: 1 }]);
	});

	it('one event id twice in one call, and concurrent writers of one event without companion SQL: repeats are deduplicated, another payload is event_id_reused', async () => {
		const same = await store.writeOutbox([
			{ eventId: 'twice-1', eventType: 'x', payload: { a: 1 } },
			{ eventId: 'twice-1', eventType: 'x', payload: { a: 1 } },
			{ eventId: 'twice-1', eventType: 'x', payload: { a: 2 } },
		]);
		const [first, repeat] = [ok(same[0]), ok(same[1])];
		expect(first.deduplicated).toBe(false);
		expect(repeat).toMatchObject({ jobId: first.jobId, deduplicated: true });
		expect(same[2]).toMatchObject({ code: 'event_id_reused', existingJobId: first.jobId });

		const writers = 8;
		const concurrent = await Promise.all(
			Array.from({ length: writers }, async () =>
				ok(
					(await store.writeOutbox([{ eventId: 'race-2', eventType: 'x', payload: { b: 1 } }]))[0],
				),
			),
		);
		expect(concurrent.filter((result) => !result.deduplicated)).toHaveLength(1);
		expect(new Set(concurrent.map((result) => result.jobId)).size).toBe(1);
		expect(
			(
				await pool.query(
					`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE idempotency_key IN ('twice-1', 'race-2')`,
				)
			).rows[0].n,
		).toBe(2);
	});

	it('SQL injection text in event fields is stored as data', async () => {
		const evil = `'); DROP TABLE ${schema}.jobs; --`;
		const written = ok(
			(
				await store.writeOutbox([
					{
						eventId: evil,
						eventType: evil,
						payload: { note: evil },
						source: evil,
						tenantId: evil,
						correlationId: evil,
						orderingKey: evil,
						destination: evil,
					},
				])
			)[0],
		);
		const row = (
			await pool.query(`SELECT payload FROM ${schema}.jobs WHERE id = $1`, [written.jobId])
		).rows[0];
		expect(row.payload.event_id).toBe(evil);
		expect(row.payload.payload.note).toBe(evil);
	});

	it('outbox events lease, retry and dead-letter like any job', async () => {
		ok(
			(
				await store.writeOutbox([
					{ eventId: 'relay-1', eventType: 'x', payload: {}, queue: 'relay-test', maxAttempts: 1 },
				])
			)[0],
		);
		const [job] = await store.lease({ queue: 'relay-test' });
		expect((job.payload as { event_id: string }).event_id).toBe('relay-1');
		const done = ok(
			(
				await store.complete([
					{ jobId: job.id, attemptId: job.attempt_id, outcome: 'retry', errorCode: 'http_500' },
				])
			)[0],
		);
		expect(done.status).toBe('failed');
	});
});

describe('job-finished callbacks', () => {
	it('a finished job with a callback URL writes its event in the same statement, once per finish', async () => {
		const [enqueued] = await store.enqueue([
			{
				queue: 'cb',
				payload: { doc: 1 },
				callbackUrl: 'https://partner.example/hooks/jobs',
				correlationId: 'corr-cb',
			},
		]);
		const jobId = ok(enqueued).jobId;
		const [job] = await store.lease({ queue: 'cb' });
		const result = ok(
			(
				await store.complete([
					{ jobId, attemptId: job.attempt_id, outcome: 'succeeded', result: { crm_id: 'C9' } },
				])
			)[0],
		);
		expect(result.callbackEventId).toBe(`job_${jobId}_done_1`);
		const events = (
			await pool.query(
				`SELECT queue, idempotency_key, payload, correlation_id FROM ${schema}.jobs WHERE queue = 'callbacks'`,
			)
		).rows;
		expect(events).toHaveLength(1);
		expect(events[0]).toMatchObject({
			idempotency_key: `job_${jobId}_done_1`,
			correlation_id: 'corr-cb',
		});
		expect(events[0].payload).toMatchObject({
			event_type: 'job.succeeded',
			destination: 'https://partner.example/hooks/jobs',
			payload: { job_id: jobId, status: 'done', result: { crm_id: 'C9' } },
		});
	});

	it('a retry writes no callback; a lease-lost complete writes none either', async () => {
		const [enqueued] = await store.enqueue([
			{ queue: 'cb2', payload: {}, callbackUrl: 'https://partner.example/x', maxAttempts: 3 },
		]);
		const [job] = await store.lease({ queue: 'cb2' });
		ok((await store.complete([{ jobId: job.id, attemptId: job.attempt_id, outcome: 'retry' }]))[0]);
		ok(
			(
				await store.complete([{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' }])
			)[0],
		);
		const events = (
			await pool.query(
				`SELECT count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'callbacks' AND payload->'payload'->>'job_id' = $1`,
				[ok(enqueued).jobId],
			)
		).rows[0];
		expect(events.n).toBe(0);
	});
});
