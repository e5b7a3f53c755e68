import {
	NodeConnectionTypes,
	type IDataObject,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import {
	DEFAULT_MAX_PAYLOAD_BYTES,
	DURATION_LIMITS_MS,
	type EnqueueInput,
	type EnqueueResult,
} from '../../src/core';
import { lazyStore } from '../shared/connection';
import { dateParameter } from '../shared/dates';
import {
	headerValue,
	itemPayload,
	parseJsonParameter,
	runBatch,
	secondsToMs,
	sizeLimitOption,
} from '../shared/batch';
import {
	commonDescription,
	credentialTestMethods,
	optionsCollection,
	queueField,
} from '../shared/descriptions';

const DEFAULT_MAX_PAYLOAD_KB = DEFAULT_MAX_PAYLOAD_BYTES / 1024;

export class JobEnqueue implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Job Enqueue',
		name: 'jobEnqueue',
		icon: { light: 'file:jobEnqueue.svg', dark: 'file:jobEnqueue.dark.svg' },
		...commonDescription,
		subtitle: '={{ "into " + $parameter["queue"] }}',
		description:
			'Store one durable job per item in a PostgreSQL queue and return its job ID at once',
		defaults: { name: 'Job Enqueue' },
		usableAsTool: true,
		outputs: [NodeConnectionTypes.Main],
		credentials: [
			{ name: 'durableJobsPostgresApi', required: true, testedBy: 'durableJobsConnectionTest' },
		],
		properties: [
			queueField,
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
					{ name: 'Whole Item', value: 'item', description: 'The whole item JSON' },
					{ name: 'Custom', value: 'custom', description: 'A JSON value or expression' },
				],
				default: 'auto',
			},
			{
				displayName: 'Custom Payload',
				name: 'payload',
				type: 'json',
				default: '={{ $json }}',
				displayOptions: { show: { payloadSource: ['custom'] } },
				description: 'JSON the worker receives as the job payload',
			},
			{
				displayName: 'Idempotency Key',
				name: 'idempotencyKey',
				type: 'string',
				default: '',
				placeholder: '={{ $json.body.order_id }}',
				description:
					'A key that identifies this request. The same key with the same payload returns the existing job instead of a new one. Empty: the Idempotency-Key request header when the item comes from a Webhook.',
			},
			optionsCollection([
				{
					displayName: 'Callback URL',
					name: 'callbackUrl',
					type: 'string',
					default: '',
					description:
						'URL that receives a signed job-finished event (through the callback relay workflow)',
				},
				{
					displayName: 'Correlation ID',
					name: 'correlationId',
					type: 'string',
					default: '',
					description: 'Your own ID to trace the job across systems',
				},
				{
					displayName: 'Delay Seconds',
					name: 'delaySeconds',
					type: 'number',
					typeOptions: { minValue: 0 },
					default: 0,
					description: 'Do not start the job before this many seconds have passed',
				},
				{
					displayName: 'Max Attempts',
					name: 'maxAttempts',
					type: 'number',
					typeOptions: { minValue: 1, maxValue: 1000 },
					default: 5,
					description: 'After this many attempts a retrying or crashed job is failed (dead letter)',
				},
				{
					displayName: 'Max Payload Size (KB)',
					name: 'maxPayloadKb',
					type: 'number',
					typeOptions: { minValue: 1 },
					default: DEFAULT_MAX_PAYLOAD_KB,
					description:
						'Larger payloads are rejected with a clear error; store big documents elsewhere and enqueue a reference',
				},
				{
					displayName: 'On Key Reused With Other Payload',
					name: 'onConflict',
					type: 'options',
					options: [
						{
							name: 'Error (HTTP 422)',
							value: 'error',
							description: 'Reject the item; nothing is written',
						},
						{
							name: 'Return Existing Job',
							value: 'existing',
							description: 'Return the job stored under the key, with conflict: true',
						},
					],
					default: 'error',
				},
				{
					displayName: 'Ordering Key',
					name: 'orderingKey',
					type: 'string',
					default: '',
					description:
						'Jobs with the same ordering key run one at a time, in the order they were enqueued',
				},
				{
					displayName: 'Priority',
					name: 'priority',
					type: 'number',
					typeOptions: { minValue: -1000, maxValue: 1000 },
					default: 0,
					description: 'Higher runs first',
				},
				{
					displayName: 'Run At',
					name: 'runAt',
					type: 'dateTime',
					default: '',
					description:
						"Do not start the job before this time. A time without an offset is in the workflow's time zone, as in n8n's own nodes.",
				},
				{
					displayName: 'Status URL Base',
					name: 'statusUrlBase',
					type: 'string',
					default: '/webhook/jobs/status',
					description:
						'Base of the status_url returned for each job; job_id and token are added as query parameters',
				},
			]),
		],
	};

	methods = credentialTestMethods;

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		// The execution's settings come from the first item, read one by one: reading the whole
		// collection would evaluate the expressions it holds for each item (a receiver's Callback
		// URL and Correlation ID, say) once more, and evaluating them is most of what the node
		// costs in n8n (about 1.3 ms per collection read; docs/PERFORMANCE.md, fourteenth part).
		const payloadLimit = sizeLimitOption(
			this,
			'maxPayloadKb',
			'Max Payload Size (KB)',
			DEFAULT_MAX_PAYLOAD_KB,
		);
		const store = lazyStore(this, payloadLimit.storeOptions);
		const onConflict =
			this.getNodeParameter('options.onConflict', 0, 'error') === 'existing' ? 'existing' : 'error';
		const statusUrlBases: string[] = [];

		return await runBatch<EnqueueInput, EnqueueResult>(this, {
			outputs: 1,
			read: (itemIndex, item) => {
				if (payloadLimit.refusal !== undefined) throw payloadLimit.refusal;
				const options = this.getNodeParameter('options', itemIndex, {}) as IDataObject;
				const source = this.getNodeParameter('payloadSource', itemIndex, 'auto') as string;
				let payload: unknown;
				if (source === 'custom')
					payload = parseJsonParameter(
						this.getNodeParameter('payload', itemIndex),
						'Custom Payload',
					);
				else if (source === 'item') payload = item.json;
				else payload = itemPayload(item.json);
				const rawKey = this.getNodeParameter('idempotencyKey', itemIndex, '') as unknown;
				// An expression may return a number (e.g. an order number); keys are text. One that
				// finds nothing (null, undefined) is no key, as an empty one is: the header is used.
				const explicitKey = (
					typeof rawKey === 'number' ? String(rawKey) : (rawKey ?? '')
				) as string;
				statusUrlBases[itemIndex] = String(options.statusUrlBase ?? '/webhook/jobs/status');
				return {
					queue: this.getNodeParameter('queue', itemIndex) as string,
					payload,
					idempotencyKey:
						explicitKey !== '' ? explicitKey : (headerValue(item.json, 'idempotency-key') ?? null),
					priority: options.priority as number | undefined,
					delayMs: secondsToMs(options.delaySeconds, 'Delay Seconds', DURATION_LIMITS_MS.delay),
					runAt: dateParameter(options.runAt, this.getTimezone(), 'Run At'),
					maxAttempts: options.maxAttempts as number | undefined,
					orderingKey: (options.orderingKey as string) || null,
					callbackUrl: (options.callbackUrl as string) || null,
					correlationId: (options.correlationId as string) || null,
				};
			},
			call: async (inputs, allOrNothing) =>
				await (await store()).enqueue(inputs, { allOrNothing, onConflict }),
			route: (result, itemIndex, input) => ({
				output: 0,
				json: {
					job_id: result.jobId,
					status: result.status,
					queue: input.queue,
					status_url: result.statusToken
						? statusUrl(statusUrlBases[itemIndex], result.jobId, result.statusToken)
						: null,
					status_token: result.statusToken,
					deduplicated: result.deduplicated,
					...(result.conflict ? { conflict: true } : {}),
					run_at: result.runAt.toISOString(),
					idempotency_key: input.idempotencyKey ?? null,
				},
			}),
		});
	}
}

function statusUrl(base: string, jobId: string, token: string): string {
	const separator = base.includes('?') ? '&' : '?';
	return `${base}${separator}job_id=${encodeURIComponent(jobId)}&token=${encodeURIComponent(token)}`;
}
