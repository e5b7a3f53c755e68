import { createHash } from 'node:crypto';
import type pg from 'pg';

import { Coalescer, type CoalescingStats } from './coalescer';
import { classifyDatabaseError } from './errors';
import {
	BEGIN,
	COMMIT,
	RELEASE_SAVEPOINT,
	ROLLBACK,
	ROLLBACK_TO_SAVEPOINT,
	SAVEPOINT,
} from './sql/transaction';
import type { SqlQuery } from './sql/types';
import { MAX_CHARS_PER_STATEMENT, inChunks, totalChars } from './statementSize';
import { RESULT_TYPES } from './timestamps';

/** One coalescer per pool: every store (and node execution) of a process over it shares it. */
const coalescers = new WeakMap<pg.Pool, Coalescer>();

function coalescerOf(pool: pg.Pool): Coalescer {
	let coalescer = coalescers.get(pool);
	if (!coalescer) {
		coalescer = new Coalescer();
		coalescers.set(pool, coalescer);
	}
	return coalescer;
}

/**
 * A call with more rows than this already shares its statement among its own rows; merged
 * with others it would only give up the parallelism of separate connections (measured: batch
 * drains of 100 ran 5–15% slower merged).
 */
const MAX_ROWS_TO_MERGE = 32;

/** Prepared statement names by statement text (the text includes the schema). */
const statementNames = new Map<string, string>();
const MAX_STATEMENT_NAMES = 500;

