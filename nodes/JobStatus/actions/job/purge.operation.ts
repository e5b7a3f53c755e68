import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { DURATION_LIMITS_MS } from '../../../../src/core';
import { durationMs, runOnce } from '../../../shared/batch';
import { invalidInput } from '../../../shared/errors';
import { queueFilter } from './common';
import { withDisplayOptions } from '../../../shared/operations';

const properties: INodeProperties[] = [
	{
		displayName: 'Older Than (Days)',
		name: 'olderThanDays',
		type: 'number',
		typeOptions: { minValue: 0 },
		default: 7,
	},
	{
		displayName: 'Statuses',
		name: 'statuses',
		type: 'multiOptions',
		options: [
			{ name: 'Done', value: 'done' },
			{ name: 'Failed', value: 'failed' },
			{ name: 'Cancelled', value: 'cancelled' },
		],
		default: ['done', 'cancelled'],
	},
];

export const description = withDisplayOptions({ show: { operation: ['purge'] } }, properties);

/** Deletes finished jobs older than the retention, once per execution; one item with the counts. */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await runOnce(this, {
		outputs: 1,
		read: () => ({
			queue: queueFilter(this),
			olderThanMs:
				durationMs(
					this.getNodeParameter('olderThanDays', 0, null),
					'Older Than (Days)',
					'days',
					DURATION_LIMITS_MS.purgeOlderThan,
				) ?? DURATION_LIMITS_MS.purgeOlderThan.default,
			statuses: chosenStatuses(this.getNodeParameter('statuses', 0, ['done', 'cancelled'])),
		}),
		call: async (store, selection) => await store.purge(selection),
		route: (counts) => ({ output: 0, json: counts }),
	});
}

/**
 * The chosen statuses: the list the editor stores, or from an expression an array or
 * comma-separated text ("done,failed"). No status chosen would purge nothing; it is refused
 * rather than read as "all of them".
 */
function chosenStatuses(value: unknown): string[] {
	const statuses = (
		Array.isArray(value) ? value.map(String) : typeof value === 'string' ? value.split(',') : []
	)
		.map((status) => status.trim())
		.filter(Boolean);
	if (statuses.length === 0)
		throw invalidInput(
			'Statuses',
			'no status is chosen, so nothing would be purged',
			'Choose at least one of Done, Failed and Cancelled',
		);
	return statuses;
}
