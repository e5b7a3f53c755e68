/**
 * The receiver (01), the event intake (06) and the reconciliation report (09) quote a 4xx of
 * their node to the caller only when the field it names is one the request supplies: each
 * template's `Request refused?` (and 06's `Outbox setup fault?` / `Outbox refused the event?`
 * after the CRM call) holds a list of the nodes' field names. Anything else is a fault of the
 * flow's setup (500, failed execution). A field renamed in a node would turn a caller's 4xx into a
 * 500 with the template tests still green, since those build their error items by hand.
 *
 * So here each template's own node runs, with the template's parameters and error output, through
 * n8n-core on real PostgreSQL, on items shaped as the template hands them on (06's through its
 * Build envelope script): for every value the request supplies, a value the node refuses must come
 * out as an error item that the template's check quotes to the caller. A refusal of the flow's
 * own settings (the credential's schema name) must not be.
 */
import type { IDataObject, INodeType } from 'n8n-workflow';

import { IdempotencyCheck } from '../../nodes/IdempotencyCheck/IdempotencyCheck.node';
import { JobEnqueue } from '../../nodes/JobEnqueue/JobEnqueue.node';
import { JobStatus } from '../../nodes/JobStatus/JobStatus.node';
import { OutboxWrite } from '../../nodes/OutboxWrite/OutboxWrite.node';
import { databaseUrl, useTestSchema } from '../helpers/db';
import { credentialFor, nodeRunner, webhookItem, type OnError } from '../helpers/n8n-context';
import { condition, evaluate, load, node, type Template } from '../helpers/templates';

const { schema } = useTestSchema(__filename, { closeCachedPools: true });
const nodes = nodeRunner(schema);

const receiver = load('01-receiver.json');
const intake = load('06-event-intake.json');
const report = load('09-reconciliation.json');

type Json = Record<string, unknown>;

/** Whether the If node `name` of `template` sends `$json` to its first output. */
function passes(template: Template, name: string, $json: Json): boolean {
	return evaluate(condition(template, name), $json) === true;
}

/**
 * Runs the template's node `name` (its parameters, its "On Error" setting) on `items` and returns
 * the error items it puts out (on its error output, or its main one with "continue"): n8n's
 * error item, the input item merged in.
 */
async function errorItems(
	template: Template,
	name: string,
	nodeType: INodeType,
	items: Json[],
	extra: { inputNodeName?: string; credential?: IDataObject } = {},
): Promise<Json[]> {
	const templateNode = node(template, name);
	const onError = templateNode.onError as OnError;
	expect(['continueErrorOutput', 'continueRegularOutput']).toContain(onError);
	const result = await nodes.run(nodeType, {
		parameters: templateNode.parameters as IDataObject,
		onError,
		nodeName: name,
		items: items as IDataObject[],
		...(extra.inputNodeName ? { inputNodeName: extra.inputNodeName } : {}),
		...(extra.credential
			? { credential: credentialFor(databaseUrl(), schema, extra.credential as never) }
			: {}),
	});
	const errors = result
		.output(onError === 'continueErrorOutput' ? 'Error' : result.outputNames[0])
		.map((item) => item.json as Json);
	expect(errors).toHaveLength(items.length);
	return errors;
}

/** The fields the error items name, for the test's messages. */
const fieldsOf = (errors: Json[]) => errors.map((error) => (error.details as Json).field);

/** A string of more than the 255 characters keys and names may have. */
const LONG = 'x'.repeat(256);
/** More than the 1 MiB of JSON a payload may have by default. */
const TOO_LARGE = { text: 'y'.repeat(1024 * 1024 + 1) };

