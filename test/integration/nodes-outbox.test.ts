import { WorkflowHasIssuesError } from 'n8n-core';
import { NodeOperationError, type IDataObject } from 'n8n-workflow';

import { fingerprint } from '../../src/core';
import { OutboxWrite } from '../../nodes/OutboxWrite/OutboxWrite.node';
import { tableSnapshot, testSchema, useTestSchema } from '../helpers/db';
import { nodeRunner, webhookItem } from '../helpers/n8n-context';

// The business table lives outside the package's schema, as a user's own table would.
const businessTable = `public.${testSchema(__filename, 'orders')}_orders`;
const { schema, pool } = useTestSchema(__filename, {
	closeCachedPools: true,
	cleanUp: async (pool) => await pool.query(`DROP TABLE IF EXISTS ${businessTable}`),
});
const nodes = nodeRunner(schema);

beforeAll(async () => {
	await pool.query(`DROP TABLE IF EXISTS ${businessTable}`);
	await pool.query(
		`CREATE TABLE ${businessTable} (id int PRIMARY KEY, status text NOT NULL CHECK (status IN ('new', 'paid', 'shipped')))`,
	);
});

const withSql = {
	eventType: 'order.paid',
	companionSql: `INSERT INTO ${businessTable} (id, status) VALUES ($1, $2)`,
	queryParameters: '={{ [$json.order_id, $json.status] }}',
	envelope: {
		source: 'shop',
		correlationId: '={{ "corr-" + $json.order_id }}',
		orderingKey: '={{ "order-" + $json.order_id }}',
		destination: 'https://crm.example.com/hooks',
	},
};

async function businessRows(): Promise<IDataObject[]> {
	return (await pool.query(`SELECT id, status FROM ${businessTable} ORDER BY id`)).rows;
}

async function events(): Promise<IDataObject[]> {
	return (
		await pool.query(
			`SELECT id, queue, status, idempotency_key, payload, ordering_key, correlation_id, max_attempts FROM "${schema}".jobs ORDER BY seq`,
		)
	).rows;
}

