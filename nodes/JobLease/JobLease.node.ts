import {
	NodeConnectionTypes,
	type IDataObject,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import type { ExtendInput, ExtendResult, LeasedJob } from '../../src/core';
import { validateCheckpoint, validateUuid } from '../../src/core/validate';
import { runBatch } from '../shared/batch';
import { lazyStore } from '../shared/connection';
import { testDurableJobsConnection } from '../shared/credentialTest';
import { attemptIdField, jobIdField, leaseSecondsField, queueField } from '../shared/descriptions';
import { errorItem, toNodeError } from '../shared/errors';

/** The item a worker receives for one leased job. */
export function leasedJobJson(job: LeasedJob): IDataObject {
	return {
		job_id: job.id,
		attempt_id: job.attempt_id,
		attempt: job.attempts,
		max_attempts: job.max_attempts,
		queue: job.queue,
		payload: job.payload as IDataObject,
		lease_until: job.lease_until.toISOString(),
		// The key for external calls is the job id: stable across attempts, so a retried or
		// re-leased attempt repeats the same request instead of creating a second record.
		idempotency_key: job.id,
		enqueue_idempotency_key: job.idempotency_key,
		priority: job.priority,
		ordering_key: job.ordering_key,
		correlation_id: job.correlation_id,
		recovered: job.recovered,
		created_at: job.created_at.toISOString(),
	};
}

export class JobLease implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Job Lease',
		name: 'jobLease',
		icon: { light: 'file:jobLease.svg', dark: 'file:jobLease.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle:
			'={{ ($parameter["operation"] === "extendLease" ? "extend lease" : "lease from " + $parameter["queue"]) }}',
		description: 'Claim due jobs from a queue for a worker (or extend a lease as a heartbeat)',
		defaults: { name: 'Job Lease' },
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		outputs: `={{ $parameter["operation"] === "extendLease" ? [{ "type": "main", "displayName": "Extended" }, { "type": "main", "displayName": "Lease Lost" }] : [{ "type": "main", "displayName": "Leased" }, { "type": "main", "displayName": "Empty" }] }}`,
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
						name: 'Lease',
						value: 'lease',
						action: 'Lease jobs from a queue',
						description: 'Claim up to N due jobs (or jobs whose lease expired)',
					},
					{
						name: 'Extend Lease',
						value: 'extendLease',
						action: 'Extend the lease of a job',
						description: 'Heartbeat: keep owning a job that takes longer',
					},
				],
				default: 'lease',
			},
			{ ...queueField, displayOptions: { show: { operation: ['lease'] } } },
			{
				displayName: 'Max Jobs',
				name: 'maxJobs',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: 10000 },
				default: 10,
				displayOptions: { show: { operation: ['lease'] } },
				description: 'Most jobs to claim in this run. Each leased job becomes one output item.',
			},
			{ ...leaseSecondsField, displayOptions: { show: { operation: ['lease', 'extendLease'] } } },
			{
				displayName: 'Concurrency Limit',
				name: 'concurrencyLimit',
				type: 'number',
				typeOptions: { minValue: 0 },
				default: 0,
				displayOptions: { show: { operation: ['lease'] } },
				description:
					'Most jobs of this queue running at once, across all n8n instances (0 = no limit)',
			},
			{ ...jobIdField, displayOptions: { show: { operation: ['extendLease'] } } },
			{ ...attemptIdField, displayOptions: { show: { operation: ['extendLease'] } } },
			{
				displayName: 'Checkpoint',
				name: 'checkpoint',
				type: 'string',
				default: '',
				placeholder: 'crm_request',
				displayOptions: { show: { operation: ['extendLease'] } },
				description:
					'Optional name recorded on the attempt, e.g. right before a call with an external effect. If the attempt then dies, Job Status → Unknown Outcomes shows it got this far (check the external system); without it, the call was never made. On Lease Lost nothing is recorded: stop there.',
			},
		],
	};

	methods = { credentialTest: { durableJobsConnectionTest: testDurableJobsConnection } };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const operation = this.getNodeParameter('operation', 0) as string;
		const store = lazyStore(this);
		if (operation === 'extendLease') {
			return await runBatch<ExtendInput, ExtendResult>(this, {
				outputs: 2,
				read: (itemIndex) => ({
					// Checked before the batch is sent, so a malformed id writes nothing for any item.
					jobId: validateUuid(this.getNodeParameter('jobId', itemIndex), 'jobId'),
					attemptId: validateUuid(this.getNodeParameter('attemptId', itemIndex), 'attemptId'),
					leaseMs: Math.round(
						(this.getNodeParameter('leaseSeconds', itemIndex, 300) as number) * 1000,
					),
					checkpoint: validateCheckpoint(this.getNodeParameter('checkpoint', itemIndex, '')),
					workflowId: this.getWorkflow().id ?? null,
					executionId: this.getExecutionId() ?? null,
				}),
				call: async (inputs, allOrNothing) =>
					await (await store()).extendLease(inputs, { allOrNothing }),
				route: (result, itemIndex, input) => ({
					output: result.extended ? 0 : 1,
					json: {
						...this.getInputData()[itemIndex].json,
						job_id: input.jobId,
						attempt_id: input.attemptId,
						lease_until: result.leaseUntil ? result.leaseUntil.toISOString() : null,
						lease_lost: !result.extended,
						...(result.extended && input.checkpoint ? { checkpoint: input.checkpoint } : {}),
						...(result.extended ? {} : { current_status: result.currentStatus ?? 'not_found' }),
					},
				}),
			});
		}

		// One lease per execution, with the first item's parameters: a Schedule Trigger or
		// Job Trigger feeds one item, and a per-item lease would claim N × Max Jobs.
		const queue = this.getNodeParameter('queue', 0) as string;
		try {
			const concurrencyLimit = this.getNodeParameter('concurrencyLimit', 0, 0) as number;
			const jobs = await (
				await store()
			).lease({
				queue,
				limit: this.getNodeParameter('maxJobs', 0, 10) as number,
				leaseMs: Math.round((this.getNodeParameter('leaseSeconds', 0, 300) as number) * 1000),
				concurrencyLimit: concurrencyLimit > 0 ? concurrencyLimit : null,
				workflowId: this.getWorkflow().id ?? null,
				executionId: this.getExecutionId() ?? null,
			});
			if (jobs.length === 0) return [[], [{ json: { queue, leased: 0 }, pairedItem: { item: 0 } }]];
			return [jobs.map((job) => ({ json: leasedJobJson(job), pairedItem: { item: 0 } })), []];
		} catch (error) {
			if (!this.continueOnFail()) throw toNodeError(this.getNode(), error, 0);
			return [[errorItem(this.getNode(), error, 0)], []];
		}
	}
}
