import {
	NodeConnectionTypes,
	type IDataObject,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import { fingerprint, type OutboxEventInput, type OutboxResult } from '../../src/core';
import { itemPayload, parseJsonParameter, runBatch } from '../shared/batch';
import { lazyStore } from '../shared/connection';
import { dateParameter } from '../shared/dates';
import { invalidInput } from '../shared/errors';
import { commonDescription, credentialTestMethods } from '../shared/descriptions';

/**
 * A stable event id when none is given: the payload's own event_id, else type + its id, else
 * type + a hash of the payload. Never random, so a re-run of the workflow for the same input
 * writes the same event and the outbox accepts it once.
 */
export function deriveEventId(eventType: string, payload: unknown): string {
	if (payload !== null && typeof payload === 'object' && !Array.isArray(payload)) {
		const record = payload as IDataObject;
		if (typeof record.event_id === 'string' && record.event_id !== '') return record.event_id;
		if (
			record.id !== undefined &&
			record.id !== null &&
			record.id !== '' &&
			typeof record.id !== 'object'
		)
			return `${eventType}:${String(record.id)}`;
	}
	return `${eventType}:sha256:${fingerprint(payload)}`;
}

export function parseQueryParameters(value: unknown): unknown[] {
	if (value === undefined || value === null || value === '') return [];
	if (Array.isArray(value)) return value;
	if (typeof value === 'string') {
		const text = value.trim();
		if (text.startsWith('[')) {
			const parsed = parseJsonParameter(text, 'Query Parameters');
			if (Array.isArray(parsed)) return parsed;
		}
		return text.split(',').map((part) => part.trim());
	}
	return [value];
}

export class OutboxWrite implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Outbox Write',
		name: 'outboxWrite',
		icon: { light: 'file:outboxWrite.svg', dark: 'file:outboxWrite.dark.svg' },
		...commonDescription,
		subtitle: '={{ $parameter["eventType"] + " → " + $parameter["queue"] }}',
		description:
			'Write events to a transactional outbox, optionally together with your own SQL, for reliable delivery',
		defaults: { name: 'Outbox Write' },
		usableAsTool: true,
		outputs: [NodeConnectionTypes.Main],
		credentials: [
			{ name: 'durableJobsPostgresApi', required: true, testedBy: 'durableJobsConnectionTest' },
		],
		properties: [
			{
				displayName: 'Event Type',
				name: 'eventType',
				type: 'string',
				default: '',
				required: true,
				placeholder: 'order.paid',
			},
			{
				displayName: 'Event ID',
				name: 'eventIdSource',
				type: 'options',
				options: [
					{
						name: 'Derive a Stable ID',
						value: 'derive',
						description:
							"The payload's event_id, else event type + its ID, else event type + a payload hash. A repeat with the same payload is accepted once; another payload under the same ID fails (event_id_reused).",
					},
					{ name: 'Custom', value: 'custom' },
				],
				default: 'derive',
			},
			{
				displayName: 'Custom Event ID',
				name: 'eventId',
				type: 'string',
				default: '',
				required: true,
				displayOptions: { show: { eventIdSource: ['custom'] } },
				description:
					'An event with an ID already in the outbox is accepted once (deduplicated: true, its SQL not run again); another payload under that ID fails (event_id_reused)',
			},
			{
				displayName: 'Payload',
				name: 'payloadSource',
				type: 'options',
				options: [
					{
						name: 'Automatic',
						value: 'auto',
						description: 'The request body when the item comes from a Webhook, else the whole item',
					},
					{ name: 'Custom', value: 'custom' },
				],
				default: 'auto',
			},
			{
				displayName: 'Custom Payload',
				name: 'payload',
				type: 'json',
				default: '={{ $json }}',
				displayOptions: { show: { payloadSource: ['custom'] } },
			},
			{
				displayName: 'Outbox Queue',
				name: 'queue',
				type: 'string',
				default: 'outbox',
				description: 'Queue the outbox relay workflow leases from',
			},
			{
				displayName: 'SQL to Run in the Same Transaction',
				name: 'companionSql',
				type: 'string',
				typeOptions: { editor: 'sqlEditor', sqlDialect: 'PostgreSQL' },
				default: '',
				placeholder: 'UPDATE orders SET status = $1 WHERE ID = $2',
				description:
					"Your business write: one statement, without BEGIN or COMMIT (the node holds the transaction). It and the event commit together or not at all. Runs once per item; use $1, $2 … for values. It runs in the credential's database, as the credential's user, with that user's default search path (usually \"$user\", public); the credential's Schema is not on it, so name tables as that user would in any session, or qualify them (schema.table).",
			},
			{
				displayName: 'Query Parameters',
				name: 'queryParameters',
				type: 'string',
				default: '',
				placeholder: '={{ [$json.status, $json.order_id] }}',
				displayOptions: { hide: { companionSql: [''] } },
				description:
					'Values for $1, $2 …: an expression returning an array, or comma-separated values',
			},
			{
				displayName: 'Envelope',
				name: 'envelope',
				type: 'collection',
				placeholder: 'Add field',
				default: {},
				options: [
					{ displayName: 'Correlation ID', name: 'correlationId', type: 'string', default: '' },
					{
						displayName: 'Destination',
						name: 'destination',
						type: 'string',
						default: '',
						description: 'Where the relay delivers the event, e.g. a URL',
					},
					{ displayName: 'Event Version', name: 'eventVersion', type: 'number', default: 1 },
					{
						displayName: 'Max Delivery Attempts',
						name: 'maxAttempts',
						type: 'number',
						typeOptions: { minValue: 1 },
						default: 10,
					},
					{
						displayName: 'Occurred At',
						name: 'occurredAt',
						type: 'string',
						default: '',
						description:
							"When it happened (ISO 8601); default now. A time without an offset is in the workflow's time zone.",
					},
					{
						displayName: 'Ordering Key',
						name: 'orderingKey',
						type: 'string',
						default: '',
						description: 'Events with the same key are delivered one at a time, in order',
					},
					{ displayName: 'Source', name: 'source', type: 'string', default: '' },
					{ displayName: 'Tenant ID', name: 'tenantId', type: 'string', default: '' },
				],
			},
		],
	};

	methods = credentialTestMethods;

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const store = lazyStore(this);
		return await runBatch<OutboxEventInput, OutboxResult>(this, {
			outputs: 1,
			read: (itemIndex, item) => {
				const envelope = this.getNodeParameter('envelope', itemIndex, {}) as IDataObject;
				const eventType = this.getNodeParameter('eventType', itemIndex) as string;
				if (!eventType)
					throw invalidInput('eventType', 'is empty', 'Set Event Type, e.g. order.paid');
				const payload =
					this.getNodeParameter('payloadSource', itemIndex, 'auto') === 'custom'
						? parseJsonParameter(this.getNodeParameter('payload', itemIndex), 'Custom Payload')
						: itemPayload(item.json);
				let eventId: string;
				if (this.getNodeParameter('eventIdSource', itemIndex, 'derive') === 'custom') {
					const customId = this.getNodeParameter('eventId', itemIndex) as unknown;
					// An expression may return a number (e.g. the source's numeric event id); ids are text.
					eventId = (typeof customId === 'number' ? String(customId) : customId) as string;
				} else {
					eventId = deriveEventId(eventType, payload);
				}
				const companionSql =
					(this.getNodeParameter('companionSql', itemIndex, '') as string) || null;
				return {
					eventId,
					eventType,
					payload,
					queue: this.getNodeParameter('queue', itemIndex, 'outbox') as string,
					eventVersion: envelope.eventVersion as number | undefined,
					occurredAt: dateParameter(envelope.occurredAt, this.getTimezone(), 'Occurred At'),
					source: (envelope.source as string) || null,
					tenantId: (envelope.tenantId as string) || null,
					correlationId: (envelope.correlationId as string) || null,
					orderingKey: (envelope.orderingKey as string) || null,
					destination: (envelope.destination as string) || null,
					maxAttempts: envelope.maxAttempts as number | undefined,
					companionSql,
					companionParams: companionSql
						? parseQueryParameters(this.getNodeParameter('queryParameters', itemIndex, ''))
						: [],
				};
			},
			call: async (inputs, allOrNothing) =>
				await (await store()).writeOutbox(inputs, { allOrNothing }),
			route: (result, itemIndex) => ({
				output: 0,
				json: {
					...this.getInputData()[itemIndex].json,
					outbox: {
						event_id: result.eventId,
						job_id: result.jobId,
						queue: result.queue,
						status: result.status,
						deduplicated: result.deduplicated,
						sql_row_count: result.companionRowCount,
						sql_rows: result.companionRows as IDataObject[],
					},
				},
			}),
		});
	}
}
