import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { DurableJobsError, type ItemResults } from '../../src/core';
import { errorItem, invalidInput, toNodeError } from './errors';

export interface Routed {
	output: number;
	json: IDataObject;
}

/**
 * The per-item contract every node shares, in one place: parameters are read per item (a bad
 * item stops the node before anything is written, or with "continue" goes to the error
 * output), the core is called once for all good items, each result is routed to an output
 * with its pairedItem, and core errors are mapped back to the item they belong to.
 *
 * Without "continue", the core is asked for all-or-nothing, so one bad item writes nothing.
 */
export async function runBatch<TInput, TResult>(
	context: IExecuteFunctions,
	spec: {
		outputs: number;
		read: (itemIndex: number, item: INodeExecutionData) => TInput;
		call: (inputs: TInput[], allOrNothing: boolean) => Promise<ItemResults<TResult>>;
		route: (result: TResult, itemIndex: number, input: TInput) => Routed;
	},
): Promise<INodeExecutionData[][]> {
	const node = context.getNode();
	const items = context.getInputData();
	const continueOnFail = context.continueOnFail();
	const outputs: INodeExecutionData[][] = Array.from({ length: spec.outputs }, () => []);
	const inputs: TInput[] = [];
	const inputItemIndexes: number[] = [];

	for (let itemIndex = 0; itemIndex < items.length; itemIndex++) {
		try {
			inputs.push(spec.read(itemIndex, items[itemIndex]));
			inputItemIndexes.push(itemIndex);
		} catch (error) {
			if (!continueOnFail) throw toNodeError(node, error, itemIndex);
			outputs[0].push(errorItem(node, error, itemIndex));
		}
	}
	if (inputs.length === 0) return outputs;

	let results: ItemResults<TResult>;
	try {
		results = await spec.call(inputs, !continueOnFail);
	} catch (error) {
		const position = error instanceof DurableJobsError ? error.itemPosition : undefined;
		const itemIndex = position === undefined ? undefined : inputItemIndexes[position];
		if (!continueOnFail) throw toNodeError(node, error, itemIndex);
		for (const index of inputItemIndexes) outputs[0].push(errorItem(node, error, index));
		return outputs;
	}

	// Indexed loop, not results.forEach: forEach skips the holes of a sparse result array, and an
	// item the core returned nothing for must surface as an error, not vanish from the output.
	for (let position = 0; position < inputs.length; position++) {
		const result = results[position];
		const itemIndex = inputItemIndexes[position];
		if (result instanceof DurableJobsError || result === undefined) {
			const error =
				result ??
				new DurableJobsError('no_result', 'The database returned no result for this item; retry');
			if (!continueOnFail) throw toNodeError(node, error, itemIndex);
			outputs[0].push(errorItem(node, error, itemIndex));
			continue;
		}
		const routed = spec.route(result, itemIndex, inputs[position]);
		outputs[routed.output].push({ json: routed.json, pairedItem: { item: itemIndex } });
	}
	return outputs;
}

/** Webhook node output has this shape; its `body` is what the caller sent. */
export function isWebhookItem(json: IDataObject): boolean {
	return (
		typeof json.headers === 'object' &&
		json.headers !== null &&
		'body' in json &&
		('webhookUrl' in json || 'query' in json || 'params' in json)
	);
}

export function headerValue(json: IDataObject, name: string): string | undefined {
	if (!isWebhookItem(json)) return undefined;
	const headers = json.headers as IDataObject;
	const wanted = name.toLowerCase();
	for (const [key, value] of Object.entries(headers)) {
		if (key.toLowerCase() === wanted)
			return Array.isArray(value)
				? String(value[0])
				: value === undefined || value === null
					? undefined
					: String(value);
	}
	return undefined;
}

/** The payload of an item: a webhook's body, else the whole item JSON. */
export function itemPayload(json: IDataObject): unknown {
	return isWebhookItem(json) ? json.body : json;
}

export function parseJsonParameter(value: unknown, field: string): unknown {
	if (typeof value !== 'string') return value;
	const text = value.trim();
	if (text === '') return undefined;
	try {
		return JSON.parse(text);
	} catch {
		throw invalidInput(
			field,
			'is not valid JSON',
			`Enter valid JSON in ${field}, or use an expression that returns an object`,
		);
	}
}

export function secondsToMs(value: unknown, field: string): number | undefined {
	if (value === undefined || value === null || value === '') return undefined;
	const number = Number(value);
	if (!Number.isFinite(number) || number < 0) {
		throw invalidInput(
			field,
			`must be a number of seconds ≥ 0, got "${String(value).slice(0, 40)}"`,
			`Set ${field} to a number of seconds`,
		);
	}
	return Math.round(number * 1000);
}
