import { NodeOperationError, type IDataObject } from 'n8n-workflow';

import { hashToken } from '../../src/core';
import { JobEnqueue } from '../../nodes/JobEnqueue/JobEnqueue.node';
import { tableSnapshot, useTestSchema } from '../helpers/db';
import { nodeRunner, pairedIndexes, webhookItem } from '../helpers/n8n-context';

const { schema, pool } = useTestSchema(__filename, { closeCachedPools: true });
const nodes = nodeRunner(schema);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

async function jobRows(where = 'true', values: unknown[] = []) {
	const { rows } = await pool.query(
		`SELECT id, queue, status, payload, idempotency_key, status_token_hash, max_attempts, priority, correlation_id FROM "${schema}".jobs WHERE ${where} ORDER BY seq`,
		values,
	);
	return rows;
}

async function rejection(promise: Promise<unknown>): Promise<NodeOperationError> {
	const error = await promise.then(
		() => undefined,
		(caught: unknown) => caught,
	);
	expect(error).toBeInstanceOf(NodeOperationError);
	return error as NodeOperationError;
}

describe('Job Enqueue: the receiver chain with zero configuration', () => {
	const body = { document: 'contract.pdf', customer: 42, pages: [1, 2] };
	const request = webhookItem(body, { 'idempotency-key': 'k1' });
	let first: IDataObject;

	it('a webhook item becomes a committed job: job_id, queued, status_url with a token, not deduplicated', async () => {
		const result = await nodes.run(new JobEnqueue(), { items: [request] });
		expect(result.outputNames).toEqual(['main']);
		const [item] = result.output('main');
		expect(result.output('main')).toHaveLength(1);
		expect(item.pairedItem).toEqual({ item: 0 });
		first = item.json;
		expect(first).toMatchObject({
			status: 'queued',
			queue: 'default',
			deduplicated: false,
			idempotency_key: 'k1',
		});
		expect(first.job_id).toMatch(UUID);
		expect(first.status_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
		expect(first.status_url).toBe(
			`/webhook/jobs/status?job_id=${String(first.job_id)}&token=${String(first.status_token)}`,
		);
		expect(first).not.toHaveProperty('conflict');
		expect(Date.parse(String(first.run_at))).toBeLessThanOrEqual(Date.now() + 1000);

		// Committed (read from another connection), with the request body as payload and the
		// header as key; only the token's hash is stored.
		const rows = await jobRows('id = $1', [first.job_id]);
		expect(rows).toHaveLength(1);
		expect(rows[0]).toMatchObject({
			queue: 'default',
			status: 'queued',
			payload: body,
			idempotency_key: 'k1',
			max_attempts: 5,
			priority: 0,
		});
		expect(Buffer.compare(rows[0].status_token_hash, hashToken(String(first.status_token)))).toBe(
			0,
		);
	});

	it('the same request again answers with the same job, deduplicated, with the same status_url', async () => {
		const again = (
			await nodes.run(new JobEnqueue(), {
				items: [
					webhookItem(
						{ pages: [1, 2], customer: 42, document: 'contract.pdf' },
						{ 'Idempotency-Key': 'k1' },
					),
				],
			})
		).output('main');
		expect(again).toHaveLength(1);
		expect(again[0].json).toMatchObject({
			job_id: first.job_id,
			status: 'queued',
			deduplicated: true,
			status_url: first.status_url,
			status_token: first.status_token,
		});
		expect(await jobRows("idempotency_key = 'k1'")).toHaveLength(1);
	});

	it('the same key with another body is an error naming idempotencyKey (422) and writes nothing', async () => {
		const conflicting = webhookItem({ ...body, customer: 43 }, { 'idempotency-key': 'k1' });
		const before = await tableSnapshot(pool, schema);
		const error = await rejection(nodes.run(new JobEnqueue(), { items: [conflicting] }));
		expect(error.message).toBe('Idempotency key "k1" was already used with a different payload');
		expect(error.description).toMatch(/Field: idempotencyKey/);
		expect(error.context.itemIndex).toBe(0);
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	it('with "continue (using error output)" the conflicting request goes to the error output with its input and pairedItem', async () => {
		const conflicting = webhookItem({ ...body, customer: 43 }, { 'idempotency-key': 'k1' });
		const result = await nodes.run(new JobEnqueue(), {
			items: [conflicting],
			onError: 'continueErrorOutput',
		});
		expect(result.outputNames).toEqual(['Success', 'Error']);
		expect(result.output('Success')).toEqual([]);
		const [failed] = result.output('Error');
		expect(failed.pairedItem).toEqual({ item: 0 });
		// The receiver workflow can answer 422 from this item, and still sees the request.
		expect(failed.json).toMatchObject({
			body: { customer: 43 },
			headers: { 'idempotency-key': 'k1' },
			details: {
				code: 'idempotency_key_reused',
				http_status: 422,
				field: 'idempotencyKey',
				existing_job_id: first.job_id,
			},
		});
		expect(failed.json).not.toHaveProperty('status_token');
		expect(await jobRows("idempotency_key = 'k1'")).toHaveLength(1);
	});

	it('with "Return Existing Job" the conflicting request gets the stored job marked as a conflict, without its token', async () => {
		const conflicting = webhookItem({ ...body, customer: 44 }, { 'idempotency-key': 'k1' });
		const [item] = (
			await nodes.run(new JobEnqueue(), {
				items: [conflicting],
				parameters: { options: { onConflict: 'existing' } },
			})
		).output('main');
		expect(item.json).toMatchObject({
			job_id: first.job_id,
			deduplicated: true,
			conflict: true,
			status_token: null,
			status_url: null,
		});
	});

	it('a request without an Idempotency-Key header creates a new job each time', async () => {
		const plain = webhookItem({ document: 'no-key.pdf' });
		const a = (await nodes.run(new JobEnqueue(), { items: [plain] })).output('main')[0].json;
		const b = (await nodes.run(new JobEnqueue(), { items: [plain] })).output('main')[0].json;
		expect(a.job_id).not.toBe(b.job_id);
		expect(a).toMatchObject({ deduplicated: false, idempotency_key: null });
	});

	it('concurrent executions with one key (client retries racing) get one job and the same id', async () => {
		const item = webhookItem({ document: 'race.pdf' }, { 'idempotency-key': 'race-1' });
		const results = await Promise.all(
			Array.from(
				{ length: 12 },
				async () => (await nodes.run(new JobEnqueue(), { items: [item] })).output('main')[0].json,
			),
		);
		expect(new Set(results.map((result) => result.job_id)).size).toBe(1);
		expect(results.filter((result) => result.deduplicated === false)).toHaveLength(1);
		expect(new Set(results.map((result) => result.status_url)).size).toBe(1);
		expect(await jobRows("idempotency_key = 'race-1'")).toHaveLength(1);
	});

	it('options and expressions reach the job: queue, key, priority, attempts, correlation id, status URL base', async () => {
		const result = await nodes.run(new JobEnqueue(), {
			items: [{ order: { id: 'ord-9' }, tenant: 't1' }],
			parameters: {
				queue: 'documents',
				idempotencyKey: '={{ "order-" + $json.order.id }}',
				options: {
					priority: 7,
					maxAttempts: 3,
					correlationId: '={{ $json.tenant }}',
					statusUrlBase: 'https://n8n.example.com/webhook/jobs/status?v=1',
					delaySeconds: 60,
				},
			},
		});
		const [item] = result.output('main');
		expect(item.json).toMatchObject({ queue: 'documents', idempotency_key: 'order-ord-9' });
		expect(item.json.status_url).toBe(
			`https://n8n.example.com/webhook/jobs/status?v=1&job_id=${String(item.json.job_id)}&token=${String(item.json.status_token)}`,
		);
		expect(Date.parse(String(item.json.run_at))).toBeGreaterThan(Date.now() + 50_000);
		const [row] = await jobRows('id = $1', [item.json.job_id]);
		// Not a webhook item: the whole item is the payload.
		expect(row).toMatchObject({
			queue: 'documents',
			payload: { order: { id: 'ord-9' }, tenant: 't1' },
			priority: 7,
			max_attempts: 3,
			correlation_id: 't1',
			idempotency_key: 'order-ord-9',
		});
	});

	it('a numeric key from an expression (e.g. an order number) is used as text', async () => {
		const run = async () =>
			(
				await nodes.run(new JobEnqueue(), {
					items: [{ order_id: 1234 }],
					parameters: { idempotencyKey: '={{ $json.order_id }}' },
				})
			).output('main')[0].json;
		const a = await run();
		const b = await run();
		expect(a).toMatchObject({ idempotency_key: '1234', deduplicated: false });
		expect(b).toMatchObject({ job_id: a.job_id, deduplicated: true });
	});

	it('a key expression that finds nothing (null or undefined) is no key: the Idempotency-Key header is used', async () => {
		for (const [expression, header] of [
			['={{ $json.body.order_ref }}', 'hdr-undefined'],
			['={{ null }}', 'hdr-null'],
		]) {
			const [item] = (
				await nodes.run(new JobEnqueue(), {
					items: [webhookItem({ order: 1 }, { 'idempotency-key': header })],
					parameters: { idempotencyKey: expression },
				})
			).output('main');
			expect(item.json).toMatchObject({ idempotency_key: header, deduplicated: false });
		}
	});
});

describe('Job Enqueue: bad items and continue-on-fail, with pairedItem intact', () => {
	// Items 1 and 3 are bad: a 300-character idempotency key and an invalid queue name.
	const items = [
		{ queue: 'batch', key: 'b-0', n: 0 },
		{ queue: 'batch', key: 'x'.repeat(300), n: 1 },
		{ queue: 'batch', key: 'b-2', n: 2 },
		{ queue: 'not a queue!', key: 'b-3', n: 3 },
		{ queue: 'batch', key: 'b-4', n: 4 },
	];
	const parameters = { queue: '={{ $json.queue }}', idempotencyKey: '={{ $json.key }}' };

	it('without continue-on-fail the node fails on item 1 and writes nothing at all', async () => {
		const before = await tableSnapshot(pool, schema);
		const error = await rejection(nodes.run(new JobEnqueue(), { items, parameters }));
		expect(error.context.itemIndex).toBe(1);
		expect(error.message).toBe('idempotencyKey: is 300 characters long; the limit is 255');
		expect(error.description).toMatch(/Shorten the key.*Field: idempotencyKey/);
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	it('a bad item late in the batch also rolls back the good items before it', async () => {
		const before = await tableSnapshot(pool, schema);
		const error = await rejection(
			nodes.run(new JobEnqueue(), { items: [items[0], items[2], items[3]], parameters }),
		);
		expect(error.context.itemIndex).toBe(2);
		expect(error.description).toMatch(/Field: queue/);
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	it('with continue (using error output) the good items are enqueued and the bad ones routed to Error', async () => {
		const result = await nodes.run(new JobEnqueue(), {
			items,
			parameters,
			onError: 'continueErrorOutput',
		});
		expect(result.routing()).toEqual({ Success: [0, 2, 4], Error: [1, 3] });
		const success = result.output('Success');
		expect(success.map((item) => item.json.idempotency_key)).toEqual(['b-0', 'b-2', 'b-4']);
		const errors = result.output('Error');
		expect(errors[0].json).toMatchObject({
			n: 1,
			details: { code: 'invalid_input', field: 'idempotencyKey', http_status: 400 },
		});
		expect(errors[1].json).toMatchObject({
			n: 3,
			queue: 'not a queue!',
			details: { code: 'invalid_input', field: 'queue', http_status: 400 },
		});
		expect(errors[1].json.error).toMatch(/"not a queue!" is not a valid queue name/);
		expect(errors.map((item) => item.pairedItem)).toEqual([{ item: 1 }, { item: 3 }]);
		const rows = await jobRows("queue = 'batch'");
		expect(rows.map((row) => row.idempotency_key)).toEqual(['b-0', 'b-2', 'b-4']);
		expect(rows.map((row) => row.id)).toEqual(success.map((item) => item.json.job_id));
	});

	it('with continue (regular output) bad items stay on the output, flagged, in their item order', async () => {
		const result = await nodes.run(new JobEnqueue(), {
			items: items.map((item) => ({ ...item, key: item.key.replace('b-', 'r-') })),
			parameters,
			onError: 'continueRegularOutput',
		});
		const out = result.output('main');
		expect(out.flatMap(pairedIndexes).sort()).toEqual([0, 1, 2, 3, 4]);
		expect(out.filter((item) => item.json.error !== undefined).flatMap(pairedIndexes)).toEqual([
			1, 3,
		]);
		expect(out.filter((item) => item.json.job_id !== undefined).flatMap(pairedIndexes)).toEqual([
			0, 2, 4,
		]);
	});

	it('a payload over the configured size limit is rejected with the field and fix', async () => {
		const result = await nodes.run(new JobEnqueue(), {
			items: [{ blob: 'y'.repeat(3000) }, { blob: 'small' }],
			parameters: { queue: 'sized', options: { maxPayloadKb: 2 } },
			onError: 'continueErrorOutput',
		});
		expect(result.routing()).toEqual({ Success: [1], Error: [0] });
		expect(result.output('Error')[0].json).toMatchObject({
			details: {
				field: 'payload',
				code: 'payload_too_large',
				http_status: 413,
				fix: expect.stringContaining('or raise Max Payload Size (KB) in Options (now 2)'),
			},
		});
		expect(String(result.output('Error')[0].json.error)).toMatch(/the limit is 2048/);
	});

	it("Run At without an offset is in the workflow's time zone, as the date picker stores it; an offset, epoch milliseconds and a bad value behave as such", async () => {
		const runAtOf = async (runAt: unknown, timezone?: string) => {
			const result = await nodes.run(new JobEnqueue(), {
				items: [{ n: 1 }],
				parameters: { queue: 'run-at', options: { runAt } },
				...(timezone ? { timezone } : {}),
			});
			return String(result.output('main')[0].json.run_at);
		};
		// Berlin is UTC+1 in December, New York UTC-5.
		expect(await runAtOf('2030-12-05T10:00:00', 'Europe/Berlin')).toBe('2030-12-05T09:00:00.000Z');
		expect(await runAtOf('2030-12-05T10:00:00', 'America/New_York')).toBe(
			'2030-12-05T15:00:00.000Z',
		);
		expect(await runAtOf('2030-12-05T10:00:00Z', 'Europe/Berlin')).toBe('2030-12-05T10:00:00.000Z');
		expect(await runAtOf('2030-12-05T10:00:00+02:00', 'America/New_York')).toBe(
			'2030-12-05T08:00:00.000Z',
		);
		expect(await runAtOf(Date.UTC(2030, 11, 5, 10), 'Europe/Berlin')).toBe(
			'2030-12-05T10:00:00.000Z',
		);
		const before = await tableSnapshot(pool, schema);
		const error = await rejection(
			nodes.run(new JobEnqueue(), {
				items: [{ n: 1 }],
				parameters: { queue: 'run-at', options: { runAt: '={{ "soon" }}' } },
			}),
		);
		expect(error.message).toBe('Run At: "soon" is not a date and time');
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	it('Max Payload Size from an expression: nothing given is the default, a number as text counts, anything else is refused by name and writes nothing', async () => {
		const big = { blob: 'y'.repeat(3000) };
		for (const nothing of ['={{ null }}', '={{ undefined }}', '={{ "" }}']) {
			const result = await nodes.run(new JobEnqueue(), {
				items: [big],
				parameters: { queue: 'sized-default', options: { maxPayloadKb: nothing } },
			});
			expect(result.output('main')[0].json.job_id, nothing).toMatch(UUID);
		}
		const asText = await nodes.run(new JobEnqueue(), {
			items: [big, { blob: 'small' }],
			parameters: { queue: 'sized-text', options: { maxPayloadKb: '={{ "2" }}' } },
			onError: 'continueErrorOutput',
		});
		expect(asText.routing()).toEqual({ Success: [1], Error: [0] });
		const before = await tableSnapshot(pool, schema);
		for (const bad of [0, '={{ "lots" }}']) {
			const error = await rejection(
				nodes.run(new JobEnqueue(), {
					items: [{ blob: 'small' }],
					parameters: { queue: 'sized-bad', options: { maxPayloadKb: bad } },
				}),
			);
			expect(error.message, String(bad)).toMatch(
				/^Max Payload Size \(KB\): must be a number of at least 1/,
			);
		}
		// With the error output on, every item goes there with the error (a receiver answers it).
		const continued = await nodes.run(new JobEnqueue(), {
			items: [{ blob: 'small' }, { blob: 'also small' }],
			parameters: { queue: 'sized-bad', options: { maxPayloadKb: '={{ "lots" }}' } },
			onError: 'continueErrorOutput',
		});
		expect(continued.routing()).toEqual({ Success: [], Error: [0, 1] });
		expect(continued.output('Error')[1].json).toMatchObject({
			details: { field: 'Max Payload Size (KB)', http_status: 400 },
		});
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});
});
