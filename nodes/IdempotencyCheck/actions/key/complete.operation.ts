import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { withDisplayOptions } from '../../../shared/operations';
import { settle } from './settle';

const properties: INodeProperties[] = [
	{
		displayName: 'Result',
		name: 'result',
		type: 'json',
		default: '={{ $json }}',
		description: 'Stored with the key; duplicates of the event carry it',
	},
];

export const description = withDisplayOptions({ show: { operation: ['complete'] } }, properties);

export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await settle(this, 'complete');
}