/** The name of a prepared statement: a hash of its text, so equal texts share a name and different texts never do. */
export function statementName(text: string): string {
	let name = statementNames.get(text);
	if (name === undefined) {
		name = `dj_${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
		if (statementNames.size >= MAX_STATEMENT_NAMES) statementNames.clear();
		statementNames.set(text, name);
	}
	return name;
}

export interface SqlResult<R> {
	rows: R[];
	rowCount: number | null;
}

/**
 * One batch statement: validated rows, each carrying its position `ord` in its caller's batch,
 * and how to build the statement for any list of such rows.
 *
 * Statements with the same `key` build equivalent statements for any rows, so the executor
 * merges concurrent calls on the pool into one statement (see Coalescer): the rows are
 * renumbered, run in one round trip and one commit, and the returned rows are handed back to
 * each caller with its own `ord` (or, for statements whose rows describe the statement rather
 * than single input rows, all of them to every caller). Everything a statement depends on
 * besides its rows (schema, queue, callback queue) must be part of the key.
 */
export interface RowStatement<Row extends { ord: number }> {
	key: string;
	rows: Row[];
	build: (rows: Row[]) => SqlQuery;
	/**
	 * How returned rows are handed back: by the `ord` of the input row each names (default), or
	 * `shared`: every caller gets every row, e.g. values keyed by something the callers can
	 * look up themselves. Rows shared this way must not be changed by a caller.
	 */
	returns?: 'ord' | 'shared';
	/**
	 * Whether concurrent calls may share the statement. Only for statements whose rows of
	 * different calls cannot make each other fail: an INSERT … ON CONFLICT DO UPDATE (the
	 * idempotency claim) fails outright when two of its rows hit one key.
	 */
	coalesce?: boolean;
	/**
	 * Rows with equal keys write the same row of the table (the same job and attempt, the same
	 * idempotency key). One
	 * statement writes a row once, so such rows must not share one: a flush does not merge a
	 * call with a row whose key is already in it, and the call runs in the next flush, after
	 * this one has committed, as it would alone (see writeRows for rows of one call).
	 */
	sameRowKey?: (row: Row) => string;
	/**
	 * The characters of the row's large values (a payload, a result). Rows that together pass
	 * MAX_CHARS_PER_STATEMENT go as several statements in one transaction (as part of the open
	 * one in a transaction), in input order, so the call still commits all of its rows or none.
	 * Only for statements whose rows are independent of each other: a later statement sees the
	 * rows of the earlier ones as committed by another statement of the same transaction.
	 */
	charsOf?: (row: Row) => number;
}

/** Where the concern modules send statements: the pool, or one open transaction. */
export interface Session {
	run<R>(query: SqlQuery): Promise<R[]>;
	runRows<R, Row extends { ord: number }>(statement: RowStatement<Row>): Promise<R[]>;
	/** Rows and the affected-row count (for DELETEs and user SQL). */
	result<R>(query: SqlQuery): Promise<SqlResult<R>>;
	/**
	 * Runs `work` so that its statements commit together or not at all: in a transaction of
	 * its own on the pool, as part of the open one in a transaction.
	 */
	atomically<T>(work: (session: Session) => Promise<T>): Promise<T>;
}

export interface Transaction extends Session {
	/**
	 * Runs `work` inside a savepoint: when it throws, only what it did is undone and the
	 * transaction goes on; the error is rethrown for the caller to record.
	 */
	savepoint<T>(work: () => Promise<T>): Promise<T>;
}

/** Sends statements to one target (the pool, or the client of an open transaction). */
abstract class Sender implements Session {
	constructor(
		readonly preparedStatements: boolean,
		/** Result parsers passed with each statement; undefined: the pool's own. */
		protected readonly resultTypes: pg.CustomTypesConfig | undefined,
	) {}

	protected abstract target(): pg.Pool | pg.PoolClient;

	abstract atomically<T>(work: (session: Session) => Promise<T>): Promise<T>;

	async run<R>(query: SqlQuery): Promise<R[]> {
		return (await this.result<R>(query)).rows;
	}

	async runRows<R, Row extends { ord: number }>(statement: RowStatement<Row>): Promise<R[]> {
		const chunks = statement.charsOf ? inChunks(statement.rows, statement.charsOf) : null;
		if (!chunks || chunks.length === 1) return await this.run<R>(statement.build(statement.rows));
		return await this.atomically(async (session) => {
			const returned: R[] = [];
			for (const chunk of chunks)
				for (const row of await session.run<R>(statement.build(chunk))) returned.push(row);
			return returned;
		});
	}

	/** Every driver error leaves as a classified DurableJobsError. */
	async result<R>(query: SqlQuery): Promise<SqlResult<R>> {
		try {
			const result = await this.send(query);
			return { rows: result.rows as R[], rowCount: result.rowCount };
		} catch (error) {
			throw classifyDatabaseError(error);
		}
	}

	/** Runs one statement; driver errors are thrown unclassified. */
	protected async send(query: SqlQuery): Promise<pg.QueryResult> {
		const config: pg.QueryConfig = { text: query.text, values: query.values };
		if (this.resultTypes) config.types = this.resultTypes;
		if (query.prepare && this.preparedStatements) config.name = statementName(query.text);
		// pg's option, missing from its type definitions.
		if (query.oneStatement) Object.assign(config, { queryMode: 'extended' });
		return await this.target().query(config);
	}
}

class ClientTransaction extends Sender implements Transaction {
	constructor(
		private readonly client: pg.PoolClient,
		preparedStatements: boolean,
		resultTypes: pg.CustomTypesConfig | undefined,
	) {
		super(preparedStatements, resultTypes);
	}

	protected target(): pg.PoolClient {
		return this.client;
	}

	async atomically<T>(work: (session: Session) => Promise<T>): Promise<T> {
		return await work(this);
	}

	async savepoint<T>(work: () => Promise<T>): Promise<T> {
		await this.client.query(SAVEPOINT);
		try {
			const value = await work();
			await this.client.query(RELEASE_SAVEPOINT);
			return value;
		} catch (error) {
			await this.client.query(ROLLBACK_TO_SAVEPOINT);
			throw error;
		}
	}
}

/**
 * The only code that talks to `pg`: runs statements on the pool (named prepared statements when
 * the query allows it and the store has them on), runs transactions on one pooled client, and
 * classifies every driver error.
 */
export class Executor extends Sender {
	private readonly coalescer: Coalescer | null;

	constructor(
		readonly pool: pg.Pool,
		preparedStatements = true,
		/** Merge concurrent batch statements of this pool into one (see Coalescer). */
		coalesce = true,
	) {
		// A pool created with parsers of its own (`types`) keeps them: a query's `types` would
		// replace them all, not only the timestamptz parser.
		super(
			preparedStatements,
			(pool.options as { types?: unknown }).types ? undefined : RESULT_TYPES,
		);
		this.coalescer = coalesce ? coalescerOf(pool) : null;
	}

	protected target(): pg.Pool {
		return this.pool;
	}

	async atomically<T>(work: (session: Session) => Promise<T>): Promise<T> {
		return await this.transaction(work);
	}

	/**
	 * On the pool, concurrent batch statements with the same key are merged into one statement
	 * and one commit; each caller gets its own rows once that statement has committed.
	 */
	override async runRows<R, Row extends { ord: number }>(
		statement: RowStatement<Row>,
	): Promise<R[]> {
		if (
			this.coalescer === null ||
			!statement.coalesce ||
			statement.rows.length === 0 ||
			statement.rows.length > MAX_ROWS_TO_MERGE
		)
			return await super.runRows<R, Row>(statement);
		const chars = statement.charsOf ? totalChars(statement.rows, statement.charsOf) : 0;
		if (chars > MAX_CHARS_PER_STATEMENT) return await super.runRows<R, Row>(statement);
		return await this.coalescer.run<R>(
			{
				...(statement as unknown as RowStatement<{ ord: number }>),
				// Calls of stores with and without prepared statements are sent differently.
				key: `${this.preparedStatements ? 'p' : 'u'}:${statement.key}`,
			},
			async (query) => (await this.send(query)).rows,
			chars,
		);
	}

	/** What the coalescer of this executor's pool has done (null when coalescing is off). */
	coalescingStats(): CoalescingStats | null {
		return this.coalescer ? { ...this.coalescer.stats } : null;
	}

	/** BEGIN, `work`, COMMIT on one client; any error rolls back and is rethrown classified. */
	async transaction<T>(work: (tx: Transaction) => Promise<T>): Promise<T> {
		let client: pg.PoolClient;
		try {
			client = await this.pool.connect();
		} catch (error) {
			throw classifyDatabaseError(error);
		}
		// pg-pool stops listening to a client's 'error' event while the client is checked out,
		// and node-postgres emits a lost connection as one: with no listener it would be thrown
		// from the socket's handler and end the process (n8n with it). The statement in flight
		// fails on its own; the listener only keeps the loss from being thrown.
		let lost: Error | undefined;
		const onError = (error: Error) => {
			lost = error;
		};
		client.on('error', onError);
		let broken: Error | undefined;
		try {
			await client.query(BEGIN);
			const value = await work(
				new ClientTransaction(client, this.preparedStatements, this.resultTypes),
			);
			await client.query(COMMIT);
			return value;
		} catch (error) {
			await client.query(ROLLBACK).catch((rollbackError: unknown) => {
				broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
			});
			throw classifyDatabaseError(error);
		} finally {
			client.removeListener('error', onError);
			// A client whose connection was lost, or whose ROLLBACK failed (it may still be inside
			// the transaction), is closed instead of going back to the pool.
			client.release(lost ?? broken);
		}
	}

	/** Ends the pool; only for pools opened for one task (the connection test). */
	async close(): Promise<void> {
		await this.pool.end().catch(() => undefined);
	}
}
