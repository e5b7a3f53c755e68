import { createHash } from 'node:crypto';
import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeProperties,
} from 'n8n-workflow';

import {
	DURATION_LIMITS_MS,
	canonicalJson,
	fingerprint,
	validateKey,
	type ClaimInput,
	type ClaimResult,
} from '../../../../src/core';
import { itemPayload, runBatch, secondsToMs } from '../../../shared/batch';
import { lazyStore } from '../../../shared/connection';
import { dateParameter } from '../../../shared/dates';
import { invalidInput } from '../../../shared/errors';
import { withDisplayOptions } from '../../../shared/operations';
import { settleOptions } from './settle';

const ROUTES = ['new', 'duplicate', 'in_progress', 'conflict', 'stale'] as const;

const properties: INodeProperties[] = [
	{
		displayName: 'Key From',
		name: 'keySource',
		type: 'options',
		options: [
			{ name: 'Key', value: 'key', description: 'An expression or value, e.g. the event ID' },
			{ name: 'Fields', value: 'fields', description: 'The values of chosen fields, joined' },
			{
				name: 'Payload Hash',
				value: 'payloadHash',
				description: 'A SHA-256 of the payload (the webhook body, else the item)',
			},
		],
		default: 'key',
	},
	{
		displayName: 'Key',
		name: 'key',
		type: 'string',
		default: '',
		placeholder: '={{ $json.body.event_id }}',
		required: true,
		displayOptions: { show: { keySource: ['key'] } },
	},
	{
		displayName: 'Key Fields',
		name: 'keyFields',
		type: 'string',
		default: '',
		placeholder: 'body.source, body.external_id, body.status',
		required: true,
		displayOptions: { show: { keySource: ['fields'] } },
		description:
			'Comma-separated dotted paths whose values make up the key, joined with ":" (a ":" or "\\" inside a value is escaped with "\\")',
	},
	{
		displayName: 'Conflict Check',
		name: 'fingerprintSource',
		type: 'options',
		options: [
			{
				name: 'Payload',
				value: 'payload',
				description: 'The same key with a different payload goes to Conflict',
			},
			{ name: 'Off', value: 'none', description: 'Only the key matters' },
		],
		default: 'payload',
	},
	{
		displayName: 'Late-Event Guard',
		name: 'lateEventGuard',
		type: 'boolean',
		default: false,
		description:
			'Whether to route events older than the newest one applied to the same entity (or moving its state backwards) to Stale',
	},
	...withDisplayOptions({ show: { lateEventGuard: [true] } }, [
		{
			displayName: 'Entity Key',
			name: 'entityKey',
			type: 'string',
			default: '',
			placeholder: '={{ $json.body.order_id }}',
			required: true,
		},
		{
			displayName: 'Version',
			name: 'version',
			type: 'string',
			default: '',
			placeholder: '={{ $json.body.version }}',
			description:
				'A number that grows with every change of the entity (leave empty to use Occurred At)',
		},
		{
			displayName: 'Occurred At',
			name: 'occurredAt',
			type: 'string',
			default: '',
			placeholder: '={{ $json.body.occurred_at }}',
			description:
				"When the event happened at the source (ISO 8601). A time without an offset is in the workflow's time zone.",
		},
		{
			displayName: 'State',
			name: 'state',
			type: 'string',
			default: '',
			placeholder: '={{ $json.body.status }}',
		},
		{
			displayName: 'State Order',
			name: 'stateOrder',
			type: 'string',
			default: '',
			placeholder: 'pending, paid, shipped, refunded',
			description:
				'Comma-separated states in the only order they may advance; an event moving backwards is Stale',
		},
	]),
];

export const description = withDisplayOptions({ show: { operation: ['claim'] } }, properties);

/** Reads a dotted path such as body.order.id from an item. */
function pathValue(json: IDataObject, path: string): unknown {
	return path
		.split('.')
		.reduce<unknown>(
			(value, key) =>
				value !== null && typeof value === 'object' ? (value as IDataObject)[key] : undefined,
			json,
		);
}

