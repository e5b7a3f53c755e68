import { DurableJobsError, classifyDatabaseError } from './errors';
import type { RowStatement } from './executor';
import type { SqlQuery } from './sql/types';
import { MAX_CHARS_PER_STATEMENT } from './statementSize';

/** Runs one statement and returns its rows; driver errors are thrown as they are. */
export type SendRows = (query: SqlQuery) => Promise<unknown[]>;

/** What the coalescer of one pool has done since it was created (tests and benchmarks read it). */
export interface CoalescingStats {
	/** Statements sent for coalesced calls (a lone call is a flush of one). */
	flushes: number;
	/** Calls answered through a flush. */
	calls: number;
	/** Flushes that merged more than one call. */
	mergedFlushes: number;
	/** The largest number of calls one flush merged. */
	largestFlush: number;
	/**
	 * Merged flushes that failed in a way a smaller statement may not (an item's data, a
	 * deadlock, a timeout, a statement too large to build) and were run again, one call at a time.
	 */
	splitAfterError: number;
	/**
	 * Flushes that started beside an earlier one of their key, which had run longer than
	 * STALLED_FLUSH_MS while calls waited behind it.
	 */
	stalledFlushes: number;
}

/**
 * A merged flush gathers callers until their rows pass this; a single call larger than it runs
 * alone. It bounds the statement (and the lease's locking limit) a flush can build.
 */
const MAX_ROWS_PER_FLUSH = 2000;

/**
 * SQLSTATE classes of errors an item's data can cause (a value PostgreSQL rejects, a
 * constraint, a value too large, a trigger raising): the merged statement cannot say whose
 * item it was, so each call runs again on its own. Nothing of the failed statement committed:
 * it is one statement in its own implicit transaction, and the server answered with an error.
 * Other errors (connection lost, backend terminated, server shutting down) fail every call of
 * the flush: whether a statement whose connection broke committed is unknown, so it must not run
 * twice.
 */
const ITEM_ERROR_CLASSES = new Set(['22', '23', '54', 'P0']);

/**
 * Errors for which the server aborted the merged statement and a smaller one may well pass:
 * a deadlock or serialization failure (a merged statement locks more rows), a lock or
 * statement timeout, and running out of resources (class 53). Nothing of it committed.
 */
const ABORTED_STATEMENT_CODES = new Set(['40P01', '40001', '55P03', '57014']);

function worthRunningAlone(error: unknown): boolean {
	const code = (error as { code?: unknown } | null)?.code;
	if (typeof code !== 'string' || code.length !== 5) return false;
	return (
		ITEM_ERROR_CLASSES.has(code.slice(0, 2)) ||
		code.startsWith('53') ||
		ABORTED_STATEMENT_CODES.has(code)
	);
}

/**
 * A flush still running after this long (waiting on a row lock, say) no longer holds back the
 * next one: one slow statement must not make every call of its key wait.
 */
const STALLED_FLUSH_MS = 100;

interface Call {
	statement: RowStatement<{ ord: number }>;
	send: SendRows;
	/** The characters of its rows, as statementSize's totalChars counts them. */
	chars: number;
	resolve: (rows: unknown[]) => void;
	reject: (error: unknown) => void;
}

/** A flush that still holds back the next one of its key. */
interface Holding {
	startedAt: number;
	/** Set once a call waits behind it: ends the hold STALLED_FLUSH_MS after its start. */
	stallTimer: NodeJS.Timeout | null;
}

interface Lane {
	waiting: Call[];
	scheduled: boolean;
	/**
	 * The running flush that holds back the next one, until it ends or stalls. There is at most
	 * one: a flush starts only when none holds.
	 */
	holding: Holding | null;
	/** Flushes running, stalled or not. */
	running: number;
	/**
	 * The row keys (RowStatement.sameRowKey) of the flushes running: a call with one of them
	 * waits until that flush has ended, even when the flush stalls.
	 */
	rowKeysInFlight: Set<string>;
}

