import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { invalidInput } from '../../shared/errors';
import { isToolNode, rejectOperation, type NodeOperation } from '../../shared/operations';
import * as job from './job/Job.resource';

const operations: Record<string, NodeOperation> = {
	cancel: job.cancel,
	dashboardAction: job.dashboardAction,
	dashboardPage: job.dashboardPage,
	get: job.get,
	jobStory: job.jobStory,
	listJobs: job.listJobs,
	purge: job.purge,
	queueOverview: job.queueOverview,
	requeue: job.requeue,
	stats: job.stats,
	unknownOutcomes: job.unknownOutcomes,
};

export async function router(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const operation = this.getNodeParameter('operation', 0) as string;
	const handler = operations[operation];
	if (!handler) {
		return await rejectOperation(
			this,
			invalidInput(
				'operation',
				`"${operation}" is not supported`,
				'Choose an operation from the list',
			),
		);
	}
	// The tool variant's editor does not offer these; a workflow imported with one set is refused
	// here, so an agent can never purge, cancel or requeue by filter.
	if (
		isToolNode(this) &&
		(!job.TOOL_OPERATIONS.includes(operation) ||
			(operation === 'requeue' && job.requeue.selectBy(this) !== 'ids'))
	) {
		return await rejectOperation(
			this,
			invalidInput(
				'operation',
				`"${operation === 'requeue' ? 'Requeue by filter' : operation}" is not available when Job Status is an AI agent's tool`,
				'Let the agent read (Get, Queue Stats, Unknown Outcomes) or requeue jobs by ID; run purges, cancels and requeues by filter in a workflow an operator controls',
			),
		);
	}
	return await handler.execute.call(this);
}
