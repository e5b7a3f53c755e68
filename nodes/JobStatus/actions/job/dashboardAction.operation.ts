import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { DurableJobsError, integerInRange } from '../../../../src/core';
import { headerValue, runEach } from '../../../shared/batch';
import { withDisplayOptions } from '../../../shared/operations';

/** The request header every dashboard write must carry (a cross-site form cannot set one). */
export const ACTION_HEADER = 'X-Durable-Jobs-Action';

const properties: INodeProperties[] = [
	{
		displayName: 'Action',
		name: 'dashboardAction',
		type: 'string',
		default: "={{ $json.body?.action ?? '' }}",
		required: true,
		description: 'The action: requeue (failed jobs) or cancel (queued jobs)',
	},
	{
		displayName: 'Job IDs',
		name: 'actionJobIds',
		type: 'string',
		default: '={{ $json.body?.job_ids }}',
		required: true,
		description: 'An array of job IDs (or comma-separated), at most 1000',
	},
	{
		displayName: 'As Of',
		name: 'actionAsOf',
		type: 'string',
		default: "={{ $json.body?.as_of ?? '' }}",
		description:
			'Requeue: the as_of of the list or story the jobs were picked from. Only jobs that failed before it are requeued, so a repeated request changes nothing.',
	},
	{
		displayName: 'Additional Attempts',
		name: 'actionAttempts',
		type: 'string',
		default: '={{ $json.body?.additional_attempts ?? 3 }}',
		description: 'Requeue: attempts a job gets on top of those it used (1 to 1000)',
	},
	{
		displayName: 'Require Action Header',
		name: 'requireActionHeader',
		type: 'boolean',
		default: true,
		description: `Whether the input must be a webhook request carrying the header ${ACTION_HEADER} with the action's name. A browser sends a custom header only after a CORS preflight, so a form or link on another site cannot trigger the action.`,
	},
];

export const description = withDisplayOptions(
	{ show: { operation: ['dashboardAction'] } },
	properties,
);

type ActionRequest =
	| { action: 'requeue'; jobIds: unknown; asOf: string; additionalAttempts: number }
	| { action: 'cancel'; jobIds: unknown };

function actionHeaderError(action: string): DurableJobsError {
	return new DurableJobsError(
		'action_header_missing',
		`Dashboard actions need the request header ${ACTION_HEADER}: ${action || '<action>'}`,
		{
			field: ACTION_HEADER,
			fix: `Send the request as the dashboard does: POST with the header ${ACTION_HEADER} set to the action's name`,
			httpStatus: 403,
		},
	);
}

/**
 * Requeues failed jobs or cancels queued jobs, as the dashboard asks: a POST whose header names
 * the action, so that a form or link on another site cannot trigger it. One answer per item.
 */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await runEach(this, {
		read: (itemIndex, item): ActionRequest => {
			const parameter = (name: string, fallback?: unknown) =>
				this.getNodeParameter(name, itemIndex, fallback);
			const action = String(parameter('dashboardAction', '') ?? '').trim();
			if (parameter('requireActionHeader', true)) {
				const sent = headerValue(item.json, ACTION_HEADER);
				if (
					sent === undefined ||
					sent.trim().toLowerCase() !== action.toLowerCase() ||
					action === ''
				)
					throw actionHeaderError(action);
			}
			const jobIds = parameter('actionJobIds');
			if (action === 'requeue') {
				return {
					action,
					jobIds,
					asOf: parameter('actionAsOf', '') as string,
					additionalAttempts: integerInRange(
						parameter('actionAttempts', 3),
						'additional_attempts',
						1,
						1000,
						3,
					),
				};
			}
			if (action === 'cancel') return { action, jobIds };
			throw new DurableJobsError(
				'invalid_input',
				`action: "${action.slice(0, 40)}" is not a dashboard action`,
				{
					field: 'action',
					fix: 'Use requeue (failed jobs) or cancel (queued jobs)',
					httpStatus: 400,
				},
			);
		},
		call: async (request, store) =>
			request.action === 'requeue'
				? await (
						await store()
					).requeueFailedJobs({
						jobIds: request.jobIds,
						asOf: request.asOf,
						additionalAttempts: request.additionalAttempts,
					})
				: await (await store()).cancelQueuedJobs({ jobIds: request.jobIds }),
	});
}
