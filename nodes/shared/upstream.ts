import type { IExecuteFunctions, INodeProperties } from 'n8n-workflow';

import { DurableJobsError } from '../../src/core';
import { PACKAGE_NAME } from './descriptions';

/**
 * A parameter whose default reads a field of the item right before this node, such as Job ID
 * (`{{ $json.job_id }}` from Job Lease). After any node in between, that item is another one,
 * and the working expression reads the field from the producing node by name.
 */
export interface UpstreamField {
	/** Node parameter, e.g. jobId. */
	parameter: string;
	/** Field named in the error (the core's name for it). */
	field: string;
	/** Path of the value in the producing node's item, e.g. job_id or idempotency.key. */
	path: string;
	/** Node types (without the package prefix) whose items carry the field. */
	producers: string[];
	/** Display name of the usual producer, when the workflow cannot be asked. */
	producerName: string;
	/** Display names of the other producers, named in the notice. */
	otherProducerNames?: string[];
}

/** `{{ $('Job Lease').item.json.job_id }}`: the expression that reads the field by node name. */
export function producerExpression(producerName: string, path: string): string {
	return `{{ $('${producerName.replace(/'/g, "\\'")}').item.json.${path} }}`;
}

/** The nearest upstream node that produces the field, else the usual producer's name. */
function producerName(context: IExecuteFunctions, field: UpstreamField): string {
	const types = field.producers.map((type) => `${PACKAGE_NAME}.${type}`);
	try {
		const parents = context.getParentNodes(context.getNode().name);
		return parents.find((parent) => types.includes(parent.type))?.name ?? field.producerName;
	} catch {
		// Outside a full workflow (a test harness) there are no parent nodes to ask.
		return field.producerName;
	}
}

/** The validation error, its fix extended with the expression that reads the field by node name. */
function withProducerFix(
	context: IExecuteFunctions,
	error: unknown,
	field: UpstreamField,
): unknown {
	if (!(error instanceof DurableJobsError)) return error;
	const expression = producerExpression(producerName(context, field), field.path);
	return new DurableJobsError(error.code, error.message, {
		field: error.field,
		httpStatus: error.httpStatus,
		fix: `${error.fix ? `${error.fix}. ` : ''}The default {{ $json.${field.path} }} reads the item right before this node; with another node in between, use ${expression}`,
	});
}

/**
 * Validates the parameter's value; when it is not valid, the error's fix shows the expression
 * that reads the field from the producing node, which works whatever stands in between.
 */
export function readUpstreamField<T>(
	context: IExecuteFunctions,
	itemIndex: number,
	field: UpstreamField,
	validate: (value: unknown, field: string) => T,
	value: unknown = context.getNodeParameter(field.parameter, itemIndex),
): T {
	try {
		return validate(value, field.field);
	} catch (error) {
		throw withProducerFix(context, error, field);
	}
}

/** Nodes whose output items are leased jobs (job_id, attempt_id). */
const LEASED_ITEM_PRODUCERS = ['jobLease', 'jobTrigger'];

export const leasedJobId: UpstreamField = {
	parameter: 'jobId',
	field: 'jobId',
	path: 'job_id',
	producers: LEASED_ITEM_PRODUCERS,
	producerName: 'Job Lease',
	otherProducerNames: ['Job Trigger'],
};

export const leasedAttemptId: UpstreamField = {
	parameter: 'attemptId',
	field: 'attemptId',
	path: 'attempt_id',
	producers: LEASED_ITEM_PRODUCERS,
	producerName: 'Job Lease',
	otherProducerNames: ['Job Trigger'],
};

/** Claim output fields that Idempotency Check's Complete and Fail / Release read. */
export const claimedKey: UpstreamField = {
	parameter: 'settleKey',
	field: 'key',
	path: 'idempotency.key',
	producers: ['idempotencyCheck'],
	producerName: 'Idempotency Check',
};

export const claimedClaimId: UpstreamField = {
	parameter: 'claimId',
	field: 'claimId',
	path: 'idempotency.claim_id',
	producers: ['idempotencyCheck'],
	producerName: 'Idempotency Check',
};

/**
 * A notice for parameters whose defaults read the item right before the node: it names the
 * expression that keeps working when other nodes stand in between.
 */
export function upstreamNotice(label: string, fields: UpstreamField[]): INodeProperties {
	const [first] = fields;
	const producers = [first.producerName, ...(first.otherProducerNames ?? [])].join(' or ');
	return {
		displayName: `${label} default to ${fields.map((field) => `{{ $json.${field.path} }}`).join(' and ')}, which read the item right before this node. After a node that replaces the item (an HTTP Request, a Code node …), use ${fields.map((field) => producerExpression(first.producerName, field.path)).join(' and ')}, with the name of your ${producers} node.`,
		name: `${first.parameter}Notice`,
		type: 'notice',
		default: '',
	};
}
