import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeProperties,
} from 'n8n-workflow';

import { COUNT_LIMITS, type LeasedJob, type LeasedJobEssentials } from '../../../../src/core';
import {
	concurrencyLimitParameter,
	leaseSecondsToMs,
	runOnce,
	wholeNumberParameter,
} from '../../../shared/batch';
import {
	concurrencyLimitField,
	includeMetadataOption,
	includeMetadataValue,
	leaseSecondsField,
	optionsCollection,
	queueField,
} from '../../../shared/descriptions';
import { withDisplayOptions } from '../../../shared/operations';

const MAX_JOBS_DEFAULT = 10;

const properties: INodeProperties[] = [
	queueField,
	{
		displayName: 'Max Jobs',
		name: 'maxJobs',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: 10000 },
		default: MAX_JOBS_DEFAULT,
		description:
			'Most jobs to claim in this run. Each leased job becomes one output item. The lease runs once per execution, with the settings of the first input item.',
	},
	leaseSecondsField,
	concurrencyLimitField,
	optionsCollection([includeMetadataOption]),
];

export const description = withDisplayOptions({ show: { operation: ['lease'] } }, properties);

/**
 * The item a worker receives for one leased job. `leaseSeconds` is the lease it was leased
 * with, so Extend Lease downstream can renew by as much without a second setting. A job leased
 * without metadata (LeasedJobEssentials) gives the same item without the metadata fields.
 */
export function leasedJobJson(
	job: LeasedJob | LeasedJobEssentials,
	leaseSeconds: number,
): IDataObject {
	const essentials: IDataObject = {
		job_id: job.id,
		attempt_id: job.attempt_id,
		attempt: job.attempts,
		max_attempts: job.max_attempts,
		queue: job.queue,
		payload: job.payload as IDataObject,
	};
	if (!('created_at' in job)) {
		return {
			...essentials,
			lease_seconds: leaseSeconds,
			idempotency_key: job.id,
			recovered: job.recovered,
		};
	}
	return {
		...essentials,
		lease_until: job.lease_until.toISOString(),
		lease_seconds: leaseSeconds,
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

/**
 * One lease per execution, with the first item's parameters: a Schedule Trigger or Job Trigger
 * feeds one item, and a per-item lease would claim N × Max Jobs. Leased jobs go to Leased, one
 * item each; when there is none, one item goes to Empty.
 */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await runOnce(this, {
		outputs: 2,
		errorOutput: 1,
		read: () => {
			return {
				queue: this.getNodeParameter('queue', 0) as string,
				limit: wholeNumberParameter(
					this.getNodeParameter('maxJobs', 0, null),
					'Max Jobs',
					COUNT_LIMITS.lease,
					MAX_JOBS_DEFAULT,
				),
				leaseMs: leaseSecondsToMs(this.getNodeParameter('leaseSeconds', 0, null)),
				concurrencyLimit: concurrencyLimitParameter(
					this.getNodeParameter('concurrencyLimit', 0, null),
				),
				workflowId: this.getWorkflow().id ?? null,
				executionId: this.getExecutionId() ?? null,
				includeMetadata: includeMetadataValue(
					this.getNodeParameter('options', 0, {}) as IDataObject,
				),
			};
		},
		call: async (store, input) => await store.lease(input),
		route: (jobs, input) =>
			jobs.length === 0
				? { output: 1, json: { queue: input.queue, leased: 0 } }
				: jobs.map((job) => ({ output: 0, json: leasedJobJson(job, input.leaseMs / 1000) })),
	});
}
