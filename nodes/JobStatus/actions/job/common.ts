import type { IExecuteFunctions, INodeProperties } from 'n8n-workflow';

/** Limit of Requeue and Unknown Outcomes; each operation shows it among its own parameters. */
export const limitField: INodeProperties = {
	displayName: 'Limit',
	name: 'maxJobs',
	type: 'number',
	typeOptions: { minValue: 1, maxValue: 10000 },
	default: 100,
};

/** The queue Queue Stats, Unknown Outcomes and Purge look at. */
export const queueFilterField: INodeProperties = {
	displayName: 'Queue',
	name: 'queue',
	type: 'string',
	default: '',
	placeholder: 'documents',
	displayOptions: { show: { operation: ['stats', 'unknownOutcomes', 'purge'] } },
	description: 'Leave empty for all queues',
};

/** The queue filter's value: null (every queue) when empty. */
export function queueFilter(context: IExecuteFunctions): string | null {
	return (context.getNodeParameter('queue', 0, '') as string) || null;
}
