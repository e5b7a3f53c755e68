import { DurableJobsError, classifyDatabaseError } from './errors';
import type { RowStatement, Session } from './executor';
import type { SqlQuery } from './sql/types';

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

/**
 * The whole of a simple batch operation: validate every item into a row or an error, send one
 * statement for the rows, and write each returned row's result into its item's slot.
 *
 * With `sameRowKey`, rows that write the same table row (two items of one job and attempt) do
 * not share a statement: one statement writes a row once and would answer the later item as if
 * it had lost its lease. The rows go in rounds instead, the first item of each key in the
 * first, the second in the next, and so on, one statement per round in one transaction: each
 * item is answered as if the items had been sent one after another, and the call still commits
 * all of its rows or none. A call without repeated keys is one statement, as before.
 */
export async function writeRows<
	Item,
	Row extends { ord: number },
	Returned extends { ord: number },
	Result,
>(
	db: Session,
	items: readonly Item[],
	options: BatchOptions,
	spec: {
		toRow: (item: Item, ord: number) => Row;
		/** See RowStatement: concurrent calls with equal keys may share one statement. */
		key: string;
		build: (rows: Row[]) => SqlQuery;
		coalesce?: boolean;
		sameRowKey?: (row: Row) => string;
		charsOf?: (row: Row) => number;
		toResult: (row: Returned) => Result;
	},
): Promise<ItemResults<Result>> {
	const { rows, results } = validateItems<Item, Row, Result>(items, spec.toRow, options);
	if (rows.length === 0) return results;
	const statement = (session: Session, roundRows: Row[]) =>
		session.runRows<Returned, Row>({
			key: spec.key,
			rows: roundRows,
			build: spec.build,
			coalesce: spec.coalesce,
			sameRowKey: spec.sameRowKey,
			charsOf: spec.charsOf,
		});
	const rounds = spec.sameRowKey ? inRounds(rows, spec.sameRowKey) : [rows];
	if (rounds.length === 1) return fillResults(results, await statement(db, rows), spec.toResult);
	await db.atomically(async (session) => {
		for (const round of rounds)
			fillResults(results, await statement(session, round), spec.toResult);
	});
	return results;
}

/** The sameRowKey of a heartbeat's or a completion's row: the job and attempt it writes. */
export function jobAttemptKey(row: { job_id: string; attempt_id: string }): string {
	return `${row.job_id} ${row.attempt_id}`;
}

/** The rows split so that no round holds two rows of one key, each key's rows in input order. */
function inRounds<Row>(rows: Row[], keyOf: (row: Row) => string): Row[][] {
	const rounds: Row[][] = [];
	const seen = new Map<string, number>();
	for (const row of rows) {
		const key = keyOf(row);
		const round = seen.get(key) ?? 0;
		seen.set(key, round + 1);
		(rounds[round] ??= []).push(row);
	}
	return rounds;
}

/**
 * A batch statement whose snapshot may miss rows another transaction committed meanwhile (an
 * INSERT … ON CONFLICT that lost to a concurrent insert of the same key): the rows it could
 * not resolve are read again by a second statement, which under READ COMMITTED sees the
 * winner, and merged in by `ord`.
 */
export async function runWithReread<Row extends { ord: number }, Returned extends { ord: number }>(
	db: Session,
	statement: RowStatement<Row>,
	reread: {
		unresolved: (row: Returned) => boolean;
		query: (rows: Array<{ returned: Returned; row: Row }>) => SqlQuery;
		merge: (returned: Returned, found: Returned) => void;
	},
): Promise<Returned[]> {
	const returned = await db.runRows<Returned, Row>(statement);
	const missing = returned.filter(reread.unresolved);
	if (missing.length === 0) return returned;
	const byOrd = new Map(statement.rows.map((row) => [row.ord, row]));
	const found = await db.run<Returned>(
		reread.query(missing.map((row) => ({ returned: row, row: byOrd.get(row.ord)! }))),
	);
	const foundByOrd = new Map(found.map((row) => [row.ord, row]));
	for (const row of missing) {
		const match = foundByOrd.get(row.ord);
		if (match) reread.merge(row, match);
	}
	return returned;
}
