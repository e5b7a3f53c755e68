import {
	NodeConnectionTypes,
	type IDataObject,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import { type JobStatusView } from '../../src/core';
import { validateUuid } from '../../src/core/validate';
import { runBatch } from '../shared/batch';
import { lazyStore } from '../shared/connection';
import { testDurableJobsConnection } from '../shared/credentialTest';
import { errorItem, invalidInput, toNodeError } from '../shared/errors';
import {
	dashboardProperties,
	executeDashboardOperation,
	isDashboardOperation,
	withDashboardOperations,
} from './dashboard';

/** The public view of a job: what a status endpoint may show its caller. */
export function statusJson(view: JobStatusView): IDataObject {
	const { job, attempts } = view;
	return {
		found: true,
		job_id: job.id,
		queue: job.queue,
		status: job.status,
		attempts: job.attempts,
		max_attempts: job.max_attempts,
		created_at: job.created_at.toISOString(),
		updated_at: job.updated_at.toISOString(),
		run_at: job.run_at.toISOString(),
		finished_at: job.finished_at ? job.finished_at.toISOString() : null,
		correlation_id: job.correlation_id,
		result: job.status === 'done' ? (job.result as IDataObject) : null,
		error:
			job.status === 'failed' || job.status === 'cancelled'
				? { code: job.error_code, message: job.error_message, class: job.error_class }
				: null,
		timeline: attempts.map((attempt) => ({
			attempt: attempt.attempt,
			started_at: attempt.started_at.toISOString(),
			finished_at: attempt.finished_at ? attempt.finished_at.toISOString() : null,
			outcome:
				attempt.outcome ??
				(job.status === 'running' && attempt.attempt_id === job.attempt_id ? 'running' : null),
			error_code: attempt.error_code,
		})),
	};
}

function idList(value: unknown): string[] {
	if (value === undefined || value === null || value === '') return [];
	if (Array.isArray(value)) return value.map((entry) => String(entry).trim()).filter(Boolean);
	return String(value)
		.split(',')
		.map((entry) => entry.trim())
		.filter(Boolean);
}

const OPERATIONS_WITH_TWO_OUTPUTS = ['get'];

export class JobStatus implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Job Status',
		name: 'jobStatus',
		icon: { light: 'file:jobStatus.svg', dark: 'file:jobStatus.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle: '={{ $parameter["operation"] }}',
		description: 'Look up a job, watch queue health, and replay, cancel or purge jobs',
		defaults: { name: 'Job Status' },
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		outputs: `={{ ${JSON.stringify(OPERATIONS_WITH_TWO_OUTPUTS)}.includes($parameter["operation"]) ? [{ "type": "main", "displayName": "Found" }, { "type": "main", "displayName": "Not Found" }] : [{ "type": "main" }] }}`,
		credentials: [
			{ name: 'durableJobsPostgresApi', required: true, testedBy: 'durableJobsConnectionTest' },
		],
		properties: [
			{
				displayName: 'Operation',
				name: 'operation',
				type: 'options',
				noDataExpression: true,
				options: withDashboardOperations([
					{
						name: 'Cancel',
						value: 'cancel',
						action: 'Cancel jobs',
						description: 'Stop queued or running jobs',
					},
					{
						name: 'Get',
						value: 'get',
						action: 'Get a job by ID and status token',
						description: 'Status, result or error, and the attempt timeline',
					},
					{
						name: 'Purge',
						value: 'purge',
						action: 'Purge old finished jobs',
						description: 'Delete done, failed or cancelled jobs older than a retention',
					},
					{
						name: 'Queue Stats',
						value: 'stats',
						action: 'Get queue stats',
						description: 'Counts by status, oldest waiting job, expired leases, dead letters',
					},
					{
						name: 'Requeue',
						value: 'requeue',
						action: 'Requeue failed jobs',
						description: 'Replay dead-lettered jobs deliberately',
					},
					{
						name: 'Unknown Outcomes',
						value: 'unknownOutcomes',
						action: 'List attempts with unknown outcome',
						description:
							'Attempts that died mid-way: check the external system (by job ID) before replaying',
					},
				]),
				default: 'get',
			},
			{
				displayName: 'Job ID',
				name: 'jobId',
				type: 'string',
				default: '={{ $json.query?.job_id ?? $json.job_id }}',
				required: true,
				displayOptions: { show: { operation: ['get'] } },
			},
			{
				displayName: 'Status Token',
				name: 'token',
				type: 'string',
				typeOptions: { password: true },
				default: '={{ $json.query?.token ?? $json.status_token }}',
				displayOptions: { show: { operation: ['get'] } },
				description:
					'The token Job Enqueue returned. A wrong token answers exactly like an unknown job.',
			},
			{
				displayName: 'Queue',
				name: 'queue',
				type: 'string',
				default: '',
				placeholder: 'documents',
				displayOptions: { show: { operation: ['stats', 'unknownOutcomes', 'purge'] } },
				description: 'Leave empty for all queues',
			},
			{
				displayName: 'Select By',
				name: 'selectBy',
				type: 'options',
				options: [
					{ name: 'Job IDs', value: 'ids' },
					{ name: 'Filter', value: 'filter' },
				],
				default: 'ids',
				displayOptions: { show: { operation: ['requeue'] } },
			},
			{
				displayName: 'Job IDs',
				name: 'jobIds',
				type: 'string',
				default: '={{ $json.job_id }}',
				required: true,
				displayOptions: { show: { operation: ['cancel'] } },
				description:
					'Comma-separated IDs, or an expression returning an array; IDs of all input items are handled in one statement',
			},
			{
				displayName: 'Job IDs',
				name: 'requeueJobIds',
				type: 'string',
				default: '={{ $json.job_id }}',
				required: true,
				displayOptions: { show: { operation: ['requeue'], selectBy: ['ids'] } },
				description: 'Comma-separated IDs, or an expression returning an array',
			},
			{
				displayName: 'Queue',
				name: 'filterQueue',
				type: 'string',
				default: '',
				required: true,
				displayOptions: { show: { operation: ['requeue'], selectBy: ['filter'] } },
			},
			{
				displayName: 'Error Code',
				name: 'filterErrorCode',
				type: 'string',
				default: '',
				displayOptions: { show: { operation: ['requeue'], selectBy: ['filter'] } },
			},
			{
				displayName: 'Error Class',
				name: 'filterErrorClass',
				type: 'options',
				options: [
					{ name: 'Any', value: '' },
					{ name: 'Discarded', value: 'discarded' },
					{ name: 'Needs Manual Review', value: 'needs_manual_review' },
					{ name: 'Needs Mapping', value: 'needs_mapping' },
					{ name: 'Retryable', value: 'retryable' },
				],
				default: 'retryable',
				displayOptions: { show: { operation: ['requeue'], selectBy: ['filter'] } },
			},
			{
				displayName: 'Confirm Requeue by Filter',
				name: 'confirm',
				type: 'boolean',
				default: false,
				displayOptions: { show: { operation: ['requeue'], selectBy: ['filter'] } },
				description: 'Whether to really replay every failed job the filter matches (up to Limit)',
			},
			{
				displayName: 'Limit',
				name: 'maxJobs',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: 10000 },
				default: 100,
				displayOptions: { show: { operation: ['requeue', 'unknownOutcomes'] } },
			},
			{
				displayName: 'Additional Attempts',
				name: 'additionalAttempts',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: 1000 },
				default: 3,
				displayOptions: { show: { operation: ['requeue'] } },
				description: 'Attempts a replayed job gets on top of those it used',
			},
			{
				displayName: 'Reason',
				name: 'reason',
				type: 'string',
				default: '',
				displayOptions: { show: { operation: ['cancel'] } },
			},
			{
				displayName: 'Older Than (Days)',
				name: 'olderThanDays',
				type: 'number',
				typeOptions: { minValue: 0 },
				default: 7,
				displayOptions: { show: { operation: ['purge'] } },
			},
			{
				displayName: 'Statuses',
				name: 'statuses',
				type: 'multiOptions',
				options: [
					{ name: 'Done', value: 'done' },
					{ name: 'Failed', value: 'failed' },
					{ name: 'Cancelled', value: 'cancelled' },
				],
				default: ['done', 'cancelled'],
				displayOptions: { show: { operation: ['purge'] } },
			},
			...dashboardProperties,
		],
	};

	methods = { credentialTest: { durableJobsConnectionTest: testDurableJobsConnection } };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const operation = this.getNodeParameter('operation', 0) as string;
		if (isDashboardOperation(operation)) return await executeDashboardOperation(this, operation);
		const store = lazyStore(this);
		if (operation === 'get') {
			return await runBatch<{ jobId: unknown; token: unknown }, JobStatusView | null>(this, {
				outputs: 2,
				read: (itemIndex) => ({
					jobId: this.getNodeParameter('jobId', itemIndex, ''),
					token: this.getNodeParameter('token', itemIndex, ''),
				}),
				call: async (inputs) => await (await store()).getStatusMany(inputs),
				route: (view) =>
					view
						? { output: 0, json: statusJson(view) }
						: { output: 1, json: { found: false, status: 'not_found' } },
			});
		}

		const items = this.getInputData();
		try {
			if (
				operation === 'cancel' ||
				(operation === 'requeue' && this.getNodeParameter('selectBy', 0) === 'ids')
			) {
				const owner = new Map<string, number>();
				const failed: INodeExecutionData[] = [];
				for (let itemIndex = 0; itemIndex < items.length; itemIndex++) {
					let ids: string[];
					try {
						// Validated per item, so a malformed id names the item that carried it and,
						// with "continue", fails only that item.
						ids = idList(
							this.getNodeParameter(
								operation === 'cancel' ? 'jobIds' : 'requeueJobIds',
								itemIndex,
								'',
							),
						).map((id) => validateUuid(id, 'jobIds'));
					} catch (error) {
						if (!this.continueOnFail()) throw toNodeError(this.getNode(), error, itemIndex);
						failed.push(errorItem(this.getNode(), error, itemIndex));
						continue;
					}
					for (const id of ids) if (!owner.has(id)) owner.set(id, itemIndex);
				}
				if (owner.size === 0) {
					if (failed.length > 0) return [failed];
					throw invalidInput(
						'jobIds',
						'no job IDs given',
						'Map Job IDs to the IDs to handle (comma-separated or an array)',
					);
				}
				const rows =
					operation === 'cancel'
						? await (
								await store()
							).cancel(
								[...owner.keys()],
								(this.getNodeParameter('reason', 0, '') as string) || null,
							)
						: await (
								await store()
							).requeue({
								jobIds: [...owner.keys()],
								limit: 10_000,
								additionalAttempts: this.getNodeParameter('additionalAttempts', 0, 3) as number,
							});
				return [
					[
						...rows.map((row) => ({
							json: {
								...row,
								[operation === 'cancel' ? 'cancelled' : 'requeued']:
									operation === 'cancel' ? (row as { cancelled: boolean }).cancelled : true,
							} as IDataObject,
							pairedItem: { item: owner.get(String(row.id)) ?? 0 },
						})),
						...failed,
					],
				];
			}
			if (operation === 'requeue') {
				const rows = await (
					await store()
				).requeue({
					queue: this.getNodeParameter('filterQueue', 0) as string,
					errorCode: (this.getNodeParameter('filterErrorCode', 0, '') as string) || null,
					errorClass: (this.getNodeParameter('filterErrorClass', 0, '') as string) || null,
					confirm: this.getNodeParameter('confirm', 0, false) as boolean,
					limit: this.getNodeParameter('maxJobs', 0, 100) as number,
					additionalAttempts: this.getNodeParameter('additionalAttempts', 0, 3) as number,
				});
				return [rows.map((row) => ({ json: { ...row, requeued: true }, pairedItem: { item: 0 } }))];
			}
			if (operation === 'stats') {
				const stats = await (
					await store()
				).stats((this.getNodeParameter('queue', 0, '') as string) || null);
				return [
					stats.map((entry) => ({
						json: { ...entry, checked_at: new Date().toISOString() },
						pairedItem: { item: 0 },
					})),
				];
			}
			if (operation === 'purge') {
				const result = await (
					await store()
				).purge({
					queue: (this.getNodeParameter('queue', 0, '') as string) || null,
					olderThanMs: Math.round(
						(this.getNodeParameter('olderThanDays', 0, 7) as number) * 24 * 3600_000,
					),
					statuses: this.getNodeParameter('statuses', 0, ['done', 'cancelled']) as string[],
				});
				return [[{ json: result, pairedItem: { item: 0 } }]];
			}
			if (operation === 'unknownOutcomes') {
				const rows = await (
					await store()
				).unknownOutcomes(
					(this.getNodeParameter('queue', 0, '') as string) || null,
					this.getNodeParameter('maxJobs', 0, 100) as number,
				);
				return [
					rows.map((row) => ({
						json: {
							...row,
							check: row.checkpoint
								? `passed checkpoint "${String(row.checkpoint)}": the external call after it may have happened — look up stable_key in the external system before replaying`
								: 'no checkpoint recorded: if the worker records one before its external call (Job Lease → Extend Lease → Checkpoint), this attempt never made that call; otherwise look up stable_key before replaying',
						} as IDataObject,
						pairedItem: { item: 0 },
					})),
				];
			}
			throw invalidInput(
				'operation',
				`"${operation}" is not supported`,
				'Choose an operation from the list',
			);
		} catch (error) {
			if (!this.continueOnFail()) throw toNodeError(this.getNode(), error, 0);
			return [[errorItem(this.getNode(), error, 0)]];
		}
	}
}