describe('Receiver (01): what Job Enqueue refuses of a request is quoted to the caller', () => {
	const request = (body: IDataObject, headers: Record<string, string> = {}) =>
		webhookItem(body, headers);

	it.each<[string, IDataObject[], string]>([
		['a payload over the size limit', [request(TOO_LARGE)], 'payload'],
		['NUL in the payload', [request({ text: 'a\u0000b' })], 'payload'],
		[
			'an Idempotency-Key with a control character',
			[request({ a: 1 }, { 'idempotency-key': 'k\u0001' })],
			'idempotencyKey',
		],
		[
			'an over-long Idempotency-Key',
			[request({ a: 1 }, { 'idempotency-key': LONG })],
			'idempotencyKey',
		],
		['a callback URL without a host', [request({ callback_url: 'https://' })], 'callbackUrl'],
		[
			'a callback URL that is not http(s)',
			[request({ callback_url: 'ftp://a.example' })],
			'callbackUrl',
		],
		['an over-long correlation id', [request({ correlation_id: LONG })], 'correlationId'],
	])('%s', async (_name, items, field) => {
		const errors = await errorItems(receiver, 'Job Enqueue', new JobEnqueue(), items);
		expect(fieldsOf(errors)).toEqual([field]);
		for (const error of errors) {
			expect(passes(receiver, 'Store unavailable?', error)).toBe(false);
			expect(passes(receiver, 'Request refused?', error)).toBe(true);
		}
	});

	it('an Idempotency-Key sent again with another payload', async () => {
		const key = { 'idempotency-key': `reused-${process.pid}` };
		await nodes.run(new JobEnqueue(), {
			parameters: node(receiver, 'Job Enqueue').parameters as IDataObject,
			items: [request({ a: 1 }, key)],
		});
		const errors = await errorItems(receiver, 'Job Enqueue', new JobEnqueue(), [
			request({ a: 2 }, key),
		]);
		expect(fieldsOf(errors)).toEqual(['idempotencyKey']);
		expect(passes(receiver, 'Request refused?', errors[0])).toBe(true);
	});

	it("the credential's schema name is a setting, not the request's: not quoted", async () => {
		const errors = await errorItems(
			receiver,
			'Job Enqueue',
			new JobEnqueue(),
			[request({ a: 1 })],
			{ credential: { schema: 'Jobs' } },
		);
		expect(passes(receiver, 'Request refused?', errors[0])).toBe(false);
	});
});

