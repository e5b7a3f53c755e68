import { createHash } from 'node:crypto';
import {
	NodeConnectionTypes,
	type IDataObject,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import {
	canonicalJson,
	fingerprint,
	type ClaimInput,
	type ClaimResult,
	type SettleInput,
	type SettleResult,
} from '../../src/core';
import { validateKey, validateUuid } from '../../src/core/validate';
import { itemPayload, parseJsonParameter, runBatch, secondsToMs } from '../shared/batch';
import { lazyStore } from '../shared/connection';
import { testDurableJobsConnection } from '../shared/credentialTest';
import { invalidInput } from '../shared/errors';

const ROUTES = ['new', 'duplicate', 'in_progress', 'conflict', 'stale'] as const;

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
	const key = values.join(':');
	return key.length <= 200 ? key : `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

export class IdempotencyCheck implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Idempotency Check',
		name: 'idempotencyCheck',
		icon: { light: 'file:idempotencyCheck.svg', dark: 'file:idempotencyCheck.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle: '={{ $parameter["operation"] + " in " + $parameter["scope"] }}',
		description:
			'Process each event or request once: route new, duplicate, in-progress, conflicting and late items apart',
		defaults: { name: 'Idempotency Check' },
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		outputs: `={{ $parameter["operation"] !== "claim" ? [{ "type": "main", "displayName": "Settled" }, { "type": "main", "displayName": "Claim Lost" }] : [{ "type": "main", "displayName": "New" }, { "type": "main", "displayName": "Duplicate" }, { "type": "main", "displayName": "In Progress" }, { "type": "main", "displayName": "Conflict" }].concat($parameter["lateEventGuard"] ? [{ "type": "main", "displayName": "Stale" }] : []) }}`,
		credentials: [
			{ name: 'durableJobsPostgresApi', required: true, testedBy: 'durableJobsConnectionTest' },
		],
		properties: [
			{
				displayName: 'Operation',
				name: 'operation',
				type: 'options',
				noDataExpression: true,
				options: [
					{
						name: 'Claim',
						value: 'claim',
						action: 'Claim an idempotency key',
						description: 'Check a key and claim it if it is new',
					},
					{
						name: 'Complete',
						value: 'complete',
						action: 'Complete a claim',
						description: 'Store the result: later items with the key go to Duplicate and carry it',
					},
					{
						name: 'Fail / Release',
						value: 'fail',
						action: 'Fail or release a claim',
						description:
							'Mark the claim failed so a retry of the event is processed again (as a replay)',
					},
				],
				default: 'claim',
			},
			{
				displayName: 'Scope',
				name: 'scope',
				type: 'string',
				default: 'default',
				required: true,
				description: 'Keys are unique per scope, e.g. one scope per source system',
			},
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
				displayOptions: { show: { operation: ['claim'] } },
			},
			{
				displayName: 'Key',
				name: 'key',
				type: 'string',
				default: '',
				placeholder: '={{ $json.body.event_id }}',
				required: true,
				displayOptions: { show: { operation: ['claim'], keySource: ['key'] } },
			},
			{
				displayName: 'Key Fields',
				name: 'keyFields',
				type: 'string',
				default: '',
				placeholder: 'body.source, body.external_id, body.status',
				required: true,
				displayOptions: { show: { operation: ['claim'], keySource: ['fields'] } },
				description: 'Comma-separated dotted paths whose values make up the key',
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
				displayOptions: { show: { operation: ['claim'] } },
			},
			{
				displayName: 'Late-Event Guard',
				name: 'lateEventGuard',
				type: 'boolean',
				default: false,
				displayOptions: { show: { operation: ['claim'] } },
				description:
					'Whether to route events older than the newest one applied to the same entity (or moving its state backwards) to Stale',
			},
			{
				displayName: 'Entity Key',
				name: 'entityKey',
				type: 'string',
				default: '',
				placeholder: '={{ $json.body.order_id }}',
				required: true,
				displayOptions: { show: { operation: ['claim'], lateEventGuard: [true] } },
			},
			{
				displayName: 'Version',
				name: 'version',
				type: 'string',
				default: '',
				placeholder: '={{ $json.body.version }}',
				displayOptions: { show: { operation: ['claim'], lateEventGuard: [true] } },
				description:
					'A number that grows with every change of the entity (leave empty to use Occurred At)',
			},
			{
				displayName: 'Occurred At',
				name: 'occurredAt',
				type: 'string',
				default: '',
				placeholder: '={{ $json.body.occurred_at }}',
				displayOptions: { show: { operation: ['claim'], lateEventGuard: [true] } },
				description: 'When the event happened at the source (ISO 8601)',
			},
			{
				displayName: 'State',
				name: 'state',
				type: 'string',
				default: '',
				placeholder: '={{ $json.body.status }}',
				displayOptions: { show: { operation: ['claim'], lateEventGuard: [true] } },
			},
			{
				displayName: 'State Order',
				name: 'stateOrder',
				type: 'string',
				default: '',
				placeholder: 'pending, paid, shipped, refunded',
				displayOptions: { show: { operation: ['claim'], lateEventGuard: [true] } },
				description:
					'Comma-separated states in the only order they may advance; an event moving backwards is Stale',
			},
			{
				displayName: 'Key',
				name: 'settleKey',
				type: 'string',
				default: '={{ $json.idempotency.key }}',
				required: true,
				displayOptions: { show: { operation: ['complete', 'fail'] } },
			},
			{
				displayName: 'Claim ID',
				name: 'claimId',
				type: 'string',
				default: '={{ $json.idempotency.claim_id }}',
				displayOptions: { show: { operation: ['complete', 'fail'] } },
				description:
					'From the Claim output. It fences the write: a claimer whose claim expired and was taken over cannot settle it.',
			},
			{
				displayName: 'Result',
				name: 'result',
				type: 'json',
				default: '={{ $json }}',
				displayOptions: { show: { operation: ['complete'] } },
				description: 'Stored with the key; duplicates of the event carry it',
			},
			{
				displayName: 'Error Message',
				name: 'errorMessage',
				type: 'string',
				default: '',
				displayOptions: { show: { operation: ['fail'] } },
			},
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add option',
				default: {},
				options: [
					{
						displayName: 'Claim Timeout Seconds',
						name: 'claimTimeoutSeconds',
						type: 'number',
						typeOptions: { minValue: 1 },
						default: 300,
						description:
							'A claim not completed or failed by then may be taken over (the item is then a replay)',
					},
					{
						displayName: 'Keep Keys For (Hours)',
						name: 'ttlHours',
						type: 'number',
						typeOptions: { minValue: 0.001 },
						default: 24,
						description:
							'How long a key is remembered in this scope; after that the same key is new again',
					},
				],
			},
		],
	};

	methods = { credentialTest: { durableJobsConnectionTest: testDurableJobsConnection } };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const operation = this.getNodeParameter('operation', 0) as string;
		const store = lazyStore(this);
		if (operation === 'complete' || operation === 'fail') {
			return await runBatch<SettleInput, SettleResult>(this, {
				outputs: 2,
				read: (itemIndex) => {
					const options = this.getNodeParameter('options', itemIndex, {}) as IDataObject;
					const claimId = this.getNodeParameter('claimId', itemIndex, '') as unknown;
					return {
						// Keys and ids are checked before the batch is sent, so without "continue" a bad
						// item stops the node before any claim of the batch is settled.
						scope: validateKey(this.getNodeParameter('scope', itemIndex), 'scope'),
						key: validateKey(this.getNodeParameter('settleKey', itemIndex), 'key'),
						claimId: claimId ? validateUuid(claimId, 'claimId') : null,
						result:
							operation === 'complete'
								? parseJsonParameter(this.getNodeParameter('result', itemIndex, null), 'Result')
								: undefined,
						errorMessage:
							operation === 'fail'
								? (this.getNodeParameter('errorMessage', itemIndex, '') as string) || null
								: null,
						ttlMs:
							options.ttlHours === undefined
								? null
								: Math.round(Number(options.ttlHours) * 3600_000),
					};
				},
				call: async (inputs, allOrNothing) =>
					operation === 'complete'
						? await (await store()).completeClaims(inputs, { allOrNothing })
						: await (await store()).failClaims(inputs, { allOrNothing }),
				route: (result, itemIndex, input) => ({
					output: result.applied ? 0 : 1,
					json: {
						...this.getInputData()[itemIndex].json,
						idempotency: {
							scope: input.scope,
							key: input.key,
							claim_id: input.claimId ?? null,
							status: result.applied
								? operation === 'complete'
									? 'completed'
									: 'failed'
								: result.currentStatus,
							settled: result.applied,
							expires_at: result.expiresAt ? result.expiresAt.toISOString() : null,
						},
					},
				}),
			});
		}

		const guardEnabled = this.getNodeParameter('lateEventGuard', 0, false) as boolean;
		return await runBatch<ClaimInput, ClaimResult>(this, {
			outputs: guardEnabled ? 5 : 4,
			read: (itemIndex, item) => {
				const options = this.getNodeParameter('options', itemIndex, {}) as IDataObject;
				const keySource = this.getNodeParameter('keySource', itemIndex, 'key') as string;
				const payload = itemPayload(item.json);
				let key: string;
				if (keySource === 'fields') {
					const fields = String(this.getNodeParameter('keyFields', itemIndex, ''))
						.split(',')
						.map((field) => field.trim())
						.filter(Boolean);
					if (fields.length === 0)
						throw invalidInput(
							'keyFields',
							'no field paths given',
							'List one or more dotted paths, e.g. body.source, body.id',
						);
					key = keyFromFields(item.json, fields);
				} else if (keySource === 'payloadHash') {
					key = `sha256:${fingerprint(payload)}`;
				} else {
					const raw = this.getNodeParameter('key', itemIndex, '') as unknown;
					if (raw === undefined || raw === null || raw === '') {
						throw invalidInput(
							'key',
							'the key is empty for this item',
							'Point Key at a field every item has (e.g. the event ID), or choose Key From: Payload Hash',
						);
					}
					key = validateKey(String(raw), 'key');
				}
				let guard: ClaimInput['guard'] = null;
				if (guardEnabled) {
					const stateOrder = String(this.getNodeParameter('stateOrder', itemIndex, '') || '')
						.split(',')
						.map((state) => state.trim())
						.filter(Boolean);
					guard = {
						entityKey: String(this.getNodeParameter('entityKey', itemIndex, '') ?? ''),
						version: (this.getNodeParameter('version', itemIndex, '') as string | number) ?? null,
						occurredAt: (this.getNodeParameter('occurredAt', itemIndex, '') as string) || null,
						state: (this.getNodeParameter('state', itemIndex, '') as string) || null,
						stateOrder: stateOrder.length > 0 ? stateOrder : null,
					};
				}
				return {
					// Checked before the batch is sent, so without "continue" a bad key claims nothing.
					scope: validateKey(this.getNodeParameter('scope', itemIndex), 'scope'),
					key,
					fingerprint:
						this.getNodeParameter('fingerprintSource', itemIndex, 'payload') === 'payload'
							? fingerprint(payload)
							: null,
					claimMs: secondsToMs(options.claimTimeoutSeconds, 'Claim Timeout Seconds'),
					ttlMs:
						options.ttlHours === undefined
							? undefined
							: Math.round(Number(options.ttlHours) * 3600_000),
					guard,
				};
			},
			call: async (inputs, allOrNothing) => await (await store()).claim(inputs, { allOrNothing }),
			route: (result, itemIndex, input) => ({
				output: ROUTES.indexOf(result.route),
				json: {
					...this.getInputData()[itemIndex].json,
					idempotency: {
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
										occurred_at: result.current.occurredAt
											? result.current.occurredAt.toISOString()
											: null,
										state: result.current.state,
									},
								}
							: {}),
					},
				},
			}),
		});
	}
}
