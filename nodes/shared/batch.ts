import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import {
	COUNT_LIMITS,
	DURATION_LIMITS_MS,
	DurableJobsError,
	integerInRange,
	type ItemResults,
	type JobStore,
} from '../../src/core';
import { lazyStore, type NodeStoreOptions } from './connection';
import { leaseSecondsField } from './descriptions';
import { asDurableError, errorItem, invalidInput, toNodeError } from './errors';

export interface Routed {
	output: number;
	json: IDataObject;
}

export interface BatchSpec<TInput, TResult> {
	outputs: number;
	/**
	 * 'each' (default): every item is read, and the core is called once for all of them.
	 * 'first': the operation runs once per execution with the first item's parameters (a lease,
	 * queue stats, a purge …); its output items are paired with item 0.
	 */
	items?: 'each' | 'first';
	read: (itemIndex: number, item: INodeExecutionData) => TInput;
	call: (inputs: TInput[], allOrNothing: boolean) => Promise<ItemResults<TResult>>;
	/** The output item(s) of one result: one, several (a list the core returned), or none. */
	route: (result: TResult, itemIndex: number, input: TInput) => Routed | Routed[];
	/**
	 * The output a failed item goes to with On Error → Continue (regular output); default 0.
	 * A node whose first output means "go on" (Extended, Completed, New) names the output that
	 * stops the work instead, so a failure never looks like a lease kept or a key claimed. With
	 * Continue (using error output) n8n takes failed items from every output, so this one too.
	 */
	errorOutput?: number;
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
	spec: BatchSpec<TInput, TResult>,
): Promise<INodeExecutionData[][]> {
	const node = context.getNode();
	const items = context.getInputData();
	const continueOnFail = context.continueOnFail();
	const outputs: INodeExecutionData[][] = Array.from({ length: spec.outputs }, () => []);
	const failed = outputs[spec.errorOutput ?? 0];
	const inputs: TInput[] = [];
	const inputItemIndexes: number[] = [];
	const readCount = spec.items === 'first' ? Math.min(items.length, 1) : items.length;

	for (let itemIndex = 0; itemIndex < readCount; itemIndex++) {
		try {
			inputs.push(spec.read(itemIndex, items[itemIndex]));
			inputItemIndexes.push(itemIndex);
		} catch (error) {
			if (!continueOnFail) throw toNodeError(node, error, itemIndex);
			failed.push(errorItem(node, error, itemIndex));
		}
	}
	if (inputs.length === 0) return outputs;

	let results: ItemResults<TResult>;
	try {
		results = await spec.call(inputs, !continueOnFail);
	} catch (error) {
		const position =
			error instanceof DurableJobsError && error.itemPosition !== undefined
				? error.itemPosition
				: spec.items === 'first'
					? 0
					: undefined;
		const itemIndex = position === undefined ? undefined : inputItemIndexes[position];
		if (!continueOnFail) throw toNodeError(node, error, itemIndex);
		for (const index of inputItemIndexes) failed.push(errorItem(node, error, index));
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
			failed.push(errorItem(node, error, itemIndex));
			continue;
		}
		const routed = spec.route(result, itemIndex, inputs[position]);
		for (const entry of Array.isArray(routed) ? routed : [routed])
			outputs[entry.output].push({ json: entry.json, pairedItem: { item: itemIndex } });
	}
	return outputs;
}

/**
 * runBatch for an operation that runs once per execution, with the first item's parameters:
 * one core call (the store opened on first use), its result routed to any number of output
 * items paired with item 0.
 */
export async function runOnce<TInput, TResult>(
	context: IExecuteFunctions,
	spec: {
		outputs: number;
		read: (item: INodeExecutionData) => TInput;
		call: (store: JobStore, input: TInput) => Promise<TResult>;
		route: (result: TResult, input: TInput) => Routed | Routed[];
		/** See BatchSpec.errorOutput. */
		errorOutput?: number;
	},
): Promise<INodeExecutionData[][]> {
	const store = lazyStore(context);
	return await runBatch<TInput, TResult>(context, {
		outputs: spec.outputs,
		errorOutput: spec.errorOutput,
		items: 'first',
		read: (_itemIndex, item) => spec.read(item),
		call: async ([input]) => [await spec.call(await store(), input)],
		route: (result, _itemIndex, input) => spec.route(result, input),
	});
}

/**
 * runBatch for an operation the core answers one item at a time (each webhook request the
 * jobs dashboard sends is one item): every item is read first, then each gets its own call, in
 * item order, and one output item. A failing call fails its item only (with "continue"); without
 * "continue" the node stops at the first failure and calls no later item. The store is opened
 * only when a call asks for it.
 */
