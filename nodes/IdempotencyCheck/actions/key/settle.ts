import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeProperties,
} from 'n8n-workflow';

import {
	DURATION_LIMITS_MS,
	validateKey,
	validateUuid,
	type SettleInput,
	type SettleResult,
} from '../../../../src/core';
import { durationMs, parseJsonParameter, runBatch } from '../../../shared/batch';
import { lazyStore } from '../../../shared/connection';
import { invalidInput } from '../../../shared/errors';
import { withDisplayOptions, type NodeOperation } from '../../../shared/operations';
import {
	claimedClaimId,
	claimedKey,
	readUpstreamField,
	upstreamNotice,
} from '../../../shared/upstream';

/** Parameters Complete and Fail / Release share: which claim they settle. */
export const settleProperties: INodeProperties[] = withDisplayOptions(
	{ show: { operation: ['complete', 'fail'] } },
	[
		upstreamNotice('Key and Claim ID', [claimedKey, claimedClaimId]),
		{
			displayName: 'Key',
			name: 'settleKey',
			type: 'string',
			default: '={{ $json.idempotency.key }}',
			required: true,
		},
		{
			displayName: 'Claim ID',
			name: 'claimId',
			type: 'string',
			default: '={{ $json.idempotency.claim_id }}',
			required: true,
			description:
				"The claim_id of the Claim operation's New item. It fences the write: a claimer whose claim expired and was taken over cannot settle it. An empty Claim ID is refused, never settled unfenced.",
		},
	],
);

/**
 * *Claim ID*: required. Empty (a default that read an item without a claim, such as one after
 * an HTTP Request, or a Duplicate or In Progress item) would settle the key whoever holds it,
 * so it is refused; the fix names the expression that reads the claim from its node.
 */
function claimIdValue(value: unknown, field: string): string {
	if (value === undefined || value === null || value === '')
		throw invalidInput(
			'Claim ID',
			'is empty, so the write could not be fenced by the claim',
			"Map Claim ID to the claim_id of the Claim operation's New item that this item settles",
		);
	return validateUuid(value, field);
}

/** The Options collection (shared by every operation), with the key TTL in milliseconds. */
export function settleOptions(
	context: IExecuteFunctions,
	itemIndex: number,
): { claimTimeoutSeconds: unknown; ttlMs: number | null } {
	const options = context.getNodeParameter('options', itemIndex, {}) as IDataObject;
	return {
		claimTimeoutSeconds: options.claimTimeoutSeconds,
		ttlMs:
			durationMs(options.ttlHours, 'Keep Keys For (Hours)', 'hours', DURATION_LIMITS_MS.keyTtl) ??
			null,
	};
}

/**
 * Complete (the result is stored; later items with the key are duplicates that carry it) or
 * Fail / Release (a retry of the event is processed again) for every item, in one statement
 * (one per round when items repeat a key). Settled, or Claim Lost when the claim is no longer
 * this claimer's.
 */
export async function settle(
	context: IExecuteFunctions,
	operation: 'complete' | 'fail',
): Promise<INodeExecutionData[][]> {
	const store = lazyStore(context);
	return await runBatch<SettleInput, SettleResult>(context, {
		outputs: 2,
		errorOutput: 1,
		read: (itemIndex) => {
			const { ttlMs } = settleOptions(context, itemIndex);
			return {
				// Keys and ids are checked before the batch is sent, so without "continue" a bad
				// item stops the node before any claim of the batch is settled.
				scope: validateKey(context.getNodeParameter('scope', itemIndex), 'scope'),
				key: readUpstreamField(context, itemIndex, claimedKey, validateKey),
				claimId: readUpstreamField(
					context,
					itemIndex,
					claimedClaimId,
					claimIdValue,
					context.getNodeParameter('claimId', itemIndex, '') as unknown,
				),
				result:
					operation === 'complete'
						? parseJsonParameter(context.getNodeParameter('result', itemIndex, null), 'Result')
						: undefined,
				errorMessage:
					operation === 'fail'
						? (context.getNodeParameter('errorMessage', itemIndex, '') as string) || null
						: null,
				ttlMs,
			};
		},
		call: async (inputs, allOrNothing) =>
			operation === 'complete'
				? await (await store()).completeClaims(inputs, { allOrNothing })
				: await (await store()).failClaims(inputs, { allOrNothing }),
		route: (result, itemIndex, input) => ({
			output: result.applied ? 0 : 1,
			json: {
				...context.getInputData()[itemIndex].json,
				idempotency: {
					scope: input.scope,
					key: input.key,
					claim_id: input.claimId ?? null,
					status: result.applied
						? operation === 'complete'
							? 'completed'
							: 'failed'
						: result.currentStatus,
					settled: result.applied,
					expires_at: result.expiresAt ? result.expiresAt.toISOString() : null,
				},
			},
		}),
	});
}

/** Complete or Fail / Release: its own parameters, and the settle above. */
export function settleOperation(
	operation: 'complete' | 'fail',
	properties: INodeProperties[],
): NodeOperation {
	return {
		description: withDisplayOptions({ show: { operation: [operation] } }, properties),
		execute: async function (this: IExecuteFunctions) {
			return await settle(this, operation);
		},
	};
}
