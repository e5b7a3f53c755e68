/**
 * Attempt records (migration 0009). The attempt that is running lives on its job row, in the
 * columns below next to attempt_id and attempts; the lease sets them and the heartbeat adds the
 * n8n ids and the checkpoint. The statement that ends the attempt inserts its record into
 * job_attempt_records from those columns, in the same statement as the job update that moves
 * the job off the attempt. That update is fenced by the attempt id, so each attempt ends, and
 * gets its record, once: a plain INSERT, with no conflict to look for. The one exception is the
 * attempt that makes its job done: it stays on the job row, which nothing changes again, and
 * job_attempts shows it from there (migration 0012).
 */

/** The running attempt's columns on the job row, in the order closeAttemptsSql reads them. */
const RUNNING_ATTEMPT_COLUMNS = [
	'attempt_workflow_id',
	'attempt_execution_id',
	'attempt_started_at',
	'attempt_lease_until',
	'attempt_checkpoint',
	'attempt_checkpoint_at',
] as const;

/** RUNNING_ATTEMPT_COLUMNS of the row alias `alias`, for a RETURNING or SELECT list. */
export function runningAttemptColumns(alias: string): string {
	return RUNNING_ATTEMPT_COLUMNS.map((column) => `${alias}.${column}`).join(', ');
}

/**
 * Ends attempts. `rows` is a SELECT of (attempt_id, job_id, attempt, then the
 * RUNNING_ATTEMPT_COLUMNS, then outcome, error_code, error_message): the attempt as its job row
 * told it before the statement, and how it ended.
 */
export function closeAttemptsSql(s: string, rows: string): string {
	return `INSERT INTO ${s}.job_attempt_records (attempt_id, job_id, attempt, workflow_id, execution_id,
		started_at, lease_until, checkpoint, checkpoint_at, outcome, error_code, error_message, finished_at)
	SELECT c.attempt_id, c.job_id, c.attempt, c.workflow_id, c.execution_id, coalesce(c.started_at, now()),
		c.lease_until, c.checkpoint, c.checkpoint_at, c.outcome, c.error_code, c.error_message, now()
	FROM (${rows}) AS c (attempt_id, job_id, attempt, workflow_id, execution_id, started_at, lease_until,
		checkpoint, checkpoint_at, outcome, error_code, error_message)
	WHERE c.attempt_id IS NOT NULL
	RETURNING 1`;
}
