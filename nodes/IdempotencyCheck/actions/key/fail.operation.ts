import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { withDisplayOptions } from '../../../shared/operations';
import { settle } from './settle';

const properties: INodeProperties[] = [
	{
		displayName: 'Error Message',
		name: 'errorMessage',
		type: 'string',
		default: '',
	},
];

export const description = withDisplayOptions({ show: { operation: ['fail'] } }, properties);

export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await settle(this, 'fail');
}