/**
 * Group commit for the batch statements of one pool. Concurrent calls with the same statement
 * key are gathered into one statement: the first call schedules a flush for the next turn of the
 * event loop (setImmediate, no timer), so calls made in the same turn, and those their
 * callbacks make, join it; while a flush of a key runs, newcomers wait for the next one. Each
 * caller is answered only after the statement that carried its rows has committed, with only
 * its own rows. A lone call waits one event-loop turn and runs its statement unchanged.
 */
export class Coalescer {
	private readonly lanes = new Map<string, Lane>();
	readonly stats: CoalescingStats = {
		flushes: 0,
		calls: 0,
		mergedFlushes: 0,
		largestFlush: 0,
		splitAfterError: 0,
		stalledFlushes: 0,
	};

	/**
	 * `chars`: the characters of the call's rows as statementSize's totalChars counts them (0
	 * for a statement without charsOf); the caller has counted them to decide the call may merge.
	 */
	async run<R>(
		statement: RowStatement<{ ord: number }>,
		send: SendRows,
		chars: number,
	): Promise<R[]> {
		return await new Promise<R[]>((resolve, reject) => {
			let lane = this.lanes.get(statement.key);
			if (!lane) {
				lane = {
					waiting: [],
					scheduled: false,
					holding: null,
					running: 0,
					rowKeysInFlight: new Set(),
				};
				this.lanes.set(statement.key, lane);
			}
			lane.waiting.push({
				statement,
				send,
				chars,
				resolve: resolve as (rows: unknown[]) => void,
				reject,
			});
			this.schedule(statement.key, lane);
		});
	}

	private schedule(key: string, lane: Lane): void {
		if (lane.scheduled || lane.waiting.length === 0) return;
		if (lane.holding) {
			this.watchForStall(key, lane.holding, lane);
			return;
		}
		lane.scheduled = true;
		setImmediate(() => void this.flush(key, lane));
	}

	/**
	 * Lets the waiting calls start the next flush once `holding` has run STALLED_FLUSH_MS. The
	 * timer is set only when a call waits: a lone caller's flush sets none.
	 */
	private watchForStall(key: string, holding: Holding, lane: Lane): void {
		if (holding.stallTimer) return;
		const left = holding.startedAt + STALLED_FLUSH_MS - performance.now();
		holding.stallTimer = setTimeout(
			() => {
				if (lane.holding !== holding) return;
				lane.holding = null;
				this.schedule(key, lane);
			},
			Math.max(0, left),
		);
		holding.stallTimer.unref();
	}

	private async flush(key: string, lane: Lane): Promise<void> {
		lane.scheduled = false;
		let calls: Call[];
		let rowKeys: string[];
		try {
			({ calls, rowKeys } = this.take(lane));
		} catch (error) {
			// Nothing in take is meant to throw; if it does, no caller may be left waiting.
			calls = [];
			rowKeys = [];
			lane.waiting.splice(0, 1)[0]?.reject(classifyDatabaseError(error));
			if (lane.waiting.length > 0) this.schedule(key, lane);
		}
		if (calls.length === 0) {
			// Every call left repeats a row of a flush still running, whose end schedules them.
			if (lane.waiting.length === 0 && lane.running === 0 && this.lanes.get(key) === lane)
				this.lanes.delete(key);
			return;
		}
		if (lane.running > 0) this.stats.stalledFlushes++;
		const holding: Holding = { startedAt: performance.now(), stallTimer: null };
		lane.holding = holding;
		lane.running++;
		for (const rowKey of rowKeys) lane.rowKeysInFlight.add(rowKey);
		try {
			if (lane.waiting.length > 0) this.watchForStall(key, holding, lane);
			this.stats.flushes++;
			this.stats.calls += calls.length;
			this.stats.largestFlush = Math.max(this.stats.largestFlush, calls.length);
			if (calls.length === 1) await runAlone(calls[0]);
			else await this.runMerged(calls);
		} catch (error) {
			// Nothing above is meant to throw; if it does, no caller may be left waiting (a
			// promise settles once, so callers already answered keep their answer).
			for (const call of calls) call.reject(classifyDatabaseError(error));
		} finally {
			if (holding.stallTimer) clearTimeout(holding.stallTimer);
			if (lane.holding === holding) lane.holding = null;
			for (const rowKey of rowKeys) lane.rowKeysInFlight.delete(rowKey);
			lane.running--;
			if (lane.waiting.length > 0) this.schedule(key, lane);
			else if (lane.running === 0 && this.lanes.get(key) === lane) this.lanes.delete(key);
		}
	}

