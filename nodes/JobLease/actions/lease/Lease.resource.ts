import type { INodeProperties, INodePropertyOptions } from 'n8n-workflow';

import { operationProperty } from '../../../shared/operations';
import * as extendLease from './extendLease.operation';
import * as lease from './lease.operation';

export { extendLease, lease };

export const operationOptions: INodePropertyOptions[] = [
	{
		name: 'Lease',
		value: 'lease',
		action: 'Lease jobs from a queue',
		description: 'Claim up to N due jobs (or jobs whose lease expired)',
	},
	{
		name: 'Extend Lease',
		value: 'extendLease',
		action: 'Extend the lease of a job',
		description: 'Heartbeat: keep owning a job that takes longer',
	},
];

export const description: INodeProperties[] = [
	operationProperty(operationOptions, 'lease'),
	...lease.description,
	...extendLease.description,
];
