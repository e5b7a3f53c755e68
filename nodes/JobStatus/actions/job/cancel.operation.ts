import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { withDisplayOptions } from '../../../shared/operations';
import { runForJobIds } from './jobIds';

const properties: INodeProperties[] = [
	{
		displayName: 'Job IDs',
		name: 'jobIds',
		type: 'string',
		default: '={{ $json.job_id }}',
		required: true,
		description:
			'Comma-separated IDs, or an expression returning an array; IDs of all input items are handled in one statement',
	},
	{
		displayName: 'Reason',
		name: 'reason',
		type: 'string',
		default: '',
		description:
			'The reason of every job this execution cancels, shown by Get as cancel_reason (read from the first item: all IDs go in one statement)',
	},
];

export const description = withDisplayOptions({ show: { operation: ['cancel'] } }, properties);

/** Cancels the named jobs; one item per job, `cancelled: false` for one that had finished. */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await runForJobIds(this, {
		parameter: 'jobIds',
		settings: () => (this.getNodeParameter('reason', 0, '') as string) || null,
		call: async (store, ids, reason) => await store.cancel(ids, reason),
		// job_id, as every other node's items, so the next node's default {{ $json.job_id }} reads
		// it; id stays for workflows that read it.
		json: (row) => ({ job_id: row.id, ...row }),
	});
}
