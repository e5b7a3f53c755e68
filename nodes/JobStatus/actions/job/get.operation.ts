import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeProperties,
} from 'n8n-workflow';

import type { JobStatusView } from '../../../../src/core';
import { runBatch } from '../../../shared/batch';
import { lazyStore } from '../../../shared/connection';
import { withDisplayOptions } from '../../../shared/operations';

const properties: INodeProperties[] = [
	{
		displayName: 'Job ID',
		name: 'jobId',
		type: 'string',
		default: '={{ $json.query?.job_id ?? $json.job_id }}',
		required: true,
	},
	{
		displayName: 'Status Token',
		name: 'token',
		type: 'string',
		typeOptions: { password: true },
		default: '={{ $json.query?.token ?? $json.status_token }}',
		description:
			'The token Job Enqueue returned. A wrong token answers exactly like an unknown job.',
	},
];

export const description = withDisplayOptions({ show: { operation: ['get'] } }, properties);

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
			job.status === 'failed'
				? { code: job.error_code, message: job.error_message, class: job.error_class }
				: null,
		// A cancellation is not an error of the job: its reason has a field of its own.
		cancel_reason: job.status === 'cancelled' ? job.error_message : null,
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

/** Found / Not Found per item; all lookups of the execution in two statements. */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const store = lazyStore(this);
	return await runBatch<{ jobId: unknown; token: unknown }, JobStatusView | null>(this, {
		outputs: 2,
		errorOutput: 1,
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
