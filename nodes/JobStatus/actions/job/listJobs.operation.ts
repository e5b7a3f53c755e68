import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import type { ListJobsInput } from '../../../../src/core';
import { runEach } from '../../../shared/batch';
import { dateParameter } from '../../../shared/dates';
import { withDisplayOptions } from '../../../shared/operations';

const properties: INodeProperties[] = [
	{
		displayName: 'Queue',
		name: 'listQueue',
		type: 'string',
		default: "={{ $json.query?.queue ?? '' }}",
		description: 'Empty: every queue',
	},
	{
		displayName: 'Status',
		name: 'listStatus',
		type: 'string',
		default: "={{ $json.query?.status ?? '' }}",
		description:
			'One of queued, running, done, failed, cancelled, or several separated by commas; empty: every status',
	},
	{
		displayName: 'Received From',
		name: 'listFrom',
		type: 'string',
		default: "={{ $json.query?.from ?? '' }}",
		description:
			"Jobs received at or after this time (ISO 8601; without an offset, in the workflow's time zone)",
	},
	{
		displayName: 'Received Before',
		name: 'listTo',
		type: 'string',
		default: "={{ $json.query?.to ?? '' }}",
		description:
			"Jobs received before this time (ISO 8601; without an offset, in the workflow's time zone)",
	},
	{
		displayName: 'Search Text',
		name: 'listText',
		type: 'string',
		default: "={{ $json.query?.text ?? '' }}",
		description: 'Exact job ID, idempotency key or correlation ID',
	},
	{
		displayName: 'Cursor',
		name: 'listCursor',
		type: 'string',
		default: "={{ $json.query?.cursor ?? '' }}",
		description: 'The next_cursor of the previous page; empty: the newest page',
	},
	{
		displayName: 'Page Size',
		name: 'listLimit',
		type: 'string',
		default: "={{ $json.query?.limit ?? '50' }}",
		description: 'Jobs per page, 1 to 1000',
	},
];

export const description = withDisplayOptions({ show: { operation: ['listJobs'] } }, properties);

/** One page of jobs, newest first, filtered as the item's request asks. */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await runEach(this, {
		read: (itemIndex): ListJobsInput => {
			const parameter = (name: string) => this.getNodeParameter(name, itemIndex, '') as string;
			return {
				queue: parameter('listQueue'),
				status: parameter('listStatus'),
				from: dateParameter(parameter('listFrom'), this.getTimezone(), 'Received From'),
				to: dateParameter(parameter('listTo'), this.getTimezone(), 'Received Before'),
				text: parameter('listText'),
				cursor: parameter('listCursor'),
				limit: parameter('listLimit'),
			};
		},
		call: async (input, store) => await (await store()).listJobs(input),
	});
}
