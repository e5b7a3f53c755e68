import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { COUNT_LIMITS } from '../../../../src/core';
import { runOnce, wholeNumberParameter } from '../../../shared/batch';
import { withDisplayOptions } from '../../../shared/operations';
import { limitField } from './common';
import { runForJobIds } from './jobIds';

const properties: INodeProperties[] = [
	{
		displayName: 'Select By',
		name: 'selectBy',
		type: 'options',
		options: [
			{ name: 'Job IDs', value: 'ids' },
			{ name: 'Filter', value: 'filter' },
		],
		default: 'ids',
		// An AI agent may replay jobs it names, never every job a filter matches.
		displayOptions: { hide: { '@tool': [true] } },
	},
	{
		displayName: 'Job IDs',
		name: 'requeueJobIds',
		type: 'string',
		default: '={{ $json.job_id }}',
		required: true,
		displayOptions: { hide: { selectBy: ['filter'] } },
		description: 'Comma-separated IDs, or an expression returning an array',
	},
	...withDisplayOptions({ show: { selectBy: ['filter'] } }, [
		{
			displayName: 'Queue',
			name: 'filterQueue',
			type: 'string',
			default: '',
			required: true,
		},
		{
			displayName: 'Error Code',
			name: 'filterErrorCode',
			type: 'string',
			default: '',
		},
		{
			displayName: 'Error Class',
			name: 'filterErrorClass',
			type: 'options',
			options: [
				{ name: 'Any', value: '' },
				{ name: 'Discarded', value: 'discarded' },
				{ name: 'Needs Manual Review', value: 'needs_manual_review' },
				{ name: 'Needs Mapping', value: 'needs_mapping' },
				{ name: 'Retryable', value: 'retryable' },
			],
			default: 'retryable',
		},
		{
			displayName: 'Confirm Requeue by Filter',
			name: 'confirm',
			type: 'boolean',
			default: false,
			description: 'Whether to really replay every failed job the filter matches (up to Limit)',
		},
	]),
	// By ids every named job is handled; the limit caps what a filter may match.
	{ ...limitField, displayOptions: { show: { selectBy: ['filter'] } } },
	{
		displayName: 'Additional Attempts',
		name: 'additionalAttempts',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: 1000 },
		default: 3,
		description:
			'Attempts a replayed job gets on top of those it used; one number for every job of the execution (read from the first item)',
	},
];

export const description = withDisplayOptions({ show: { operation: ['requeue'] } }, properties);

/** How the jobs to replay are chosen (Job IDs when the parameter is hidden, as in the tool). */
export function selectBy(context: IExecuteFunctions): string {
	return context.getNodeParameter('selectBy', 0, 'ids') as string;
}

/** Replays failed jobs: the ones the items name, or (confirmed) the ones a filter matches. */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const additionalAttempts = (): number =>
		wholeNumberParameter(
			this.getNodeParameter('additionalAttempts', 0, null),
			'Additional Attempts',
			COUNT_LIMITS.additionalAttempts,
			COUNT_LIMITS.additionalAttempts.default,
		);
	if (selectBy(this) === 'ids') {
		return await runForJobIds(this, {
			parameter: 'requeueJobIds',
			settings: additionalAttempts,
			call: async (store, jobIds, attempts) =>
				await store.requeue({ jobIds, additionalAttempts: attempts }),
			// job_id, as every other node's items, so the next node's default {{ $json.job_id }}
			// reads it; id stays for workflows that read it.
			json: (row) => ({ job_id: row.id, ...row }),
		});
	}
	return await runOnce(this, {
		outputs: 1,
		read: () => ({
			queue: this.getNodeParameter('filterQueue', 0) as string,
			errorCode: (this.getNodeParameter('filterErrorCode', 0, '') as string) || null,
			errorClass: (this.getNodeParameter('filterErrorClass', 0, '') as string) || null,
			confirm: this.getNodeParameter('confirm', 0, false) as boolean,
			limit: wholeNumberParameter(
				this.getNodeParameter('maxJobs', 0, null),
				'Limit',
				COUNT_LIMITS.requeue,
				COUNT_LIMITS.requeue.default,
			),
			additionalAttempts: additionalAttempts(),
		}),
		call: async (store, selection) => await store.requeue(selection),
		route: (rows) => rows.map((row) => ({ output: 0, json: { job_id: row.id, ...row } })),
	});
}
