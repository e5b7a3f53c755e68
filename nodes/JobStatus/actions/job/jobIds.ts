import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { validateUuid, type JobStore } from '../../../../src/core';
import { runBatch } from '../../../shared/batch';
import { lazyStore } from '../../../shared/connection';
import { invalidInput, toNodeError } from '../../../shared/errors';

/** IDs from a parameter: comma-separated text, or an array an expression returned. */
export function idList(value: unknown): string[] {
	if (value === undefined || value === null || value === '') return [];
	if (Array.isArray(value)) return value.map((entry) => String(entry).trim()).filter(Boolean);
	return String(value)
		.split(',')
		.map((entry) => entry.trim())
		.filter(Boolean);
}

/**
 * Cancel and Requeue by ID: the IDs of all items are handled in one statement, and each row it
 * returns is paired with the item that named its job (the first one, when several did). IDs
 * are checked per item, so a malformed or missing one names the item that carried it and, with
 * "continue", fails only that item. `settings` reads the parameters that hold for the whole
 * statement (from the first item) before any item: when it fails, the node stops naming item 0,
 * or with "continue" every item fails with its error.
 */
export async function runForJobIds<Row extends { id: string }, Settings>(
	context: IExecuteFunctions,
	spec: {
		parameter: string;
		settings: () => Settings;
		call: (store: JobStore, ids: string[], settings: Settings) => Promise<Row[]>;
		json: (row: Row) => IDataObject;
	},
): Promise<INodeExecutionData[][]> {
	const store = lazyStore(context);
	let settings: Settings | undefined;
	let refusal: unknown;
	try {
		settings = spec.settings();
	} catch (error) {
		if (!context.continueOnFail()) throw toNodeError(context.getNode(), error, 0);
		refusal = error;
	}
	return await runBatch<string[], Row[]>(context, {
		outputs: 1,
		read: (itemIndex) => {
			if (refusal !== undefined) throw refusal;
			const ids = idList(context.getNodeParameter(spec.parameter, itemIndex, '')).map((id) =>
				validateUuid(id, 'jobIds'),
			);
			if (ids.length === 0) {
				throw invalidInput(
					'jobIds',
					'no job IDs given',
					'Map Job IDs to the IDs to handle (comma-separated or an array), or leave out the items that name none',
				);
			}
			return ids;
		},
		call: async (inputs) => {
			const owner = new Map<string, number>();
			inputs.forEach((ids, position) => {
				for (const id of ids) if (!owner.has(id)) owner.set(id, position);
			});
			const results: Row[][] = inputs.map(() => []);
			for (const row of await spec.call(await store(), [...owner.keys()], settings as Settings))
				results[owner.get(String(row.id)) ?? 0].push(row);
			return results;
		},
		route: (rows) => rows.map((row) => ({ output: 0, json: spec.json(row) })),
	});
}
