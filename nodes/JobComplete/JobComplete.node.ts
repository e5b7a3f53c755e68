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
	ALSO_RETRY_STATUS_RANGE,
	classifyHttpStatus,
	retryAfterMs,
	validateUuid,
	type CompleteInput,
	type CompleteOutcome,
	type CompleteResult,
	type ErrorClass,
} from '../../src/core';
import { parseJsonParameter, runBatch, secondsToMs, sizeLimitOption } from '../shared/batch';
import { lazyStore } from '../shared/connection';
import {
	attemptIdField,
	commonDescription,
	credentialTestMethods,
	jobIdField,
	optionsCollection,
} from '../shared/descriptions';
import { invalidInput } from '../shared/errors';
import {
	leasedAttemptId,
	leasedJobId,
	readUpstreamField,
	upstreamNotice,
} from '../shared/upstream';

const DEFAULT_MAX_RESULT_KB = DEFAULT_MAX_PAYLOAD_BYTES / 1024;

/**
 * *HTTP Status*'s default: the status code of an HTTP Request node's item (with "Include
 * Response Headers and Status" on), or 0 (no answer) for an item of its error output, which
 * carries `error` and, merged in, the input item's fields (a statusCode of an earlier call among
 * them). The bundled templates set the same expression.
 */
export const HTTP_STATUS_FROM_ITEM =
	'={{ $json.error === undefined ? ($json.statusCode ?? 0) : 0 }}';

const ALSO_RETRY = 'Also Retry Statuses';

/**
 * *Also Retry Statuses*: 4xx status codes, comma-separated (an expression may give a number or
 * an array). Anything else is refused naming the option, before anything is written.
 */
export function parseAlsoRetryStatuses(value: unknown): number[] {
	if (value === undefined || value === null || value === '') return [];
	const entries = Array.isArray(value)
		? value
		: typeof value === 'number'
			? [value]
			: String(value)
					.split(',')
					.map((entry) => entry.trim())
					.filter((entry) => entry !== '');
	return entries.map((entry) => {
		const text = String(entry).trim();
		const status = /^\d{3}$/.test(text) ? Number(text) : Number.NaN;
		if (!(status >= ALSO_RETRY_STATUS_RANGE.min && status <= ALSO_RETRY_STATUS_RANGE.max)) {
			throw invalidInput(
				ALSO_RETRY,
				`"${text.slice(0, 40)}" is not a 4xx status code`,
				'List 4xx status codes separated by commas, e.g. 409 for a request sent with an Idempotency-Key (408, 425, 429, 5xx and no answer are retried anyway)',
			);
		}
		return status;
	});
}

/** A response header of an HTTP Request node's item, whatever the case of its name. */
function responseHeader(json: IDataObject, name: string): unknown {
	const headers = json.headers;
	if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) return undefined;
	const key = Object.keys(headers).find((candidate) => candidate.toLowerCase() === name);
	return key === undefined ? undefined : (headers as IDataObject)[key];
}

