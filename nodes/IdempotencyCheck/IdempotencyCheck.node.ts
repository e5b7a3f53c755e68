import type {
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';

import { operationSubtitle } from '../shared/operations';
import { description as keyProperties, operationOptions } from './actions/key/Key.resource';
import { router } from './actions/router';
import { commonDescription, credentialTestMethods } from '../shared/descriptions';

export { keyFromFields } from './actions/key/claim.operation';

/** Parameters and code per operation live in actions/key/<operation>.operation.ts. */
export class IdempotencyCheck implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Idempotency Check',
		name: 'idempotencyCheck',
		icon: { light: 'file:idempotencyCheck.svg', dark: 'file:idempotencyCheck.dark.svg' },
		...commonDescription,
		subtitle: operationSubtitle(operationOptions, ' + " in " + $parameter["scope"]'),
		description:
			'Process each event or request once: route new, duplicate, in-progress, conflicting and late items apart',
		defaults: { name: 'Idempotency Check' },
		usableAsTool: true,
		outputs: `={{ $parameter["operation"] !== "claim" ? [{ "type": "main", "displayName": "Settled" }, { "type": "main", "displayName": "Claim Lost" }] : [{ "type": "main", "displayName": "New" }, { "type": "main", "displayName": "Duplicate" }, { "type": "main", "displayName": "In Progress" }, { "type": "main", "displayName": "Conflict" }].concat($parameter["lateEventGuard"] ? [{ "type": "main", "displayName": "Stale" }] : []) }}`,
		credentials: [
			{ name: 'durableJobsPostgresApi', required: true, testedBy: 'durableJobsConnectionTest' },
		],
		properties: keyProperties,
	};

	methods = credentialTestMethods;

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await router.call(this);
	}
}
