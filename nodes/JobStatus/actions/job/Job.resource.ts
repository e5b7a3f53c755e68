import type { INodeProperties, INodePropertyOptions } from 'n8n-workflow';

import { operationProperty } from '../../../shared/operations';
import { queueFilterField } from './common';
import * as cancel from './cancel.operation';
import * as dashboardAction from './dashboardAction.operation';
import * as dashboardPage from './dashboardPage.operation';
import * as get from './get.operation';
import * as jobStory from './jobStory.operation';
import * as listJobs from './listJobs.operation';
import * as purge from './purge.operation';
import * as queueOverview from './queueOverview.operation';
import * as requeue from './requeue.operation';
import * as stats from './stats.operation';
import * as unknownOutcomes from './unknownOutcomes.operation';

export {
	cancel,
	dashboardAction,
	dashboardPage,
	get,
	jobStory,
	listJobs,
	purge,
	queueOverview,
	requeue,
	stats,
	unknownOutcomes,
};

/**
 * Sorted by name, as n8n lists them. Dashboard Action, Dashboard Page, Job Story, List Jobs and
 * Queue Overview serve the jobs dashboard (the bundled workflow 10-dashboard.json).
 */
export const operationOptions: INodePropertyOptions[] = [
	{
		name: 'Cancel',
		value: 'cancel',
		action: 'Cancel jobs',
		description: 'Stop queued or running jobs',
	},
	{
		name: 'Dashboard Action',
		value: 'dashboardAction',
		action: 'Requeue or cancel jobs from the dashboard',
		description:
			'Requeue failed jobs or cancel queued jobs, as the dashboard asks (POST with the action header)',
	},
	{
		name: 'Dashboard Page',
		value: 'dashboardPage',
		action: 'Build the jobs dashboard page',
		description: 'The HTML page of the jobs dashboard, for a Respond to Webhook node',
	},
	{
		name: 'Get',
		value: 'get',
		action: 'Get a job by ID and status token',
		description: 'Status, result or error, and the attempt timeline',
	},
	{
		name: 'Job Story',
		value: 'jobStory',
		action: 'Get the whole story of a job',
		description: 'A job with every attempt, its result or error, and its callback deliveries',
	},
	{
		name: 'List Jobs',
		value: 'listJobs',
		action: 'List jobs newest first',
		description: 'Jobs filtered by queue, status, time and text, one page at a time',
	},
	{
		name: 'Purge',
		value: 'purge',
		action: 'Purge old finished jobs',
		description: 'Delete done, failed or cancelled jobs older than a retention',
	},
	{
		name: 'Queue Overview',
		value: 'queueOverview',
		action: 'Get the overview of every queue',
		description: 'Queue Stats for every queue plus jobs finished and failed per minute',
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
];

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
	...dashboardPage.description,
	...queueOverview.description,
	...listJobs.description,
	...jobStory.description,
	...dashboardAction.description,
];
