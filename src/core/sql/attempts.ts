/**
 * Writes to an attempt row that the lease has inserted, addressed by its attempt id.
 *
 * They are upserts on the primary key rather than `UPDATE … FROM <CTE>` joins, so that every
 * one goes through the job_attempts_pkey index whatever the planner thinks of the table. A
 * prepared statement keeps the plan it made after its first few runs; made while job_attempts
 * was small (a new installation, or a benchmark's fresh schema), the join read the whole table
 * for every completion, and went on doing so as the table grew, until the next ANALYZE. An
 * INSERT … ON CONFLICT looks each row up through its arbiter index, so that plan cannot
 * happen. The attempt row always exists (the lease inserts it in the statement that starts the
 * attempt, and it is deleted only with its job), so the INSERT branch is never taken in
 * practice; the columns it would fill are the ones the job row can tell.
 */

/**
 * Ends attempts. `rows` is a SELECT of (attempt_id, job_id, attempt, workflow_id,
 * execution_id, outcome, error_code, error_message); a workflow or execution id fills the
 * attempt's only where the lease did not know it. With `onlyOpen`, an attempt that already has
 * an outcome keeps it (a cancel or an expiry that comes after the attempt ended).
 */
export function closeAttemptsSql(s: string, rows: string, options: { onlyOpen: boolean }): string {
	return `INSERT INTO ${s}.job_attempts AS a (attempt_id, job_id, attempt, workflow_id, execution_id, outcome,
		error_code, error_message, finished_at)
	SELECT c.*, now() FROM (${rows}) AS c (attempt_id, job_id, attempt, workflow_id, execution_id, outcome,
		error_code, error_message)
	WHERE c.attempt_id IS NOT NULL
	ON CONFLICT (attempt_id) DO UPDATE SET finished_at = now(),
		workflow_id = coalesce(a.workflow_id, EXCLUDED.workflow_id),
		execution_id = coalesce(a.execution_id, EXCLUDED.execution_id),
		outcome = EXCLUDED.outcome, error_code = EXCLUDED.error_code, error_message = EXCLUDED.error_message
	${options.onlyOpen ? 'WHERE a.outcome IS NULL' : ''}
	RETURNING 1`;
}

/**
 * A heartbeat's checkpoint and the n8n ids its lease did not know. `rows` is a SELECT of
 * (attempt_id, job_id, attempt, checkpoint, workflow_id, execution_id); a row with nothing to
 * record leaves its attempt untouched.
 */
export function recordCheckpointsSql(s: string, rows: string): string {
	return `INSERT INTO ${s}.job_attempts AS a (attempt_id, job_id, attempt, checkpoint, checkpoint_at,
		workflow_id, execution_id)
	SELECT c.attempt_id, c.job_id, c.attempt, c.checkpoint, CASE WHEN c.checkpoint IS NOT NULL THEN now() END,
		c.workflow_id, c.execution_id
	FROM (${rows}) AS c (attempt_id, job_id, attempt, checkpoint, workflow_id, execution_id)
	WHERE c.checkpoint IS NOT NULL OR c.execution_id IS NOT NULL
	ON CONFLICT (attempt_id) DO UPDATE SET
		checkpoint = coalesce(EXCLUDED.checkpoint, a.checkpoint),
		checkpoint_at = CASE WHEN EXCLUDED.checkpoint IS NOT NULL THEN now() ELSE a.checkpoint_at END,
		workflow_id = coalesce(a.workflow_id, EXCLUDED.workflow_id),
		execution_id = coalesce(a.execution_id, EXCLUDED.execution_id)
	WHERE EXCLUDED.checkpoint IS NOT NULL OR (EXCLUDED.execution_id IS NOT NULL AND a.execution_id IS NULL)
	RETURNING 1`;
}
