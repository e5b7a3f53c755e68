import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { runOnce } from '../../../shared/batch';
import { lazyStore } from '../../../shared/connection';

/** Queue Stats has only the Queue shared with other operations (see Job.resource.ts). */
export const description: INodeProperties[] = [];

/** One item per queue (or for the one queue asked about), once per execution. */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const store = lazyStore(this);
	return await runOnce(this, {
		outputs: 1,
		read: () => (this.getNodeParameter('queue', 0, '') as string) || null,
		call: async (queue) => await (await store()).stats(queue),
		route: (stats) =>
			stats.map((entry) => ({
				output: 0,
				json: { ...entry, checked_at: new Date().toISOString() },
			})),
	});
}
