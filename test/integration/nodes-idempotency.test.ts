import { NodeOperationError, type IDataObject, type INodeExecutionData } from 'n8n-workflow';

import { fingerprint } from '../../src/core';
import { IdempotencyCheck } from '../../nodes/IdempotencyCheck/IdempotencyCheck.node';
import { tableSnapshot, useTestSchema } from '../helpers/db';
import { nodeRunner, webhookItem } from '../helpers/n8n-context';

const { schema, pool } = useTestSchema(__filename, { closeCachedPools: true });
const nodes = nodeRunner(schema);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const claimParameters = { scope: 'payments', key: '={{ $json.event_id }}' };

async function claim(items: IDataObject[], parameters: IDataObject = claimParameters) {
	return await nodes.run(new IdempotencyCheck(), { items, parameters });
}

async function keyRow(scope: string, key: string) {
	const { rows } = await pool.query(
		`SELECT status, result, claim_id, claims, error_message FROM "${schema}".idempotency_keys WHERE scope = $1 AND key = $2`,
		[scope, key],
	);
	return rows[0];
}

function idem(item: INodeExecutionData): IDataObject {
	return item.json.idempotency as IDataObject;
}

describe('Idempotency Check: Claim routing', () => {
	let winner: INodeExecutionData;

	it('16 concurrent executions with one key: exactly one item on New, the others on In Progress', async () => {
		const event = { event_id: 'evt-1', amount: 5 };
		const results = await Promise.all(Array.from({ length: 16 }, async () => await claim([event])));
		expect(results[0].outputNames).toEqual(['New', 'Duplicate', 'In Progress', 'Conflict']);
		const routes = results.map(
			(result) => Object.entries(result.routing()).find(([, indexes]) => indexes.length > 0)![0],
		);
		expect(routes.filter((route) => route === 'New')).toHaveLength(1);
		expect(routes.filter((route) => route === 'In Progress')).toHaveLength(15);
		winner = results.find((result) => result.output('New').length === 1)!.output('New')[0];
		expect(winner.pairedItem).toEqual({ item: 0 });
		// The item passes through, with the claim attached.
		expect(winner.json).toMatchObject({ event_id: 'evt-1', amount: 5 });
		expect(idem(winner)).toMatchObject({
			scope: 'payments',
			key: 'evt-1',
			route: 'new',
			replay: false,
			claims: 1,
			stored_result: null,
		});
		expect(idem(winner).claim_id).toMatch(UUID);
		expect(Date.parse(String(idem(winner).claim_until))).toBeGreaterThan(Date.now() + 290_000);
		const losers = results.flatMap((result) => result.output('In Progress'));
		expect(
			losers.every((item) => idem(item).claim_id === null && idem(item).route === 'in_progress'),
		).toBe(true);
		expect(await keyRow('payments', 'evt-1')).toMatchObject({
			status: 'in_progress',
			claim_id: idem(winner).claim_id,
			claims: 1,
		});
	});

	it('Complete stores the result; a later delivery of the event goes to Duplicate carrying it', async () => {
		const settled = await nodes.run(new IdempotencyCheck(), {
			items: [{ ...winner.json, charge_id: 'ch_1' }],
			parameters: {
				operation: 'complete',
				scope: 'payments',
				result: '={{ { charged: true, charge_id: $json.charge_id } }}',
			},
		});
		expect(settled.outputNames).toEqual(['Settled', 'Claim Lost']);
		expect(settled.output('Claim Lost')).toEqual([]);
		const [done] = settled.output('Settled');
		expect(done.pairedItem).toEqual({ item: 0 });
		expect(idem(done)).toMatchObject({
			key: 'evt-1',
			claim_id: idem(winner).claim_id,
			status: 'completed',
			settled: true,
		});
		expect(await keyRow('payments', 'evt-1')).toMatchObject({
			status: 'completed',
			result: { charged: true, charge_id: 'ch_1' },
		});

		const again = await claim([{ event_id: 'evt-1', amount: 5 }]);
		expect(again.routing()).toEqual({ New: [], Duplicate: [0], 'In Progress': [], Conflict: [] });
		expect(idem(again.output('Duplicate')[0])).toMatchObject({
			route: 'duplicate',
			stored_result: { charged: true, charge_id: 'ch_1' },
			claim_id: null,
		});
	});

	it('the same key with a different payload goes to Conflict', async () => {
		const conflict = await claim([{ event_id: 'evt-1', amount: 6 }]);
		expect(conflict.routing()).toEqual({
			New: [],
			Duplicate: [],
			'In Progress': [],
			Conflict: [0],
		});
		expect(idem(conflict.output('Conflict')[0])).toMatchObject({
			route: 'conflict',
			stored_result: null,
		});
		// The stored claim and its result are untouched.
		expect(await keyRow('payments', 'evt-1')).toMatchObject({
			status: 'completed',
			result: { charged: true, charge_id: 'ch_1' },
		});
	});

	it('a settle with a claim id that is not the current one routes to Claim Lost and changes nothing', async () => {
		const before = await tableSnapshot(pool, schema);
		const lost = await nodes.run(new IdempotencyCheck(), {
			items: [{ idempotency: { key: 'evt-1', claim_id: '0190aaaa-0000-7000-8000-000000000000' } }],
			parameters: { operation: 'fail', scope: 'payments', errorMessage: 'late' },
		});
		expect(lost.routing()).toEqual({ Settled: [], 'Claim Lost': [0] });
		expect(idem(lost.output('Claim Lost')[0])).toMatchObject({
			settled: false,
			status: 'completed',
		});
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	it('Fail / Release marks the claim failed, so the retried event is New again as a replay', async () => {
		const [claimed] = (await claim([{ event_id: 'evt-2', amount: 1 }])).output('New');
		const failed = await nodes.run(new IdempotencyCheck(), {
			items: [claimed],
			parameters: { operation: 'fail', scope: 'payments', errorMessage: 'CRM down' },
		});
		expect(failed.routing()).toEqual({ Settled: [0], 'Claim Lost': [] });
		expect(await keyRow('payments', 'evt-2')).toMatchObject({
			status: 'failed',
			error_message: 'CRM down',
		});
		const retried = await claim([{ event_id: 'evt-2', amount: 1 }]);
		expect(retried.routing()).toEqual({ New: [0], Duplicate: [], 'In Progress': [], Conflict: [] });
		expect(idem(retried.output('New')[0])).toMatchObject({ replay: true, claims: 2 });
		expect(idem(retried.output('New')[0]).claim_id).not.toBe(idem(claimed).claim_id);
	});

	it('one execution with repeated keys: the first is New, a repeat In Progress, a repeat with another payload Conflict', async () => {
		const result = await claim([
			{ event_id: 'evt-3', amount: 1 },
			{ event_id: 'evt-3', amount: 1 },
			{ event_id: 'evt-4', amount: 1 },
			{ event_id: 'evt-3', amount: 2 },
		]);
		expect(result.routing()).toEqual({
			New: [0, 2],
			Duplicate: [],
			'In Progress': [1],
			Conflict: [3],
		});
	});

	it('keys derived from chosen fields or from a hash of the webhook body', async () => {
		const request = webhookItem({ source: 'shop', id: 42, status: 'paid' });
		const byFields = await claim([request], {
			scope: 'derived',
			keySource: 'fields',
			keyFields: 'body.source, body.id, body.status',
		});
		expect(idem(byFields.output('New')[0]).key).toBe('shop:42:paid');
		const byHash = await claim([request], { scope: 'derived', keySource: 'payloadHash' });
		expect(idem(byHash.output('New')[0]).key).toBe(
			`sha256:${fingerprint({ source: 'shop', id: 42, status: 'paid' })}`,
		);
		// The same body with other headers is the same event.
		const again = await claim(
			[webhookItem({ status: 'paid', id: 42, source: 'shop' }, { 'x-delivery': '2' })],
			{ scope: 'derived', keySource: 'payloadHash' },
		);
		expect(again.routing().Duplicate.concat(again.routing()['In Progress'])).toEqual([0]);
	});

	it('bad keys: without continue nothing of the batch is claimed; with continue only the bad item fails', async () => {
		const items = [{ event_id: 'evt-ok' }, { event_id: 'k'.repeat(300) }, { other: 'no key' }];
		const before = await tableSnapshot(pool, schema);
		const error = (await claim(items).catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.context.itemIndex).toBe(1);
		expect(error.message).toBe('key: is 300 characters long; the limit is 255');
		expect(await tableSnapshot(pool, schema)).toEqual(before);

		const routed = await nodes.run(new IdempotencyCheck(), {
			items,
			parameters: claimParameters,
			onError: 'continueErrorOutput',
		});
		expect(routed.routing()).toEqual({
			New: [0],
			Duplicate: [],
			'In Progress': [],
			Conflict: [],
			Error: [1, 2],
		});
		expect(routed.output('Error')[1].json).toMatchObject({
			other: 'no key',
			details: { field: 'key', http_status: 400 },
		});
		expect(String((routed.output('Error')[1].json.details as { fix: string }).fix)).toMatch(
			/Payload Hash/,
		);
	});
});

describe('Idempotency Check: late-event guard', () => {
	const guarded = {
		scope: 'orders',
		key: '={{ $json.event_id }}',
		lateEventGuard: true,
		entityKey: '={{ $json.order_id }}',
		version: '={{ $json.version }}',
	};

	it('an event older than the newest applied one for the entity routes to Stale', async () => {
		const v2 = await claim([{ event_id: 'o1-v2', order_id: 'o1', version: 2 }], guarded);
		expect(v2.outputNames).toEqual(['New', 'Duplicate', 'In Progress', 'Conflict', 'Stale']);
		expect(v2.routing().New).toEqual([0]);

		const v1 = await claim([{ event_id: 'o1-v1', order_id: 'o1', version: 1 }], guarded);
		expect(v1.routing()).toEqual({
			New: [],
			Duplicate: [],
			'In Progress': [],
			Conflict: [],
			Stale: [0],
		});
		expect(idem(v1.output('Stale')[0])).toMatchObject({
			route: 'stale',
			claim_id: null,
			current: { version: '2' },
		});
		// The stale event's claim was given back: a redelivery is Stale again, not In Progress.
		expect(await keyRow('orders', 'o1-v1')).toBeUndefined();
		expect(
			(await claim([{ event_id: 'o1-v1', order_id: 'o1', version: 1 }], guarded)).routing().Stale,
		).toEqual([0]);

		const v3 = await claim([{ event_id: 'o1-v3', order_id: 'o1', version: 3 }], guarded);
		expect(v3.routing().New).toEqual([0]);
		const { rows } = await pool.query(
			`SELECT version FROM "${schema}".entity_versions WHERE scope = 'orders' AND entity_key = 'o1'`,
		);
		expect(Number(rows[0].version)).toBe(3);
	});

	it("Occurred At without an offset is in the workflow's time zone; with an offset it keeps its instant; a value that is no date is refused by name", async () => {
		const byTime = {
			scope: 'orders-by-time',
			key: '={{ $json.event_id }}',
			lateEventGuard: true,
			entityKey: '={{ $json.order_id }}',
			occurredAt: '={{ $json.at }}',
		};
		const routeOf = async (at: string, eventId: string) => {
			const result = await nodes.run(new IdempotencyCheck(), {
				items: [{ event_id: eventId, order_id: 'o-tz', at }],
				parameters: byTime,
				timezone: 'Asia/Kathmandu',
			});
			const [route] = Object.entries(result.routing()).find(([, items]) => items.length > 0)!;
			return route;
		};
		const appliedAt = async () =>
			(
				await pool.query<{ at: Date }>(
					`SELECT occurred_at AS at FROM "${schema}".entity_versions WHERE scope = 'orders-by-time' AND entity_key = 'o-tz'`,
				)
			).rows[0].at.toISOString();
		expect(await routeOf('2030-12-05T12:00:00Z', 'e1')).toBe('New');
		// Kathmandu is UTC+5:45: 17:00 there is 11:15 UTC, older than 12:00 UTC. Read in the
		// process's time zone (UTC, New York or most others) it would be newer.
		expect(await routeOf('2030-12-05T17:00:00', 'e2')).toBe('Stale');
		expect(await routeOf('2030-12-05 18:00:00', 'e3')).toBe('New');
		expect(await appliedAt()).toBe('2030-12-05T12:15:00.000Z');
		expect(await routeOf('2030-12-05T13:00:00+01:00', 'e4')).toBe('Stale');
		expect(await routeOf('2030-12-05T13:30:00+01:00', 'e5')).toBe('New');
		expect(await appliedAt()).toBe('2030-12-05T12:30:00.000Z');

		const before = await tableSnapshot(pool, schema);
		const refused = await nodes
			.run(new IdempotencyCheck(), {
				items: [{ event_id: 'e6', order_id: 'o-tz', at: 'teatime' }],
				parameters: byTime,
			})
			.then(
				() => null,
				(error: unknown) => error as Error,
			);
		expect(refused?.message).toMatch(/^Occurred At: "teatime" is not a date and time$/);
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	it('a state order keeps "paid" from going back to "pending"', async () => {
		const states = {
			scope: 'orders',
			key: '={{ $json.event_id }}',
			lateEventGuard: true,
			entityKey: '={{ $json.order_id }}',
			state: '={{ $json.status }}',
			stateOrder: 'pending, paid, shipped',
		};
		expect(
			(await claim([{ event_id: 'o2-paid', order_id: 'o2', status: 'paid' }], states)).routing()
				.New,
		).toEqual([0]);
		const backwards = await claim(
			[{ event_id: 'o2-pending', order_id: 'o2', status: 'pending' }],
			states,
		);
		expect(backwards.routing().Stale).toEqual([0]);
		expect(idem(backwards.output('Stale')[0]).current).toMatchObject({ state: 'paid' });
		expect(
			(
				await claim([{ event_id: 'o2-shipped', order_id: 'o2', status: 'shipped' }], states)
			).routing().New,
		).toEqual([0]);
	});

	// The core validates guard fields (e.g. a non-numeric version) per item and still claims the
	// other items of the batch (src/core/store.ts claim ignores all-or-nothing), so without
	// "continue" the node fails but item 0 stays claimed. Remove `.fails` once the core validates
	// the whole batch before writing when the node asks for all-or-nothing.
	it('without continue, a malformed guard version in item 1 claims nothing of the batch', async () => {
		const before = await tableSnapshot(pool, schema);
		const error = (await claim(
			[
				{ event_id: 'o9-v1', order_id: 'o9', version: 1 },
				{ event_id: 'o9-vx', order_id: 'o9', version: 'v-two' },
			],
			guarded,
		).catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.context.itemIndex).toBe(1);
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	it('a batch mixing fresh, stale and duplicate events routes each item', async () => {
		const result = await claim(
			[
				{ event_id: 'o3-v5', order_id: 'o3', version: 5 },
				{ event_id: 'o1-v0', order_id: 'o1', version: 0 },
				{ event_id: 'o1-v3', order_id: 'o1', version: 3 },
			],
			guarded,
		);
		expect(result.routing()).toEqual({
			New: [0],
			Duplicate: [],
			'In Progress': [2],
			Conflict: [],
			Stale: [1],
		});
	});
});
