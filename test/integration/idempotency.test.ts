import { DurableJobsError, JobStore, type ClaimResult } from '../../src/core';
import { settleClaimsQuery } from '../../src/core/sql/idempotency';
import { newPool, ok, useTestSchema, waitFor } from '../helpers/db';

const { schema, pool, store } = useTestSchema(__filename, { poolSize: 50, migrate: true });

async function claimOne(
	input: Parameters<JobStore['claim']>[0][number],
	s = store,
): Promise<ClaimResult> {
	return ok((await s.claim([input]))[0]);
}

describe('idempotency claims', () => {
	it('a settle that waits for another process settling the same claim gets Claim Lost with the status that commit left', async () => {
		for (const [index, first] of (['completed', 'failed'] as const).entries()) {
			const key = `settled-elsewhere-${index}`;
			const claimed = await claimOne({ scope: 'settles', key, fingerprint: 'fp' });
			const elsewhere = newPool(1);
			const session = await elsewhere.connect();
			try {
				await session.query('BEGIN');
				const settleFirst = settleClaimsQuery(
					`"${schema}"`,
					[
						{
							ord: 0,
							scope: 'settles',
							key,
							claim_id: claimed.claimId,
							result: first === 'completed' ? '{"crm_id":"C-9"}' : null,
							error_message: null,
							ttl_ms: null,
						},
					],
					first,
				);
				const { rows } = await session.query({
					text: settleFirst.text,
					values: settleFirst.values as unknown[],
				});
				expect(rows[0].applied).toBe(true);
				const second = store.completeClaims([
					{ scope: 'settles', key, claimId: claimed.claimId, result: { crm_id: 'C-10' } },
				]);
				await waitFor(async () => {
					const waiting = await pool.query(
						`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
						[`%"${schema}".idempotency_keys%`],
					);
					return waiting.rows.length > 0;
				}, 'the second settle to wait for the first');
				await session.query('COMMIT');
				const [result] = await second;
				expect(ok(result)).toMatchObject({ applied: false, currentStatus: first });
			} finally {
				session.release();
				await elsewhere.end();
			}
		}
	});

	it('32 concurrent claims of one key → exactly one New; after complete → Duplicate with the stored result', async () => {
		const results = await Promise.all(
			Array.from(
				{ length: 32 },
				async () =>
					await claimOne(
						{ scope: 'orders', key: 'evt-1', fingerprint: 'fp' },
						new JobStore(pool, { schema }),
					),
			),
		);
		const winners = results.filter((result) => result.route === 'new');
		expect(winners).toHaveLength(1);
		expect(results.filter((result) => result.route === 'in_progress')).toHaveLength(31);
		expect(winners[0].replay).toBe(false);
		const [settled] = await store.completeClaims([
			{ scope: 'orders', key: 'evt-1', claimId: winners[0].claimId, result: { crm_id: 'C-1' } },
		]);
		expect(ok(settled).applied).toBe(true);
		const again = await claimOne({ scope: 'orders', key: 'evt-1', fingerprint: 'fp' });
		expect(again.route).toBe('duplicate');
		expect(again.storedResult).toEqual({ crm_id: 'C-1' });
		const { rows } = await pool.query(
			`SELECT count(*)::int AS n FROM ${schema}.idempotency_keys WHERE scope = 'orders'`,
		);
		expect(rows[0].n).toBe(1);
	});

	it('same key, different fingerprint → Conflict, nothing changed', async () => {
		const first = await claimOne({ scope: 's', key: 'k-conf', fingerprint: 'a' });
		expect(first.route).toBe('new');
		const before = (
			await pool.query(`SELECT * FROM ${schema}.idempotency_keys WHERE key = 'k-conf'`)
		).rows;
		const second = await claimOne({ scope: 's', key: 'k-conf', fingerprint: 'b' });
		expect(second.route).toBe('conflict');
		expect(
			(await pool.query(`SELECT * FROM ${schema}.idempotency_keys WHERE key = 'k-conf'`)).rows,
		).toEqual(before);
	});

	it('an expired claim is reclaimable and flagged as a replay; the old claimer can no longer settle it', async () => {
		const first = await claimOne({ scope: 's', key: 'k-exp', claimMs: 1_000 });
		expect(first.route).toBe('new');
		expect((await claimOne({ scope: 's', key: 'k-exp' })).route).toBe('in_progress');
		await pool.query(
			`UPDATE ${schema}.idempotency_keys SET claim_until = now() - interval '1 second' WHERE key = 'k-exp'`,
		);
		const second = await claimOne({ scope: 's', key: 'k-exp' });
		expect(second).toMatchObject({ route: 'new', replay: true, claims: 2 });
		expect(second.claimId).not.toBe(first.claimId);
		const [stale] = await store.completeClaims([
			{ scope: 's', key: 'k-exp', claimId: first.claimId, result: { from: 'old' } },
		]);
		expect(ok(stale)).toMatchObject({ applied: false, currentStatus: 'in_progress' });
		ok(
			(
				await store.completeClaims([
					{ scope: 's', key: 'k-exp', claimId: second.claimId, result: { from: 'new' } },
				])
			)[0],
		);
		expect((await claimOne({ scope: 's', key: 'k-exp' })).storedResult).toEqual({ from: 'new' });
	});

	it('a failed claim is reclaimable as a replay', async () => {
		const first = await claimOne({ scope: 's', key: 'k-fail' });
		ok(
			(
				await store.failClaims([
					{ scope: 's', key: 'k-fail', claimId: first.claimId, errorMessage: 'CRM down' },
				])
			)[0],
		);
		const second = await claimOne({ scope: 's', key: 'k-fail' });
		expect(second).toMatchObject({ route: 'new', replay: true, existingStatus: 'failed' });
	});

	it('after the TTL a key is new again (not a replay), even with another fingerprint', async () => {
		const first = await claimOne({ scope: 's', key: 'k-ttl', fingerprint: 'x', ttlMs: 5_000 });
		ok(
			(
				await store.completeClaims([
					{ scope: 's', key: 'k-ttl', claimId: first.claimId, result: 1 },
				])
			)[0],
		);
		await pool.query(
			`UPDATE ${schema}.idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'k-ttl'`,
		);
		const second = await claimOne({ scope: 's', key: 'k-ttl', fingerprint: 'y' });
		expect(second).toMatchObject({ route: 'new', replay: false, claims: 1 });
	});

	it('concurrent claims of a key whose TTL passed: one New, the others see the new claim, none the old result', async () => {
		for (let round = 0; round < 5; round++) {
			const key = `k-ttl-race-${round}`;
			const first = await claimOne({ scope: 's', key, fingerprint: 'x' });
			ok(
				(
					await store.completeClaims([{ scope: 's', key, claimId: first.claimId, result: 'old' }])
				)[0],
			);
			await pool.query(
				`UPDATE ${schema}.idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = $1`,
				[key],
			);
			const results = await Promise.all(
				Array.from(
					{ length: 16 },
					async () => await claimOne({ scope: 's', key, fingerprint: 'x' }),
				),
			);
			const routes = results.map((result) => result.route).sort();
			expect(routes).toEqual([...Array.from({ length: 15 }, () => 'in_progress'), 'new']);
			expect(results.every((result) => result.storedResult === null)).toBe(true);
		}
	});

	it('scopes are independent', async () => {
		expect((await claimOne({ scope: 'one', key: 'shared' })).route).toBe('new');
		expect((await claimOne({ scope: 'two', key: 'shared' })).route).toBe('new');
	});

	it('a batch with a repeated key claims it once', async () => {
		const results = (
			await store.claim([
				{ scope: 'b', key: 'dup' },
				{ scope: 'b', key: 'dup' },
				{ scope: 'b', key: 'other' },
			])
		).map(ok);
		expect(results.map((result) => result.route)).toEqual(['new', 'in_progress', 'new']);
	});

	it('a key settled twice in one call: the first settles it, the second finds it settled, as if sent after it', async () => {
		const [claimed] = (await store.claim([{ scope: 'b', key: 'settled-twice' }])).map(ok);
		const settled = (
			await store.completeClaims([
				{ scope: 'b', key: 'settled-twice', claimId: claimed.claimId, result: { first: true } },
				{ scope: 'b', key: 'settled-twice', claimId: claimed.claimId, result: { second: true } },
			])
		).map(ok);
		expect(settled.map((result) => [result.applied, result.currentStatus])).toEqual([
			[true, 'completed'],
			[false, 'completed'],
		]);
		const [again] = (await store.claim([{ scope: 'b', key: 'settled-twice' }])).map(ok);
		expect(again.storedResult).toEqual({ first: true });
	});

	it('late-event guard: an older version → Stale, its claim given back, state not rolled back', async () => {
		const guard = (version: number, state: string) => ({
			entityKey: 'order-1',
			version,
			state,
			stateOrder: ['pending', 'paid', 'refunded'],
		});
		const newer = await claimOne({ scope: 'payments', key: 'evt-v2', guard: guard(2, 'paid') });
		expect(newer.route).toBe('new');
		const older = await claimOne({ scope: 'payments', key: 'evt-v1', guard: guard(1, 'pending') });
		expect(older.route).toBe('stale');
		expect(older.current).toMatchObject({ version: '2', state: 'paid' });
		const { rows } = await pool.query(
			`SELECT version::text, state FROM ${schema}.entity_versions WHERE entity_key = 'order-1'`,
		);
		expect(rows).toEqual([{ version: '2', state: 'paid' }]);
		const keys = await pool.query(
			`SELECT key FROM ${schema}.idempotency_keys WHERE scope = 'payments' ORDER BY key`,
		);
		expect(keys.rows.map((row) => row.key)).toEqual(['evt-v2']);
		// A newer version whose state moves backwards is stale too.
		expect(
			(await claimOne({ scope: 'payments', key: 'evt-v3', guard: guard(3, 'pending') })).route,
		).toBe('stale');
		expect(
			(await claimOne({ scope: 'payments', key: 'evt-v4', guard: guard(4, 'refunded') })).route,
		).toBe('new');
	});

	it('repeats of a key or an entity in one batch are answered as if sent one after another', async () => {
		// A key stored as completed with one payload: the batch's first item has another payload
		// (Conflict), its second the stored one (Duplicate, not the first item's Conflict).
		const stored = await claimOne({ scope: 'seq', key: 'k', fingerprint: 'F1' });
		await store.completeClaims([
			{ scope: 'seq', key: 'k', claimId: stored.claimId!, result: { done: 1 } },
		]);
		const keyed = (
			await store.claim([
				{ scope: 'seq', key: 'k', fingerprint: 'F2' },
				{ scope: 'seq', key: 'k', fingerprint: 'F1' },
			])
		).map(ok);
		expect(keyed.map((result) => result.route)).toEqual(['conflict', 'duplicate']);
		expect(keyed[1].storedResult).toEqual({ done: 1 });

		// Two versions of one entity: both apply, in order.
		const versions = (
			await store.claim([
				{ scope: 'seq', key: 'v1', guard: { entityKey: 'order-9', version: 1 } },
				{ scope: 'seq', key: 'v2', guard: { entityKey: 'order-9', version: 2 } },
			])
		).map(ok);
		expect(versions.map((result) => result.route)).toEqual(['new', 'new']);
		// The entity is the guard's: two claim scopes sharing a guard scope are one entity.
		const shared = (
			await store.claim([
				{
					scope: 'seq-a',
					key: 'k1',
					guard: { scope: 'shared', entityKey: 'order-11', version: 1 },
				},
				{
					scope: 'seq-b',
					key: 'k2',
					guard: { scope: 'shared', entityKey: 'order-11', version: 2 },
				},
			])
		).map(ok);
		expect(shared.map((result) => result.route)).toEqual(['new', 'new']);

		// paid, then a later pending with the order pending < paid: paid applies, pending is
		// stale, and the entity stays paid.
		const order = ['pending', 'paid'];
		const states = (
			await store.claim([
				{
					scope: 'seq',
					key: 'paid',
					guard: {
						entityKey: 'order-10',
						occurredAt: '2026-01-01T10:00:00Z',
						state: 'paid',
						stateOrder: order,
					},
				},
				{
					scope: 'seq',
					key: 'pending',
					guard: {
						entityKey: 'order-10',
						occurredAt: '2026-01-01T11:00:00Z',
						state: 'pending',
						stateOrder: order,
					},
				},
			])
		).map(ok);
		expect(states.map((result) => result.route)).toEqual(['new', 'stale']);
		const { rows } = await pool.query(
			`SELECT entity_key, version::text, state FROM ${schema}.entity_versions
			WHERE scope = 'seq' ORDER BY entity_key`,
		);
		expect(rows).toEqual([
			{ entity_key: 'order-10', version: null, state: 'paid' },
			{ entity_key: 'order-9', version: '2', state: null },
		]);
	});

	it('late-event guard by occurred_at under concurrency: the newest event wins, older ones are stale', async () => {
		const base = Date.parse('2026-01-01T00:00:00Z');
		const results = await Promise.all(
			Array.from(
				{ length: 10 },
				async (_, n) =>
					await claimOne(
						{
							scope: 'ship',
							key: `evt-${n}`,
							guard: { entityKey: 'parcel-9', occurredAt: new Date(base + n * 1000) },
						},
						new JobStore(pool, { schema }),
					),
			),
		);
		expect(results[9].route).toBe('new');
		const { rows } = await pool.query(
			`SELECT occurred_at FROM ${schema}.entity_versions WHERE entity_key = 'parcel-9'`,
		);
		expect(rows[0].occurred_at.getTime()).toBe(base + 9000);
		const late = await claimOne({
			scope: 'ship',
			key: 'evt-late',
			guard: { entityKey: 'parcel-9', occurredAt: new Date(base) },
		});
		expect(late.route).toBe('stale');
	});

	it('a stale event takes nothing: a failed claim it would have taken over keeps its error, an expired one its holder', async () => {
		const keyRow = async (key: string) =>
			(
				await pool.query(
					`SELECT status, error_message, claims, claim_id FROM ${schema}.idempotency_keys WHERE scope = 'restore' AND key = $1`,
					[key],
				)
			).rows[0];
		const guard = (version: number) => ({ entityKey: 'invoice-3', version });
		// A failed claim of version 5, then version 9 applied by another event.
		const failed = await claimOne({ scope: 'restore', key: 'evt-5', guard: guard(5) });
		ok(
			(
				await store.failClaims([
					{ scope: 'restore', key: 'evt-5', claimId: failed.claimId, errorMessage: 'CRM down' },
				])
			)[0],
		);
		expect((await claimOne({ scope: 'restore', key: 'evt-9', guard: guard(9) })).route).toBe('new');
		// Its retry is stale: the failed claim stays as it was.
		const before = await keyRow('evt-5');
		expect((await claimOne({ scope: 'restore', key: 'evt-5', guard: guard(5) })).route).toBe(
			'stale',
		);
		expect(await keyRow('evt-5')).toEqual(before);
		expect(before).toMatchObject({ status: 'failed', error_message: 'CRM down', claims: 1 });

		// A claim of version 10 whose timeout passed while its holder still works, and version
		// 11 applied meanwhile: the retry of version 10 is stale and leaves the holder its claim.
		const slow = await claimOne({
			scope: 'restore',
			key: 'evt-10',
			claimMs: 1_000,
			guard: guard(10),
		});
		expect(slow.route).toBe('new');
		await pool.query(
			`UPDATE ${schema}.idempotency_keys SET claim_until = now() - interval '1 second' WHERE scope = 'restore' AND key = 'evt-10'`,
		);
		await pool.query(
			`UPDATE ${schema}.entity_versions SET version = 11 WHERE scope = 'restore' AND entity_key = 'invoice-3'`,
		);
		expect((await claimOne({ scope: 'restore', key: 'evt-10', guard: guard(10) })).route).toBe(
			'stale',
		);
		// The holder still owns its claim and completes it.
		const [completed] = await store.completeClaims([
			{ scope: 'restore', key: 'evt-10', claimId: slow.claimId, result: { ok: true } },
		]);
		expect(ok(completed)).toMatchObject({ applied: true, currentStatus: 'completed' });
	});

	it('the same event retried after its claim failed is processed again (not Stale, not Duplicate)', async () => {
		const first = await claimOne({
			scope: 'crm',
			key: 'evt-a',
			guard: { entityKey: 'lead-1', version: 5 },
		});
		ok((await store.failClaims([{ scope: 'crm', key: 'evt-a', claimId: first.claimId }]))[0]);
		const retry = await claimOne({
			scope: 'crm',
			key: 'evt-a',
			guard: { entityKey: 'lead-1', version: 5 },
		});
		expect(retry).toMatchObject({ route: 'new', replay: true });
	});

	it('rejects bad keys and guard input per item, naming the field', async () => {
		const results = await store.claim([
			{ scope: 's', key: '' },
			{ scope: 's', key: 'k'.repeat(256) },
			{ scope: '', key: 'fine' },
			{ scope: 's', key: 'g1', guard: { entityKey: 'e' } },
			{ scope: 's', key: 'g2', guard: { entityKey: 'e', version: 'v1' } },
			{ scope: 's', key: 'g3', guard: { entityKey: 'e', state: 'odd', stateOrder: ['a', 'b'] } },
		]);
		expect(results.map((result) => (result as DurableJobsError).field)).toEqual([
			'key',
			'key',
			'scope',
			'version',
			'version',
			'state',
		]);
		const { rows } = await pool.query(
			`SELECT count(*)::int AS n FROM ${schema}.idempotency_keys WHERE key IN ('fine', 'g1', 'g2', 'g3')`,
		);
		expect(rows[0].n).toBe(0);
	});
});
