import {
	NodeConnectionTypes,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import { testDurableJobsConnection } from '../shared/credentialTest';
import { router } from './actions/router';
import { description as leaseProperties } from './actions/lease/Lease.resource';

export { leasedJobJson } from './actions/lease/lease.operation';

/** Parameters and code per operation live in actions/lease/<operation>.operation.ts. */
export class JobLease implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Job Lease',
		name: 'jobLease',
		icon: { light: 'file:jobLease.svg', dark: 'file:jobLease.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle:
			'={{ ($parameter["operation"] === "extendLease" ? "extend lease" : "lease from " + $parameter["queue"]) }}',
		description: 'Claim due jobs from a queue for a worker (or extend a lease as a heartbeat)',
		defaults: { name: 'Job Lease' },
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		outputs: `={{ $parameter["operation"] === "extendLease" ? [{ "type": "main", "displayName": "Extended" }, { "type": "main", "displayName": "Lease Lost" }] : [{ "type": "main", "displayName": "Leased" }, { "type": "main", "displayName": "Empty" }] }}`,
		credentials: [
			{ name: 'durableJobsPostgresApi', required: true, testedBy: 'durableJobsConnectionTest' },
		],
		properties: leaseProperties,
	};

	methods = { credentialTest: { durableJobsConnectionTest: testDurableJobsConnection } };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await router.call(this);
	}
}
