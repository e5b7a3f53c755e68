import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { runEach } from '../../../shared/batch';
import { withDisplayOptions } from '../../../shared/operations';

const properties: INodeProperties[] = [
	{
		displayName: 'Job ID',
		name: 'storyJobId',
		type: 'string',
		default: "={{ $json.query?.job_id ?? $json.job_id ?? '' }}",
		required: true,
	},
	{
		displayName: 'Preview Characters',
		name: 'previewChars',
		type: 'number',
		typeOptions: { minValue: 100, maxValue: 1000000 },
		default: 2000,
		description: 'The payload and the result are cut to this many characters',
	},
];

export const description = withDisplayOptions({ show: { operation: ['jobStory'] } }, properties);

/**
 * A job with every attempt, its result or error and its callback deliveries; `found: false` if
 * none. The deliveries are read from the queue every node writes job-finished events to (the
 * store's default, `callbacks`: no node lets a workflow choose another).
 */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await runEach(this, {
		read: (itemIndex) => ({
			jobId: this.getNodeParameter('storyJobId', itemIndex, '') as string,
			previewChars: this.getNodeParameter('previewChars', itemIndex, 2000) as number,
		}),
		call: async ({ jobId, previewChars }, store) =>
			await (await store()).jobStory(jobId, { previewChars }),
		json: (story, { jobId }) =>
			story ? { found: true, ...story } : { found: false, job_id: String(jobId) },
	});
}
