import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { runOnce } from '../../../shared/batch';
import { queueFilter } from './common';
import { withDisplayOptions } from '../../../shared/operations';

const properties: INodeProperties[] = [
	{
		displayName: 'Older Than (Days)',
		name: 'olderThanDays',
		type: 'number',
		typeOptions: { minValue: 0 },
		default: 7,
	},
	{
		displayName: 'Statuses',
		name: 'statuses',
		type: 'multiOptions',
		options: [
			{ name: 'Done', value: 'done' },
			{ name: 'Failed', value: 'failed' },
			{ name: 'Cancelled', value: 'cancelled' },
		],
		default: ['done', 'cancelled'],
	},
];

export const description = withDisplayOptions({ show: { operation: ['purge'] } }, properties);

/** Deletes finished jobs older than the retention, once per execution; one item with the counts. */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await runOnce(this, {
		outputs: 1,
		read: () => ({
			queue: queueFilter(this),
			olderThanMs: Math.round(
				(this.getNodeParameter('olderThanDays', 0, 7) as number) * 24 * 3600_000,
			),
			statuses: this.getNodeParameter('statuses', 0, ['done', 'cancelled']) as string[],
		}),
		call: async (store, selection) => await store.purge(selection),
		route: (counts) => ({ output: 0, json: counts }),
	});
}
