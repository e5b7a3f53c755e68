import {
	ExecutionBaseError,
	NodeOperationError,
	type IDataObject,
	type INode,
	type INodeExecutionData,
} from 'n8n-workflow';

import { DurableJobsError, classifyDatabaseError, isSetupFault } from '../../src/core';

export function asDurableError(error: unknown): DurableJobsError {
	if (error instanceof DurableJobsError) return error;
	// n8n's own errors (a NodeOperationError, or an ExpressionError from a parameter whose
	// expression failed) are parameter problems, not database errors.
	if (error instanceof ExecutionBaseError) {
		const parameter =
			typeof error.context?.parameter === 'string' ? error.context.parameter : undefined;
		return new DurableJobsError('invalid_parameter', error.message, {
			field: parameter,
			fix: error.description ?? undefined,
			httpStatus: 400,
		});
	}
	return classifyDatabaseError(error);
}

/** A NodeOperationError naming the item, the field and the fix. */
export function toNodeError(node: INode, error: unknown, itemIndex?: number): NodeOperationError {
	if (error instanceof NodeOperationError) return error;
	const durable = asDurableError(error);
	return new NodeOperationError(node, durable.message, {
		itemIndex,
		description:
			[durable.fix, durable.field ? `Field: ${durable.field}` : undefined]
				.filter(Boolean)
				.join(' — ') || undefined,
	});
}

/**
 * The JSON an item carries on the error output (or the main output with "continue"):
 * `{ error, details }` and nothing else. n8n recognises exactly that shape as an error item and
 * merges the item's input JSON into it; an item with an `error` property instead has its JSON
 * replaced by `{ error: message }` (n8n's normalizeNodeErrors), which would drop the details.
 */
export function errorJson(error: unknown): IDataObject {
	const durable = asDurableError(error);
	return {
		error: durable.message,
		details: {
			code: durable.code,
			field: durable.field ?? null,
			fix: durable.fix ?? null,
			http_status: durable.httpStatus,
			// Server errors only: whether a retry of the request can get past it (false) or
			// someone must fix the setup first (true), for a receiver's 503 or 500.
			...(durable.httpStatus >= 500 ? { setup_fault: isSetupFault(durable) } : {}),
			...(durable.code === 'idempotency_key_reused' || durable.code === 'event_id_reused'
				? { existing_job_id: (durable as unknown as { existingJobId: string }).existingJobId }
				: {}),
		},
	};
}

export function errorItem(_node: INode, error: unknown, itemIndex: number): INodeExecutionData {
	return { json: errorJson(error), pairedItem: { item: itemIndex } };
}

/** Bad input found by the glue itself, in the core's error shape (field and fix named). */
export function invalidInput(field: string, message: string, fix: string): DurableJobsError {
	return new DurableJobsError('invalid_input', `${field}: ${message}`, {
		field,
		fix,
		httpStatus: 400,
	});
}
