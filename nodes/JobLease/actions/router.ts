import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import * as lease from './lease/Lease.resource';

/** Extend Lease, or (any other value, as always) Lease. */
export async function router(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const operation = this.getNodeParameter('operation', 0) as string;
	const handler = operation === 'extendLease' ? lease.extendLease : lease.lease;
	return await handler.execute.call(this);
}
