import type {
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';

import { operationSubtitle } from '../shared/operations';
import { description as jobProperties, operationOptions } from './actions/job/Job.resource';
import { router } from './actions/router';
import { commonDescription, credentialTestMethods } from '../shared/descriptions';

export { statusJson } from './actions/job/get.operation';

const OPERATIONS_WITH_TWO_OUTPUTS = ['get'];

/** Parameters and code per operation live in actions/job/<operation>.operation.ts. */
export class JobStatus implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Job Status',
		name: 'jobStatus',
		icon: { light: 'file:jobStatus.svg', dark: 'file:jobStatus.dark.svg' },
		...commonDescription,
		subtitle: operationSubtitle(operationOptions),
		description: 'Look up a job, watch queue health, and replay, cancel or purge jobs',
		defaults: { name: 'Job Status' },
		usableAsTool: true,
		outputs: `={{ ${JSON.stringify(OPERATIONS_WITH_TWO_OUTPUTS)}.includes($parameter["operation"]) ? [{ "type": "main", "displayName": "Found" }, { "type": "main", "displayName": "Not Found" }] : [{ "type": "main" }] }}`,
		credentials: [
			{ name: 'durableJobsPostgresApi', required: true, testedBy: 'durableJobsConnectionTest' },
		],
		properties: jobProperties,
	};

	methods = credentialTestMethods;

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await router.call(this);
	}
}
