import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { COUNT_LIMITS } from '../../../../src/core';
import { runOnce, wholeNumberParameter } from '../../../shared/batch';
import { datesAsIso } from '../../../shared/dates';
import { withDisplayOptions } from '../../../shared/operations';
import { limitField, queueFilter } from './common';

export const description = withDisplayOptions({ show: { operation: ['unknownOutcomes'] } }, [
	limitField,
]);

function check(row: Record<string, unknown>): string {
	return row.checkpoint
		? `passed checkpoint "${String(row.checkpoint)}": the external call after it may have happened — look up stable_key in the external system before replaying`
		: 'no checkpoint recorded: if the worker records one before its external call (Job Lease → Extend Lease → Checkpoint), this attempt never made that call; otherwise look up stable_key before replaying';
}

/** Attempts that ended without an outcome, each with what to check before replaying it. */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await runOnce(this, {
		outputs: 1,
		read: () => ({
			queue: queueFilter(this),
			limit: wholeNumberParameter(
				this.getNodeParameter('maxJobs', 0, null),
				'Limit',
				COUNT_LIMITS.unknownOutcomes,
				COUNT_LIMITS.unknownOutcomes.default,
			),
		}),
		call: async (store, { queue, limit }) => await store.unknownOutcomes(queue, limit),
		route: (rows) =>
			rows.map((row) => ({
				output: 0,
				json: { ...datesAsIso(row), check: check(row) } as IDataObject,
			})),
	});
}