export class JobComplete implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Job Complete',
		name: 'jobComplete',
		icon: { light: 'file:jobComplete.svg', dark: 'file:jobComplete.dark.svg' },
		...commonDescription,
		// 2: HTTP Status reads the HTTP Request node's status by default (it was 0, no answer).
		version: [1, 2],
		defaultVersion: 2,
		subtitle: '={{ "outcome: " + $parameter["outcome"] }}',
		description: 'Finish, retry, fail or release a leased job, fenced by its attempt',
		defaults: { name: 'Job Complete' },
		usableAsTool: true,
		outputs: [NodeConnectionTypes.Main, NodeConnectionTypes.Main],
		outputNames: ['Completed', 'Lease Lost'],
		credentials: [
			{ name: 'durableJobsPostgresApi', required: true, testedBy: 'durableJobsConnectionTest' },
		],
		properties: [
			upstreamNotice('Job ID and Attempt ID', [leasedJobId, leasedAttemptId]),
			jobIdField,
			attemptIdField,
			{
				displayName: 'Outcome',
				name: 'outcome',
				type: 'options',
				options: [
					{
						name: 'Failed',
						value: 'failed',
						description: 'Permanent problem: dead-letter the job with an error code and class',
					},
					{
						name: 'From HTTP Status',
						value: 'httpStatus',
						description:
							'2xx succeeded; 408/425/429/5xx/no answer (and the statuses of Options → Also Retry Statuses) retry; other 4xx failed (needs_mapping); 1xx/3xx failed (needs_manual_review)',
					},
					{
						name: 'Release',
						value: 'release',
						description: 'Give the job back without using up an attempt',
					},
					{
						name: 'Retry',
						value: 'retry',
						description:
							'Transient problem: run again later with backoff; after the last attempt the job fails',
					},
					{
						name: 'Succeeded',
						value: 'succeeded',
						description: 'The job is done; store its result',
					},
				],
				default: 'succeeded',
			},
			// Version 1 defaulted to 0 (no answer). A saved workflow stores no value left at its
			// default, so a new default would change what version 1 nodes already do. '@version'
			// comes first: n8n shows a field whose condition is an expression (an Outcome set by
			// one) without checking the conditions after it.
			{
				displayName: 'HTTP Status',
				name: 'httpStatus',
				type: 'number',
				default: 0,
				displayOptions: { show: { '@version': [1], outcome: ['httpStatus'] } },
				description:
					'Status code of the external call (0 or empty means no answer: timeout or connection error). Map it to the status code of the HTTP Request node before this one, with "Include Response Headers and Status" and "Never Error" on in that node (a new Job Complete reads it by default).',
			},
			{
				displayName: 'HTTP Status',
				name: 'httpStatus',
				type: 'number',
				default: HTTP_STATUS_FROM_ITEM,
				displayOptions: { show: { '@version': [{ _cnd: { gte: 2 } }], outcome: ['httpStatus'] } },
				description:
					'Status code of the external call; 0 or empty means no answer (timeout, connection error). The default reads the HTTP Request node right before this one. In it, turn on Options → Response → "Include Response Headers and Status" and "Never Error", set Settings → On Error to "Continue (using error output)", and connect both of its outputs to this node: a timeout or a refused connection still fails with Never Error on, and only on the error output does it reach this node as no answer (a retry).',
			},
			{
				displayName: 'Result',
				name: 'resultSource',
				type: 'options',
				options: [
					{ name: 'Whole Item', value: 'item' },
					{ name: 'Custom', value: 'custom' },
					{ name: 'None', value: 'none' },
				],
				default: 'item',
				displayOptions: { show: { outcome: ['succeeded', 'httpStatus'] } },
				description: 'What to store as the job result (shown by Job Status when the job is done)',
			},
			{
				displayName: 'Custom Result',
				name: 'result',
				type: 'json',
				default: '={{ $json }}',
				displayOptions: {
					show: { resultSource: ['custom'], outcome: ['succeeded', 'httpStatus'] },
				},
			},
			{
				displayName: 'Error Code',
				name: 'errorCode',
				type: 'string',
				default: '',
				placeholder: 'crm_rejected',
				displayOptions: { show: { outcome: ['failed', 'retry', 'httpStatus'] } },
				description:
					'Short machine-readable reason (From HTTP Status: http_&lt;status&gt; when empty)',
			},
			{
				displayName: 'Error Message',
				name: 'errorMessage',
				type: 'string',
				default: '',
				displayOptions: { show: { outcome: ['failed', 'retry', 'httpStatus'] } },
			},
			{
				displayName: 'Error Class',
				name: 'errorClass',
				type: 'options',
				options: [
					{
						name: 'Automatic',
						value: '',
						description:
							'Failed: needs manual review; Retry: retryable; From HTTP Status: by status',
					},
					{ name: 'Discarded', value: 'discarded', description: 'Do not replay' },
					{
						name: 'Needs Manual Review',
						value: 'needs_manual_review',
						description: 'A person must look at it',
					},
					{
						name: 'Needs Mapping',
						value: 'needs_mapping',
						description: 'The data does not fit the target; fix the mapping, then replay',
					},
					{
						name: 'Retryable',
						value: 'retryable',
						description: 'A replay later is expected to work',
					},
				],
				default: '',
				displayOptions: { show: { outcome: ['failed', 'retry', 'httpStatus'] } },
			},
			optionsCollection([
				{
					displayName: ALSO_RETRY,
					name: 'alsoRetryStatuses',
					type: 'string',
					default: '',
					placeholder: '409',
					displayOptions: { show: { '/outcome': ['httpStatus'] } },
					description:
						'From HTTP Status: 4xx status codes, comma-separated, that also mean "retry". Set 409 when the request carries an Idempotency-Key: a server answers 409 while an earlier request with the same key is still in progress, and the retry gets its outcome.',
				},
				{
					displayName: 'Backoff Base Seconds',
					name: 'backoffBaseSeconds',
					type: 'number',
					typeOptions: { minValue: 0 },
					default: 5,
					description: 'Retry n waits between d/2 and d, where d = min(max, base × 2^(n-1))',
				},
				{
					displayName: 'Backoff Max Seconds',
					name: 'backoffMaxSeconds',
					type: 'number',
					typeOptions: { minValue: 0 },
					default: 3600,
				},
				{
					displayName: 'Failed Node Name',
					name: 'errorNode',
					type: 'string',
					default: '',
					description: 'Name of the step that failed, kept with the dead letter',
				},
				{
					displayName: 'Honor Retry-After',
					name: 'honorRetryAfter',
					type: 'boolean',
					default: true,
					displayOptions: { show: { '/outcome': ['httpStatus'] } },
					description:
						'Whether a retried answer that carries a Retry-After header (seconds or a date, as a 429 or 503 of a rate-limited API does) waits at least that long: the backoff, or the header when it asks for longer, at most Backoff Max Seconds. Retry After Seconds, when set, wins.',
				},
				{
					displayName: 'Max Result Size (KB)',
					name: 'maxResultKb',
					type: 'number',
					typeOptions: { minValue: 1 },
					default: DEFAULT_MAX_RESULT_KB,
					description:
						'Larger results are refused with a clear error and nothing is written; store big documents elsewhere and keep a reference in the result. Read from the first item: one limit for the whole execution.',
				},
				{
					displayName: 'Retry After Seconds',
					name: 'retryAfterSeconds',
					type: 'number',
					default: '',
					description:
						'Wait exactly this long before the retry instead of the backoff (and instead of a Retry-After header, see Honor Retry-After)',
				},
			]),
		],
	};

	methods = credentialTestMethods;

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const resultLimit = sizeLimitOption(
			this,
			'maxResultKb',
			'Max Result Size (KB)',
			DEFAULT_MAX_RESULT_KB,
		);
		const store = lazyStore(this, resultLimit.storeOptions);
		const workflowId = this.getWorkflow().id ?? null;
		const executionId = this.getExecutionId() ?? null;
		// Version 2's default, or a version 1 node (a bundled template) set to the same expression.
		const httpStatusIsDefault = this.getNode().parameters.httpStatus === HTTP_STATUS_FROM_ITEM;
		return await runBatch<CompleteInput, CompleteResult>(this, {
			outputs: 2,
			errorOutput: 1,
			read: (itemIndex, item) => {
				if (resultLimit.refusal !== undefined) throw resultLimit.refusal;
				const options = this.getNodeParameter('options', itemIndex, {}) as IDataObject;
				let outcome = this.getNodeParameter('outcome', itemIndex) as CompleteOutcome | 'httpStatus';
				let errorClass = (this.getNodeParameter('errorClass', itemIndex, '') as string) || null;
				let errorCode = (this.getNodeParameter('errorCode', itemIndex, '') as string) || null;
				// A retried answer (not "no answer", not an error item carrying an earlier call's
				// fields): only then is the item's Retry-After this call's.
				let answeredRetry = false;
				if (outcome === 'httpStatus') {
					if (
						httpStatusIsDefault &&
						item.json.statusCode === undefined &&
						item.json.error === undefined
					) {
						// The default would read 0 (no answer) for every answer, a 2xx included, and the
						// job would be retried, repeating its external call.
						throw invalidInput(
							'HTTP Status',
							'the item has no statusCode, so the default cannot tell an answer from no answer',
							'In the HTTP Request node before this one, turn on Options → Response → "Include Response Headers and Status" (and "Never Error"); or map HTTP Status to the status code of the response',
						);
					}
					const raw = this.getNodeParameter('httpStatus', itemIndex, 0) as unknown;
					const status = raw === '' || raw === null || raw === undefined ? 0 : Number(raw);
					if (!Number.isFinite(status)) {
						throw invalidInput(
							'httpStatus',
							`"${String(raw).slice(0, 40)}" is not a status code`,
							'Map HTTP Status to the numeric status code of the response',
						);
					}
					const classified = classifyHttpStatus(
						status,
						parseAlsoRetryStatuses(options.alsoRetryStatuses),
					);
					outcome = classified.outcome;
					// The header is this status's only when the status is the item's own answer.
					answeredRetry =
						outcome === 'retry' &&
						status > 0 &&
						item.json.error === undefined &&
						Number(item.json.statusCode) === status;
					errorClass = errorClass ?? classified.errorClass;
					errorCode = errorCode ?? classified.errorCode;
				}
				const backoffMaxMs = secondsToMs(
					options.backoffMaxSeconds,
					'Backoff Max Seconds',
					DURATION_LIMITS_MS.backoffMax,
				);
				const delayMs =
					secondsToMs(options.retryAfterSeconds, 'Retry After Seconds', DURATION_LIMITS_MS.delay) ??
					null;
				let minDelayMs: number | null = null;
				if (delayMs === null && answeredRetry && options.honorRetryAfter !== false) {
					const asked = retryAfterMs(responseHeader(item.json, 'retry-after'));
					if (asked !== undefined)
						minDelayMs = Math.min(asked, backoffMaxMs ?? DURATION_LIMITS_MS.backoffMax.default);
				}
				let result: unknown;
				if (outcome === 'succeeded') {
					const source = this.getNodeParameter('resultSource', itemIndex, 'item') as string;
					if (source === 'item') result = item.json;
					else if (source === 'custom')
						result = parseJsonParameter(
							this.getNodeParameter('result', itemIndex),
							'Custom Result',
						);
				}
				return {
					// Checked here, not only in the core, so that without "continue" a malformed id
					// stops the node before any item of the batch is written.
					jobId: readUpstreamField(this, itemIndex, leasedJobId, validateUuid),
					attemptId: readUpstreamField(this, itemIndex, leasedAttemptId, validateUuid),
					outcome,
					result,
					errorCode,
					errorMessage: (this.getNodeParameter('errorMessage', itemIndex, '') as string) || null,
					errorClass: errorClass as ErrorClass | null,
					errorNode: (options.errorNode as string) || null,
					errorWorkflow: workflowId,
					errorExecution: executionId,
					delayMs,
					minDelayMs,
					backoffBaseMs: secondsToMs(
						options.backoffBaseSeconds,
						'Backoff Base Seconds',
						DURATION_LIMITS_MS.backoffBase,
					),
					backoffMaxMs,
				};
			},
			call: async (inputs, allOrNothing) => {
				return await (await store()).complete(inputs, { allOrNothing });
			},
			route: (result, _itemIndex, input) => ({
				output: result.applied ? 0 : 1,
				json: result.applied
					? {
							job_id: input.jobId,
							attempt_id: input.attemptId,
							outcome: input.outcome,
							status: result.status,
							attempts: result.attempts,
							max_attempts: result.maxAttempts,
							next_run_at:
								result.status === 'queued' && result.runAt ? result.runAt.toISOString() : null,
							error_code: result.errorCode,
							error_class: result.errorClass,
							callback_event_id: result.callbackEventId,
						}
					: {
							job_id: input.jobId,
							attempt_id: input.attemptId,
							outcome: input.outcome,
							lease_lost: true,
							reason: result.leaseLostReason,
							current_status: result.status,
						},
			}),
		});
	}
}
