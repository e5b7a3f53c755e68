import type {
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';

import { router } from './actions/router';
import { description as leaseProperties } from './actions/lease/Lease.resource';
import { commonDescription, credentialTestMethods } from '../shared/descriptions';

export { leasedJobJson } from './actions/lease/lease.operation';

/** Parameters and code per operation live in actions/lease/<operation>.operation.ts. */
export class JobLease implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Job Lease',
		name: 'jobLease',
		icon: { light: 'file:jobLease.svg', dark: 'file:jobLease.dark.svg' },
		...commonDescription,
		subtitle:
			'={{ ($parameter["operation"] === "extendLease" ? "extend lease" : "lease from " + $parameter["queue"]) }}',
		description: 'Claim due jobs from a queue for a worker (or extend a lease as a heartbeat)',
		defaults: { name: 'Job Lease' },
		usableAsTool: true,
		outputs: `={{ $parameter["operation"] === "extendLease" ? [{ "type": "main", "displayName": "Extended" }, { "type": "main", "displayName": "Lease Lost" }] : [{ "type": "main", "displayName": "Leased" }, { "type": "main", "displayName": "Empty" }] }}`,
		credentials: [
			{ name: 'durableJobsPostgresApi', required: true, testedBy: 'durableJobsConnectionTest' },
		],
		properties: leaseProperties,
	};

	methods = credentialTestMethods;

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await router.call(this);
	}
}