	/**
	 * Takes the calls of one flush out of the waiting ones, in order: up to MAX_ROWS_PER_FLUSH
	 * rows and MAX_CHARS_PER_STATEMENT characters of large values (RowStatement.charsOf), at
	 * least one call. A call with a row key (RowStatement.sameRowKey) of a call taken
	 * before it, of a flush still running (a stalled one), or of a call left waiting before it
	 * stays waiting: it runs after the flush with its row has committed, and is answered as it
	 * would be after that flush; the calls behind it are taken as usual. A call whose row keys
	 * cannot be computed fails at once with that error, which is its alone.
	 */
	private take(lane: Lane): { calls: Call[]; rowKeys: string[] } {
		const taken: Call[] = [];
		const left: Call[] = [];
		const rowKeys: string[] = [];
		const blocked = new Set(lane.rowKeysInFlight);
		let rows = 0;
		let chars = 0;
		for (let index = 0; index < lane.waiting.length; index++) {
			const call = lane.waiting[index];
			const { statement } = call;
			if (
				taken.length > 0 &&
				(rows + statement.rows.length > MAX_ROWS_PER_FLUSH ||
					chars + call.chars > MAX_CHARS_PER_STATEMENT)
			) {
				left.push(...lane.waiting.slice(index));
				break;
			}
			if (statement.sameRowKey) {
				let keys: string[];
				try {
					keys = statement.rows.map(statement.sameRowKey);
				} catch (error) {
					call.reject(classifyDatabaseError(error));
					continue;
				}
				const repeats = keys.some((rowKey) => blocked.has(rowKey));
				for (const rowKey of keys) blocked.add(rowKey);
				if (repeats) {
					left.push(call);
					continue;
				}
				rowKeys.push(...keys);
			}
			taken.push(call);
			rows += statement.rows.length;
			chars += call.chars;
		}
		lane.waiting = left;
		return { calls: taken, rowKeys };
	}

	private async runMerged(calls: Call[]): Promise<void> {
		this.stats.mergedFlushes++;
		const first = calls[0].statement;
		const merged: Array<{ ord: number }> = [];
		/** For each merged row: which call it came from and its `ord` in that call. */
		const owner: number[] = [];
		const ownOrd: number[] = [];
		calls.forEach((call, index) => {
			for (const row of call.statement.rows) {
				owner.push(index);
				ownOrd.push(row.ord);
				merged.push({ ...row, ord: merged.length });
			}
		});
		let query: SqlQuery;
		try {
			query = first.build(merged);
		} catch {
			// Too large to build as one (a string past V8's limit, say): each call alone may fit.
			this.stats.splitAfterError++;
			await Promise.all(calls.map(runAlone));
			return;
		}
		let returned: unknown[];
		try {
			returned = await calls[0].send(query);
		} catch (error) {
			if (worthRunningAlone(error)) {
				this.stats.splitAfterError++;
				await Promise.all(calls.map(runAlone));
			} else {
				for (const call of calls) call.reject(classifyDatabaseError(error));
			}
			return;
		}
		if (first.returns === 'shared') {
			for (const call of calls) call.resolve(returned);
			return;
		}
		const byCall: unknown[][] = calls.map(() => []);
		for (const row of returned as Array<{ ord?: number }>) {
			const index = owner[row.ord ?? -1];
			if (index === undefined) {
				// Committed, but a row names no input row: no caller can be told what it got.
				const error = new DurableJobsError(
					'database_error',
					'A merged statement returned a row that belongs to no call',
				);
				for (const call of calls) call.reject(error);
				return;
			}
			row.ord = ownOrd[row.ord!];
			byCall[index].push(row);
		}
		calls.forEach((call, index) => call.resolve(byCall[index]));
	}
}

async function runAlone(call: Call): Promise<void> {
	try {
		call.resolve(await call.send(call.statement.build(call.statement.rows)));
	} catch (error) {
		call.reject(classifyDatabaseError(error));
	}
}
