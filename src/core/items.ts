import { DurableJobsError, classifyDatabaseError } from './errors';

/** One entry per input item: the result, or the error that kept that item from being written. */
export type ItemResults<T> = Array<T | DurableJobsError>;

export interface BatchOptions {
	/** Any bad item fails the whole call (its first error is thrown) and nothing is written. */
	allOrNothing?: boolean;
}

export interface ValidatedItems<Row, Result> {
	/** The rows of the valid items, in input order, each knowing its position `ord`. */
	rows: Row[];
	/** One slot per input item; the slots of invalid items already hold their error. */
	results: ItemResults<Result>;
}

/**
 * The one "validate every item into a row or an error" loop of the batch operations. `toRow`
 * returns the item's row, or null when the item needs no row of its own (e.g. a repeat of an
 * earlier item's key, answered from that item's result). A throw records the item's error; with
 * `allOrNothing` the first error is thrown before anything reaches the database.
 */
export function validateItems<Item, Row, Result>(
	items: readonly Item[],
	toRow: (item: Item, ord: number) => Row | null,
	options: BatchOptions = {},
): ValidatedItems<Row, Result> {
	const results: ItemResults<Result> = new Array(items.length);
	const rows: Row[] = [];
	items.forEach((item, ord) => {
		try {
			const row = toRow(item, ord);
			if (row !== null) rows.push(row);
		} catch (error) {
			results[ord] = asItemError(error);
		}
	});
	if (options.allOrNothing) throwFirst(results);
	return { rows, results };
}

export function asItemError(error: unknown): DurableJobsError {
	if (error instanceof DurableJobsError) return error;
	return classifyDatabaseError(error);
}

/** Throws the first error among the results, marked with its item position. */
export function throwFirst<T>(results: ItemResults<T>): void {
	results.forEach((result, position) => {
		if (result instanceof DurableJobsError) {
			result.itemPosition = position;
			throw result;
		}
	});
}

/** The results of returned rows, written into their items' slots by `ord`. */
export function fillResults<R extends { ord: number }, T>(
	results: ItemResults<T>,
	returned: readonly R[],
	toResult: (row: R) => T | DurableJobsError,
): ItemResults<T> {
	for (const row of returned) results[row.ord] = toResult(row);
	return results;
}
