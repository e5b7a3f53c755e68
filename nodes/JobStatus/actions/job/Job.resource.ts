import type { INodeProperties, INodePropertyOptions } from 'n8n-workflow';

import { operationProperty } from '../../../shared/operations';
import { dashboardProperties, withDashboardOperations } from '../../dashboard';
import { queueFilterField } from './common';
import * as cancel from './cancel.operation';
import * as get from './get.operation';
import * as purge from './purge.operation';
import * as requeue from './requeue.operation';
import * as stats from './stats.operation';
import * as unknownOutcomes from './unknownOutcomes.operation';

export { cancel, get, purge, requeue, stats, unknownOutcomes };

export const operationOptions: INodePropertyOptions[] = withDashboardOperations([
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
]);

/**
 * What the node offers when n8n runs it as an AI agent's tool (its `jobStatusTool` variant):
 * reads, and replays of jobs named by ID. Purge, Cancel and Requeue by filter change or delete
 * many jobs at once, so an agent is never handed them.
 */
export const TOOL_OPERATIONS: readonly string[] = ['get', 'requeue', 'stats', 'unknownOutcomes'];

const operation = operationProperty(operationOptions, 'get');

export const description: INodeProperties[] = [
	// n8n evaluates '@tool' as true in the tool variant of a usableAsTool node.
	{ ...operation, displayOptions: { show: { '@tool': [false] } } },
	{
		...operation,
		options: operationOptions.filter((option) => TOOL_OPERATIONS.includes(String(option.value))),
		displayOptions: { show: { '@tool': [true] } },
	},
	...get.description,
	queueFilterField,
	...requeue.description,
	...cancel.description,
	...unknownOutcomes.description,
	...purge.description,
	...stats.description,
	...dashboardProperties,
];
