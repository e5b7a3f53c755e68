import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { runOnce } from '../../../shared/batch';
import { queueFilter } from './common';

/** Queue Stats has only the Queue shared with other operations (see Job.resource.ts). */
export const description: INodeProperties[] = [];

/** One item per queue (or for the one queue asked about), once per execution. */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await runOnce(this, {
		outputs: 1,
		read: () => queueFilter(this),
		call: async (store, queue) => await store.stats(queue),
		route: (stats) =>
			stats.map((entry) => ({
				output: 0,
				json: { ...entry, checked_at: new Date().toISOString() },
			})),
	});
}
