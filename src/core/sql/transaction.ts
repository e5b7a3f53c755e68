/** Transaction control, sent as plain text (never prepared). */
export const BEGIN = 'BEGIN';
export const COMMIT = 'COMMIT';
export const ROLLBACK = 'ROLLBACK';

/** One savepoint name is enough: savepoints are taken one at a time, never nested. */
const SAVEPOINT_NAME = 'durable_jobs_item';
export const SAVEPOINT = `SAVEPOINT ${SAVEPOINT_NAME}`;
export const RELEASE_SAVEPOINT = `RELEASE SAVEPOINT ${SAVEPOINT_NAME}`;
export const ROLLBACK_TO_SAVEPOINT = `ROLLBACK TO SAVEPOINT ${SAVEPOINT_NAME}`;