export async function runEach<TInput, TResult>(
	context: IExecuteFunctions,
	spec: {
		read: (itemIndex: number, item: INodeExecutionData) => TInput;
		call: (input: TInput, store: () => Promise<JobStore>) => Promise<TResult>;
		/** The output item's JSON; default: the core's answer as it is (plain JSON data). */
		json?: (result: TResult, input: TInput) => object;
		/** The store the calls use (default: the node's credential, opened on first use). */
		store?: () => Promise<JobStore>;
	},
): Promise<INodeExecutionData[][]> {
	const store = spec.store ?? lazyStore(context);
	return await runBatch<TInput, TResult>(context, {
		outputs: 1,
		read: spec.read,
		call: async (inputs, allOrNothing) => {
			const results: ItemResults<TResult> = [];
			for (const input of inputs) {
				try {
					results.push(await spec.call(input, store));
				} catch (error) {
					results.push(asDurableError(error));
					// runBatch stops at this error, so the items after it are never called.
					if (allOrNothing) break;
				}
			}
			return results;
		},
		route: (result, _itemIndex, input) => ({
			output: 0,
			json: (spec.json ? spec.json(result, input) : result) as IDataObject,
		}),
	});
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

/**
 * An optional number parameter: undefined when it is empty (an expression that gives nothing),
 * else a finite number from `min` to `max` (no upper bound without one), or an error naming the
 * field and the fix.
 */
export function optionalNumber(
	value: unknown,
	field: string,
	rule: { min: number; max?: number; expected: string; fix: string },
): number | undefined {
	if (value === undefined || value === null || value === '') return undefined;
	const number = Number(value);
	if (
		!Number.isFinite(number) ||
		number < rule.min ||
		(rule.max !== undefined && number > rule.max)
	) {
		throw invalidInput(
			field,
			`must be ${rule.expected}, got "${String(value).slice(0, 40)}"`,
			rule.fix,
		);
	}
	return number;
}

/**
 * An execution-wide size limit in KB from the first item's Options (Job Enqueue's *Max Payload
 * Size (KB)*, Job Complete's *Max Result Size (KB)*), as the store options that apply it and name
 * it in the too-large fix: unset, or an expression giving nothing, is `defaultKb`. A bad value
 * stops the node (item 0) without "continue"; with it, `refusal` is the error every item then
 * fails with. The option is read alone: reading the whole collection would evaluate every
 * expression it holds once more (docs/PERFORMANCE.md, fourteenth part).
 */
export function sizeLimitOption(
	context: IExecuteFunctions,
	option: string,
	displayName: string,
	defaultKb: number,
): { storeOptions: NodeStoreOptions; refusal?: unknown } {
	const storeOptions = (kb: number): NodeStoreOptions => ({
		maxPayloadBytes: Math.round(kb * 1024),
		payloadLimitSetting: `${displayName} in Options (now ${kb})`,
	});
	try {
		const kb = optionalNumber(context.getNodeParameter(`options.${option}`, 0, null), displayName, {
			min: 1,
			expected: 'a number of at least 1',
			fix: `Set ${displayName} to 1 or more, or remove it for the default ${defaultKb}`,
		});
		return { storeOptions: storeOptions(kb ?? defaultKb) };
	} catch (error) {
		if (!context.continueOnFail()) throw toNodeError(context.getNode(), error, 0);
		return { storeOptions: storeOptions(defaultKb), refusal: error };
	}
}

/**
 * A whole-number parameter, checked under its display name before the core sees it: empty (an
 * expression that gives nothing) is `emptyIs`, the field's own default, and anything but a whole
 * number in `range` stops the node naming the field.
 */
export function wholeNumberParameter(
	value: unknown,
	field: string,
	range: { readonly min: number; readonly max: number },
	emptyIs: number,
): number {
	return integerInRange(value, field, range.min, range.max, emptyIs);
}

/**
 * *Concurrency Limit* (Job Lease, Job Trigger): null for no limit (0, or empty). Anything that is
 * not a whole number is refused: read as "no limit" it would silently lift the cap it was set to
 * keep.
 */
export function concurrencyLimitParameter(value: unknown): number | null {
	const limit = wholeNumberParameter(
		value,
		'Concurrency Limit',
		{ min: 0, max: COUNT_LIMITS.concurrency.max },
		0,
	);
	return limit === 0 ? null : limit;
}

const UNIT_MS = { seconds: 1000, hours: 3_600_000, days: 86_400_000 } as const;

/**
 * A duration parameter given in `unit`, as whole milliseconds; undefined when empty. With
 * `limits` (the core's accepted range, in ms) a value outside it is refused in the parameter's
 * own terms (its name, its unit) before the core would refuse it in milliseconds.
 */
export function durationMs(
	value: unknown,
	field: string,
	unit: keyof typeof UNIT_MS,
	limits?: { min: number; max: number },
): number | undefined {
	const factor = UNIT_MS[unit];
	const min = limits ? limits.min / factor : 0;
	const max = limits ? limits.max / factor : undefined;
	const range = max === undefined ? `≥ ${min}` : `from ${min} to ${max}`;
	const amount = optionalNumber(value, field, {
		min,
		max,
		expected: `a number of ${unit} ${range}`,
		fix: `Set ${field} to a number of ${unit} ${range}`,
	});
	return amount === undefined ? undefined : Math.round(amount * factor);
}

export function secondsToMs(
	value: unknown,
	field: string,
	limits?: { min: number; max: number },
): number | undefined {
	return durationMs(value, field, 'seconds', limits);
}

/** *Lease Seconds* (Job Lease, Extend Lease), as ms; empty is the field's default. */
export function leaseSecondsToMs(value: unknown): number {
	return (
		secondsToMs(value, 'Lease Seconds', DURATION_LIMITS_MS.lease) ??
		(leaseSecondsField.default as number) * 1000
	);
}