export function keyFromFields(json: IDataObject, fields: string[]): string {
	const values = fields.map((field) => {
		const value = pathValue(json, field);
		if (value === undefined || value === null || value === '') {
			throw invalidInput(
				'keyFields',
				`the item has no value at "${field}"`,
				`Check the field path "${field}" (dotted, e.g. body.order_id), or choose another key source`,
			);
		}
		return typeof value === 'object' ? canonicalJson(value) : String(value);
	});
	// With several fields, a ':' inside a value would let two different sets of values give one
	// key ('a:b' + 'c' and 'a' + 'b:c'); escaping changes no key whose values hold no ':' or '\'.
	const key =
		values.length === 1
			? values[0]
			: values.map((value) => value.replace(/[\\:]/g, (char) => `\\${char}`)).join(':');
	return key.length <= 200 ? key : `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

function commaList(text: string): string[] {
	return text
		.split(',')
		.map((entry) => entry.trim())
		.filter(Boolean);
}

/** The item's key, from the source the node is set to. */
function itemKey(
	context: IExecuteFunctions,
	itemIndex: number,
	item: INodeExecutionData,
	payload: unknown,
): string {
	const keySource = context.getNodeParameter('keySource', itemIndex, 'key') as string;
	if (keySource === 'fields') {
		const fields = commaList(String(context.getNodeParameter('keyFields', itemIndex, '')));
		if (fields.length === 0)
			throw invalidInput(
				'keyFields',
				'no field paths given',
				'List one or more dotted paths, e.g. body.source, body.id',
			);
		return keyFromFields(item.json, fields);
	}
	if (keySource === 'payloadHash') return `sha256:${fingerprint(payload)}`;
	const raw = context.getNodeParameter('key', itemIndex, '') as unknown;
	if (raw === undefined || raw === null || raw === '') {
		throw invalidInput(
			'key',
			'the key is empty for this item',
			'Point Key at a field every item has (e.g. the event ID), or choose Key From: Payload Hash',
		);
	}
	return validateKey(String(raw), 'key');
}

function lateEventGuard(context: IExecuteFunctions, itemIndex: number): ClaimInput['guard'] {
	const stateOrder = commaList(String(context.getNodeParameter('stateOrder', itemIndex, '') || ''));
	return {
		entityKey: String(context.getNodeParameter('entityKey', itemIndex, '') ?? ''),
		version: (context.getNodeParameter('version', itemIndex, '') as string | number) ?? null,
		occurredAt: dateParameter(
			context.getNodeParameter('occurredAt', itemIndex, ''),
			context.getTimezone(),
			'Occurred At',
		),
		state: (context.getNodeParameter('state', itemIndex, '') as string) || null,
		stateOrder: stateOrder.length > 0 ? stateOrder : null,
	};
}

function claimJson(result: ClaimResult, input: ClaimInput): IDataObject {
	return {
		scope: input.scope,
		key: input.key,
		route: result.route,
		claim_id: result.claimId,
		replay: result.replay,
		claims: result.claims,
		claim_until: result.claimUntil ? result.claimUntil.toISOString() : null,
		first_seen_at: result.firstSeenAt ? result.firstSeenAt.toISOString() : null,
		stored_result: (result.storedResult ?? null) as IDataObject | null,
		...(result.current
			? {
					current: {
						version: result.current.version,
						occurred_at: result.current.occurredAt ? result.current.occurredAt.toISOString() : null,
						state: result.current.state,
					},
				}
			: {}),
	};
}

/** Claims every item's key in one statement and routes it: New, Duplicate, In Progress, Conflict (, Stale). */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const store = lazyStore(this);
	const guardEnabled = this.getNodeParameter('lateEventGuard', 0, false) as boolean;
	return await runBatch<ClaimInput, ClaimResult>(this, {
		outputs: guardEnabled ? 5 : 4,
		errorOutput: 2,
		read: (itemIndex, item) => {
			const options = settleOptions(this, itemIndex);
			const payload = itemPayload(item.json);
			const key = itemKey(this, itemIndex, item, payload);
			const guard = guardEnabled ? lateEventGuard(this, itemIndex) : null;
			return {
				// Checked before the batch is sent, so without "continue" a bad key claims nothing.
				scope: validateKey(this.getNodeParameter('scope', itemIndex), 'scope'),
				key,
				fingerprint:
					this.getNodeParameter('fingerprintSource', itemIndex, 'payload') === 'payload'
						? fingerprint(payload)
						: null,
				claimMs: secondsToMs(
					options.claimTimeoutSeconds,
					'Claim Timeout Seconds',
					DURATION_LIMITS_MS.claim,
				),
				ttlMs: options.ttlMs ?? undefined,
				guard,
			};
		},
		call: async (inputs, allOrNothing) => await (await store()).claim(inputs, { allOrNothing }),
		route: (result, itemIndex, input) => ({
			output: ROUTES.indexOf(result.route),
			json: { ...this.getInputData()[itemIndex].json, idempotency: claimJson(result, input) },
		}),
	});
}
