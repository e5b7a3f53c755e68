import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { validateUuid, type JobStore } from '../../../../src/core';
import { runBatch } from '../../../shared/batch';
import { lazyStore } from '../../../shared/connection';
import { invalidInput } from '../../../shared/errors';

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
 * are checked per item, so a malformed one names the item that carried it and, with
 * "continue", fails only that item.
 */
export async function runForJobIds<Row extends { id: string }>(
	context: IExecuteFunctions,
	spec: {
		parameter: string;
		call: (store: JobStore, ids: string[]) => Promise<Row[]>;
		json: (row: Row) => IDataObject;
	},
): Promise<INodeExecutionData[][]> {
	const store = lazyStore(context);
	let itemsRead = 0;
	return await runBatch<string[], Row[]>(context, {
		outputs: 1,
		read: (itemIndex) => {
			itemsRead++;
			return idList(context.getNodeParameter(spec.parameter, itemIndex, '')).map((id) =>
				validateUuid(id, 'jobIds'),
			);
		},
		call: async (inputs) => {
			const owner = new Map<string, number>();
			inputs.forEach((ids, position) => {
				for (const id of ids) if (!owner.has(id)) owner.set(id, position);
			});
			const results: Row[][] = inputs.map(() => []);
			if (owner.size === 0) {
				// Items that failed already answer on their own; only a run with no IDs at all is an error.
				if (inputs.length < itemsRead) return results;
				return [
					invalidInput(
						'jobIds',
						'no job IDs given',
						'Map Job IDs to the IDs to handle (comma-separated or an array)',
					),
					...results.slice(1),
				];
			}
			for (const row of await spec.call(await store(), [...owner.keys()]))
				results[owner.get(String(row.id)) ?? 0].push(row);
			return results;
		},
		route: (rows) => rows.map((row) => ({ output: 0, json: spec.json(row) })),
	});
}
