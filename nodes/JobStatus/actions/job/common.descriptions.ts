import type { INodeProperties } from 'n8n-workflow';

/** Limit of Requeue and Unknown Outcomes; each operation shows it among its own parameters. */
export const limitField: INodeProperties = {
	displayName: 'Limit',
	name: 'maxJobs',
	type: 'number',
	typeOptions: { minValue: 1, maxValue: 10000 },
	default: 100,
};
