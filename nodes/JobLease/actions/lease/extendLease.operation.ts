import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import {
	validateCheckpoint,
	validateUuid,
	type ExtendInput,
	type ExtendResult,
} from '../../../../src/core';
import { leaseSecondsToMs, runBatch } from '../../../shared/batch';
import { lazyStore } from '../../../shared/connection';
import { invalidInput } from '../../../shared/errors';
import { attemptIdField, jobIdField, leaseSecondsField } from '../../../shared/descriptions';
import { withDisplayOptions } from '../../../shared/operations';
import {
	leasedAttemptId,
	leasedJobId,
	readUpstreamField,
	upstreamNotice,
} from '../../../shared/upstream';

/**
 * An empty Lease Seconds (an expression that found nothing) is refused here, not read as the
 * field's default: a heartbeat that silently set a 5-minute lease on a job leased for an hour
 * would let another worker take it over mid-call.
 */
function extendedLeaseMs(value: unknown): number {
	if (value === undefined || value === null || value === '') {
		throw invalidInput(
			'Lease Seconds',
			'is empty: its expression gave nothing',
			"Set Lease Seconds to a number of seconds, e.g. {{ $('Job Lease').item.json.lease_seconds }} to renew by the lease the job was leased with",
		);
	}
	return leaseSecondsToMs(value);
}

const properties: INodeProperties[] = [
	{
		...leaseSecondsField,
		description:
			"How long from now the worker owns the job again. To renew by the lease the job was leased with, use {{ $('Job Lease').item.json.lease_seconds }} (items of Job Lease and Job Trigger carry lease_seconds), so the lease is set in one place.",
	},
	upstreamNotice('Job ID and Attempt ID', [leasedJobId, leasedAttemptId]),
	jobIdField,
	attemptIdField,
	{
		displayName: 'Checkpoint',
		name: 'checkpoint',
		type: 'string',
		default: '',
		placeholder: 'crm_request',
		description:
			'Optional name recorded on the attempt, e.g. right before a call with an external effect. If the attempt then dies, Job Status → Unknown Outcomes shows it got this far (check the external system); without it, the call was never made. On Lease Lost nothing is recorded: stop there.',
	},
];

export const description = withDisplayOptions({ show: { operation: ['extendLease'] } }, properties);

/** Heartbeat for every item in one statement: Extended, or Lease Lost when another attempt owns the job. */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const store = lazyStore(this);
	return await runBatch<ExtendInput, ExtendResult>(this, {
		outputs: 2,
		errorOutput: 1,
		read: (itemIndex) => ({
			// Checked before the batch is sent, so a malformed id writes nothing for any item.
			jobId: readUpstreamField(this, itemIndex, leasedJobId, validateUuid),
			attemptId: readUpstreamField(this, itemIndex, leasedAttemptId, validateUuid),
			leaseMs: extendedLeaseMs(this.getNodeParameter('leaseSeconds', itemIndex, null)),
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
