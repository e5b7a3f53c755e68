import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import * as key from './key/Key.resource';

/** Complete, Fail / Release, or (any other value, as always) Claim. */
export async function router(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const operation = this.getNodeParameter('operation', 0) as string;
	const handler =
		operation === 'complete' ? key.complete : operation === 'fail' ? key.fail : key.claim;
	return await handler.execute.call(this);
}
