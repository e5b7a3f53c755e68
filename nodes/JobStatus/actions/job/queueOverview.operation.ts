import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { runEach } from '../../../shared/batch';
import { dateParameter } from '../../../shared/dates';
import { withDisplayOptions } from '../../../shared/operations';

const properties: INodeProperties[] = [
	{
		displayName: 'Chart Since',
		name: 'chartSince',
		type: 'string',
		default: "={{ $json.query?.chart_since ?? '' }}",
		description:
			"Only chart the minutes from this time on (ISO 8601; without an offset, in the workflow's time zone); empty: the last 60 minutes. A refreshing page asks for the last minutes only.",
	},
];

export const description = withDisplayOptions(
	{ show: { operation: ['queueOverview'] } },
	properties,
);

/** Queue Stats of every queue and the jobs finished and failed per minute, one answer per item. */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await runEach(this, {
		read: (itemIndex) => ({
			chartSince: dateParameter(
				this.getNodeParameter('chartSince', itemIndex, ''),
				this.getTimezone(),
				'Chart Since',
			),
		}),
		call: async (input, store) => await (await store()).queueOverview(input),
	});
}
