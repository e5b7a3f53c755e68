import type { INodeProperties, INodePropertyOptions } from 'n8n-workflow';

import { optionsCollection } from '../../../shared/descriptions';
import { operationProperty } from '../../../shared/operations';
import * as claim from './claim.operation';
import * as complete from './complete.operation';
import * as fail from './fail.operation';
import { settleProperties } from './settle';

export { claim, complete, fail };

export const operationOptions: INodePropertyOptions[] = [
	{
		name: 'Claim',
		value: 'claim',
		action: 'Claim an idempotency key',
		description: 'Check a key and claim it if it is new',
	},
	{
		name: 'Complete',
		value: 'complete',
		action: 'Complete a claim',
		description: 'Store the result: later items with the key go to Duplicate and carry it',
	},
	{
		name: 'Fail / Release',
		value: 'fail',
		action: 'Fail or release a claim',
		description: 'Mark the claim failed so a retry of the event is processed again (as a replay)',
	},
];

export const description: INodeProperties[] = [
	operationProperty(operationOptions, 'claim'),
	{
		displayName: 'Scope',
		name: 'scope',
		type: 'string',
		default: 'default',
		required: true,
		description: 'Keys are unique per scope, e.g. one scope per source system',
	},
	...claim.description,
	...settleProperties,
	...complete.description,
	...fail.description,
	optionsCollection([
		{
			displayName: 'Claim Timeout Seconds',
			name: 'claimTimeoutSeconds',
			type: 'number',
			typeOptions: { minValue: 1 },
			default: 300,
			// Only a claim holds the key for a while; Complete and Fail / Release end it.
			displayOptions: { show: { '/operation': ['claim'] } },
			description:
				'A claim not completed or failed by then may be taken over (the item is then a replay)',
		},
		{
			displayName: 'Keep Keys For (Hours)',
			name: 'ttlHours',
			type: 'number',
			typeOptions: { minValue: 0.001 },
			default: 24,
			description:
				'How long a key is remembered in this scope; after that the same key is new again',
		},
	]),
];