describe('Event intake (06): what Claim event and Outbox Write refuse of an event is quoted to the caller', () => {
	const event = {
		source: 'shop',
		external_id: 'o-1',
		status: 'paid',
		occurred_at: '2026-01-01T00:00:00Z',
		data: { total: 10 },
	};
	/** The item Build envelope (the template's own script) hands on for `body`. */
	function built(body: IDataObject): Json {
		const script = node(intake, 'Build envelope').parameters.jsCode as string;
		return (new Function('$json', script)(webhookItem(body)) as { json: Json }).json;
	}
	/** A built item whose envelope is changed past Build envelope's checks. */
	function withEnvelope(body: IDataObject, change: (item: Json) => void): Json {
		const item = structuredClone(built(body));
		change(item);
		return item;
	}

	it('Build envelope accepts the event the cases start from', () => {
		expect(built(event)).toMatchObject({ valid: true, problems: [] });
	});

	it.each<[string, Json, string]>([
		[
			'an over-long event id',
			withEnvelope(event, (item) => ((item.envelope as Json).event_id = LONG)),
			'key',
		],
		[
			'an over-long entity (source and external id)',
			withEnvelope(event, (item) => (item.entity_key = `shop:${LONG}`)),
			'entityKey',
		],
		[
			'an occurred_at it cannot read',
			withEnvelope(event, (item) => ((item.envelope as Json).occurred_at = 'soon')),
			'Occurred At',
		],
	])('Claim event: %s', async (_name, item, field) => {
		const errors = await errorItems(intake, 'Claim event', new IdempotencyCheck(), [item]);
		expect(fieldsOf(errors)).toEqual([field]);
		expect(passes(intake, 'Store unavailable?', errors[0])).toBe(false);
		expect(passes(intake, 'Request refused?', errors[0])).toBe(true);
	});

	it("Claim event: the credential's schema name is a setting, not the event's: not quoted", async () => {
		const errors = await errorItems(intake, 'Claim event', new IdempotencyCheck(), [built(event)], {
			credential: { schema: 'Jobs' },
		});
		expect(passes(intake, 'Request refused?', errors[0])).toBe(false);
	});

	/** Claim event's item (what Outbox Write reads through $('Claim event')) for an envelope. */
	const claimed = (change: (envelope: Json, item: Json) => void): Json =>
		withEnvelope(event, (item) => {
			change(item.envelope as Json, item);
			item.idempotency = { scope: 'events', key: 'evt-1', route: 'new', claim_id: 'c-1' };
		});

	/**
	 * Respond 422 (outbox)'s body for Outbox Write's error item: Mark failed hands on the item Outbox
	 * Write got (the CRM's answer) with the error and the settled claim; the event is read through
	 * $('Claim event').
	 */
	const answer422 = (error: Json, claimItem: Json): Json =>
		evaluate(
			node(intake, 'Respond 422 (outbox)').parameters.responseBody,
			{
				statusCode: 201,
				headers: {},
				body: { id: 'crm-1' },
				error: error.error,
				details: error.details,
				idempotency: claimItem.idempotency,
			},
			{ 'Claim event': claimItem },
		) as Json;

	it.each<[string, Json, string, string]>([
		[
			'a blank event type',
			claimed((envelope, item) => {
				envelope.event_type = ' ';
				(item.body as Json).event_type = ' ';
			}),
			'eventType',
			'event_type',
		],
		[
			'an over-long event id',
			claimed((envelope) => (envelope.event_id = LONG)),
			'eventId',
			'event_id',
		],
		[
			'a source that is an object',
			claimed((envelope) => (envelope.source = { a: 1 })),
			'source',
			'source',
		],
		['an over-long source', claimed((envelope) => (envelope.source = LONG)), 'source', 'source'],
		[
			'an occurred_at it cannot read',
			claimed((envelope) => (envelope.occurred_at = 'soon')),
			'Occurred At',
			'occurred_at',
		],
		[
			'NUL in the data',
			claimed((envelope) => (envelope.data = { text: 'a\u0000b' })),
			'payload',
			'body',
		],
		[
			'an event over the size limit',
			claimed((envelope) => (envelope.data = TOO_LARGE)),
			'payload',
			'body',
		],
		[
			'an over-long entity (the ordering key)',
			claimed((_envelope, item) => (item.entity_key = `shop:${LONG}`)),
			'orderingKey',
			'external_id',
		],
	])('Outbox Write after the CRM call: %s', async (_name, item, field, requestField) => {
		// Outbox Write reads the event through $('Claim event'): its input node carries that name.
		const refused = await errorItems(intake, 'Outbox Write', new OutboxWrite(), [item], {
			inputNodeName: 'Claim event',
		});
		expect(fieldsOf(refused)).toEqual([field]);
		const [error] = refused;
		expect(passes(intake, 'Outbox setup fault?', error)).toBe(false);
		expect(passes(intake, 'Outbox refused the event?', error)).toBe(true);
		expect(answer422(error, item)).toMatchObject({
			status: 422,
			code: 'outbox_rejected',
			field: requestField,
		});
	});

	it('Outbox Write after the CRM call: an event id the outbox holds for another event (its claim expired)', async () => {
		const eventId = `evt-reused-${process.pid}`;
		const first = claimed((envelope) => (envelope.event_id = eventId));
		await nodes.run(new OutboxWrite(), {
			parameters: node(intake, 'Outbox Write').parameters as IDataObject,
			inputNodeName: 'Claim event',
			items: [first as IDataObject],
		});
		const second = claimed((envelope) => {
			envelope.event_id = eventId;
			envelope.data = { total: 11 };
		});
		const [error] = await errorItems(intake, 'Outbox Write', new OutboxWrite(), [second], {
			inputNodeName: 'Claim event',
		});
		expect((error.details as Json).code).toBe('event_id_reused');
		expect(passes(intake, 'Outbox setup fault?', error)).toBe(false);
		expect(passes(intake, 'Outbox refused the event?', error)).toBe(true);
		expect(answer422(error, second)).toMatchObject({
			status: 422,
			code: 'event_id_reused',
			field: 'event_id',
			existing_job_id: (error.details as Json).existing_job_id,
		});
	});

	it("Outbox Write: the credential's schema name is a setting: a setup fault, not quoted", async () => {
		const errors = await errorItems(
			intake,
			'Outbox Write',
			new OutboxWrite(),
			[claimed(() => undefined)],
			{ inputNodeName: 'Claim event', credential: { schema: 'Jobs' } },
		);
		expect(passes(intake, 'Outbox setup fault?', errors[0])).toBe(true);
	});
});

describe('Reconciliation report (09): what Unknown Outcomes refuses of a request is quoted to the caller', () => {
	const request = (query: IDataObject) => webhookItem({}, {}, { query });

	it.each([['Bad Queue!'], [LONG], ['a\u0000b']])('queue %j', async (queue) => {
		const errors = await errorItems(report, 'Unknown Outcomes', new JobStatus(), [
			request({ queue }),
		]);
		expect(fieldsOf(errors)).toEqual(['queue']);
		expect(passes(report, 'Failed?', errors[0])).toBe(true);
		expect(passes(report, 'Store unavailable?', errors[0])).toBe(false);
		expect(passes(report, 'Request refused?', errors[0])).toBe(true);
	});

	it("the credential's schema name is a setting, not the request's: not quoted", async () => {
		const errors = await errorItems(
			report,
			'Unknown Outcomes',
			new JobStatus(),
			[request({ queue: 'documents' })],
			{ credential: { schema: 'Jobs' } },
		);
		expect(passes(report, 'Request refused?', errors[0])).toBe(false);
	});
});
