import { createHash } from 'node:crypto';
import type pg from 'pg';

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
 * This is the seam for call coalescing: statements with the same `key` build the same text for
 * any rows, so concurrent calls of one process could be merged into one statement (rows
 * renumbered, one round trip and one commit) and the returned rows handed back to each caller
 * by `ord` (or by id, for statements that return the client-generated job ids). The concern
 * modules only build statements and read the rows they get back; where the statement runs is
 * the executor's business.
 */
export interface RowStatement<Row extends { ord: number }> {
	key: string;
	rows: Row[];
	build: (rows: Row[]) => SqlQuery;
}

/** Where the concern modules send statements: the pool, or one open transaction. */
export interface Session {
	run<R>(query: SqlQuery): Promise<R[]>;
	runRows<R, Row extends { ord: number }>(statement: RowStatement<Row>): Promise<R[]>;
	/** Rows and the affected-row count (for DELETEs and user SQL). */
	result<R>(query: SqlQuery): Promise<SqlResult<R>>;
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
	constructor(readonly preparedStatements: boolean) {}

	protected abstract target(): pg.Pool | pg.PoolClient;

	async run<R>(query: SqlQuery): Promise<R[]> {
		return (await this.result<R>(query)).rows;
	}

	async runRows<R, Row extends { ord: number }>(statement: RowStatement<Row>): Promise<R[]> {
		return await this.run<R>(statement.build(statement.rows));
	}

	/** Every driver error leaves as a classified DurableJobsError. */
	async result<R>(query: SqlQuery): Promise<SqlResult<R>> {
		try {
			const config: pg.QueryConfig =
				query.prepare && this.preparedStatements
					? { name: statementName(query.text), text: query.text, values: query.values }
					: { text: query.text, values: query.values };
			const result = await this.target().query(config);
			return { rows: result.rows as R[], rowCount: result.rowCount };
		} catch (error) {
			throw classifyDatabaseError(error);
		}
	}
}

class ClientTransaction extends Sender implements Transaction {
	constructor(
		private readonly client: pg.PoolClient,
		preparedStatements: boolean,
	) {
		super(preparedStatements);
	}

	protected target(): pg.PoolClient {
		return this.client;
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
	constructor(
		readonly pool: pg.Pool,
		preparedStatements = true,
	) {
		super(preparedStatements);
	}

	protected target(): pg.Pool {
		return this.pool;
	}

	/** BEGIN, `work`, COMMIT on one client; any error rolls back and is rethrown classified. */
	async transaction<T>(work: (tx: Transaction) => Promise<T>): Promise<T> {
		let client: pg.PoolClient;
		try {
			client = await this.pool.connect();
		} catch (error) {
			throw classifyDatabaseError(error);
		}
		try {
			await client.query(BEGIN);
			const value = await work(new ClientTransaction(client, this.preparedStatements));
			await client.query(COMMIT);
			return value;
		} catch (error) {
			await client.query(ROLLBACK).catch(() => undefined);
			throw classifyDatabaseError(error);
		} finally {
			client.release();
		}
	}

	/** Ends the pool; only for pools opened for one task (the connection test). */
	async close(): Promise<void> {
		await this.pool.end().catch(() => undefined);
	}
}