describe('Outbox Write with SQL in the same transaction', () => {
	it('a failing business write (CHECK violation) leaves no event and no business row', async () => {
		// Create the schema first, so the snapshot below compares like with like.
		await nodes.run(new OutboxWrite(), {
			items: [{ id: 'warm-up' }],
			parameters: { eventType: 'warm.up' },
		});
		const before = await tableSnapshot(pool, schema);
		const error = (await nodes
			.run(new OutboxWrite(), { items: [{ order_id: 1, status: 'bogus' }], parameters: withSql })
			.catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.message).toMatch(
			/^The SQL to run in the same transaction failed, so no event was written: .*check constraint/,
		);
		expect(error.description).toMatch(/Field: companionSql/);
		expect(await businessRows()).toEqual([]);
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	it("Occurred At without an offset is in the workflow's time zone; with an offset it keeps its instant", async () => {
		const occurredAtOf = async (occurredAt: string, timezone: string) => {
			const result = await nodes.run(new OutboxWrite(), {
				items: [{ order_id: 7, at: occurredAt }],
				parameters: { eventType: 'order.dated', envelope: { occurredAt: '={{ $json.at }}' } },
				timezone,
			});
			const jobId = (result.output('main')[0].json.outbox as IDataObject).job_id;
			const { rows } = await pool.query(
				`SELECT payload->>'occurred_at' AS at FROM "${schema}".jobs WHERE id = $1`,
				[jobId],
			);
			return rows[0].at as string;
		};
		// Berlin is UTC+1 in December, New York UTC-5.
		expect(await occurredAtOf('2030-12-05T10:00:00', 'Europe/Berlin')).toBe(
			'2030-12-05T09:00:00.000Z',
		);
		expect(await occurredAtOf('2030-12-05 10:00:00', 'America/New_York')).toBe(
			'2030-12-05T15:00:00.000Z',
		);
		expect(await occurredAtOf('2030-12-05T10:00:00+02:00', 'America/New_York')).toBe(
			'2030-12-05T08:00:00.000Z',
		);
	});

	it('a succeeding business write commits together with its event', async () => {
		const result = await nodes.run(new OutboxWrite(), {
			items: [{ order_id: 1, status: 'paid', amount: 10 }],
			parameters: withSql,
		});
		const [item] = result.output('main');
		expect(item.pairedItem).toEqual({ item: 0 });
		expect(item.json).toMatchObject({
			order_id: 1,
			status: 'paid',
			outbox: {
				event_id: `order.paid:sha256:${fingerprint({ order_id: 1, status: 'paid', amount: 10 })}`,
				queue: 'outbox',
				status: 'queued',
				deduplicated: false,
				sql_row_count: 1,
				sql_rows: [],
			},
		});
		expect(await businessRows()).toEqual([{ id: 1, status: 'paid' }]);
		const [event] = (await events()).filter(
			(row) => row.id === (item.json.outbox as IDataObject).job_id,
		);
		expect(event).toMatchObject({
			queue: 'outbox',
			status: 'queued',
			ordering_key: 'order-1',
			correlation_id: 'corr-1',
			max_attempts: 10,
		});
		expect(event.payload).toMatchObject({
			event_type: 'order.paid',
			event_version: 1,
			source: 'shop',
			correlation_id: 'corr-1',
			ordering_key: 'order-1',
			destination: 'https://crm.example.com/hooks',
			payload: { order_id: 1, status: 'paid', amount: 10 },
		});
		expect(Date.parse(String((event.payload as IDataObject).occurred_at))).toBeGreaterThan(
			Date.now() - 60_000,
		);
	});

	it('without continue, one failing item in a batch writes nothing for any item', async () => {
		const before = await tableSnapshot(pool, schema);
		const items = [
			{ order_id: 2, status: 'paid' },
			{ order_id: 3, status: 'bogus' },
			{ order_id: 4, status: 'paid' },
		];
		const error = (await nodes
			.run(new OutboxWrite(), { items, parameters: withSql })
			.catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(await businessRows()).toEqual([{ id: 1, status: 'paid' }]);
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	// The core's all-or-nothing path throws the companion SQL error without the item's
	// position (src/core/store.ts writeOutbox → companionError), so the node cannot say which
	// item failed. Remove `.fails` once the core sets itemPosition there.
	it('without continue, the error names the item whose SQL failed', async () => {
		const items = [
			{ order_id: 5, status: 'paid' },
			{ order_id: 6, status: 'bogus' },
		];
		const error = (await nodes
			.run(new OutboxWrite(), { items, parameters: withSql })
			.catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.context.itemIndex).toBe(1);
	});

	it('with continue (error output), the failing item is undone alone; the others commit with their events', async () => {
		const items = [
			{ order_id: 7, status: 'paid' },
			{ order_id: 8, status: 'bogus' },
			{ order_id: 9, status: 'shipped' },
			{ order_id: 7, status: 'paid', note: 'primary key violation' },
		];
		const eventsBefore = (await events()).length;
		const result = await nodes.run(new OutboxWrite(), {
			items,
			parameters: {
				...withSql,
				eventIdSource: 'custom',
				eventId: '={{ "evt-" + $json.order_id + "-" + $itemIndex }}',
			},
			onError: 'continueErrorOutput',
		});
		expect(result.routing()).toEqual({ Success: [0, 2], Error: [1, 3] });
		expect(result.output('Error')[0].json).toMatchObject({
			order_id: 8,
			details: { code: 'companion_sql_failed', field: 'companionSql', http_status: 400 },
		});
		expect(String(result.output('Error')[1].json.error)).toMatch(/duplicate key/);
		expect(await businessRows()).toEqual([
			{ id: 1, status: 'paid' },
			{ id: 7, status: 'paid' },
			{ id: 9, status: 'shipped' },
		]);
		const written = (await events()).slice(eventsBefore);
		expect(written.map((row) => row.idempotency_key)).toEqual(['evt-7-0', 'evt-9-2']);
	});
});

describe('Outbox Write: event ids', () => {
	it('a duplicate event id is accepted once', async () => {
		const parameters = {
			eventType: 'invoice.sent',
			eventIdSource: 'custom',
			eventId: '={{ $json.event }}',
		};
		const first = (
			await nodes.run(new OutboxWrite(), { items: [{ event: 'inv-1-sent', total: 3 }], parameters })
		).output('main')[0].json.outbox as IDataObject;
		const second = (
			await nodes.run(new OutboxWrite(), { items: [{ event: 'inv-1-sent', total: 3 }], parameters })
		).output('main')[0].json.outbox as IDataObject;
		expect(first).toMatchObject({ event_id: 'inv-1-sent', deduplicated: false });
		expect(second).toMatchObject({
			event_id: 'inv-1-sent',
			deduplicated: true,
			job_id: first.job_id,
		});
		expect((await events()).filter((row) => row.idempotency_key === 'inv-1-sent')).toHaveLength(1);
	});

	it('the derived event id is stable: the webhook body id, so a re-run writes the same event', async () => {
		const request = webhookItem({ id: 'ord_77', status: 'paid' });
		const a = (
			await nodes.run(new OutboxWrite(), {
				items: [request],
				parameters: { eventType: 'order.paid' },
			})
		).output('main')[0].json;
		const b = (
			await nodes.run(new OutboxWrite(), {
				items: [request],
				parameters: { eventType: 'order.paid' },
			})
		).output('main')[0].json;
		expect((a.outbox as IDataObject).event_id).toBe('order.paid:ord_77');
		expect(b.outbox).toMatchObject({
			event_id: 'order.paid:ord_77',
			deduplicated: true,
			job_id: (a.outbox as IDataObject).job_id,
		});
		const [event] = (await events()).filter((row) => row.idempotency_key === 'order.paid:ord_77');
		// The webhook body is the payload, not the whole request item.
		expect((event.payload as IDataObject).payload).toEqual({ id: 'ord_77', status: 'paid' });
	});

	it('two different payloads under one derived id: the second goes to the error output as event_id_reused, not dropped as a duplicate', async () => {
		const parameters = { eventType: 'customer.updated' };
		const first = (
			await nodes.run(new OutboxWrite(), {
				items: [webhookItem({ id: 'cus_7', email: 'a@example.com' })],
				parameters,
			})
		).output('main')[0].json.outbox as IDataObject;
		const second = await nodes.run(new OutboxWrite(), {
			items: [webhookItem({ id: 'cus_7', email: 'b@example.com' })],
			parameters,
			onError: 'continueErrorOutput',
		});
		expect(second.routing()).toEqual({ Success: [], Error: [0] });
		expect(second.output('Error')[0].json).toMatchObject({
			details: {
				code: 'event_id_reused',
				field: 'eventId',
				http_status: 422,
				existing_job_id: first.job_id,
			},
		});
		expect(
			(await events()).filter((row) => row.idempotency_key === 'customer.updated:cus_7'),
		).toHaveLength(1);
	});

	it('a numeric custom event id from an expression is used as text', async () => {
		const parameters = {
			eventType: 'ticket.closed',
			eventIdSource: 'custom',
			eventId: '={{ $json.seq }}',
		};
		const out = (await nodes.run(new OutboxWrite(), { items: [{ seq: 991 }], parameters })).output(
			'main',
		)[0].json.outbox as IDataObject;
		expect(out).toMatchObject({ event_id: '991', deduplicated: false });
	});

	it('an empty event type is an error naming the field', async () => {
		// Left empty in the editor, n8n itself refuses to run the workflow (a required parameter).
		const refused = await nodes
			.run(new OutboxWrite(), { items: [{ a: 1 }] })
			.catch((caught: unknown) => caught);
		expect(refused).toBeInstanceOf(WorkflowHasIssuesError);
		// An expression that yields nothing reaches the node.
		const error = (await nodes
			.run(new OutboxWrite(), { items: [{ a: 1 }], parameters: { eventType: '={{ $json.type }}' } })
			.catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.context.itemIndex).toBe(0);
		expect(error.message).toBe('eventType: is empty');
	});
});
