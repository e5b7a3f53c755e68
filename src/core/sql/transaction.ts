/**
 * Transaction control, sent as plain text (never prepared). Every transaction of the package
 * counts, re-reads and locks as READ COMMITTED does (each statement sees what committed before
 * it started), so it asks for it whatever the database's or role's default is.
 */
export const BEGIN = 'BEGIN ISOLATION LEVEL READ COMMITTED';
export const COMMIT = 'COMMIT';
export const ROLLBACK = 'ROLLBACK';

/** One savepoint name is enough: savepoints are taken one at a time, never nested. */
const SAVEPOINT_NAME = 'durable_jobs_item';
export const SAVEPOINT = `SAVEPOINT ${SAVEPOINT_NAME}`;
export const RELEASE_SAVEPOINT = `RELEASE SAVEPOINT ${SAVEPOINT_NAME}`;
export const ROLLBACK_TO_SAVEPOINT = `ROLLBACK TO SAVEPOINT ${SAVEPOINT_NAME}`;

/** The isolation level a statement outside BEGIN runs at (the connection test checks it). */
export const DEFAULT_ISOLATION_QUERY = {
	text: `SELECT current_setting('default_transaction_isolation') AS isolation`,
	values: [],
};
