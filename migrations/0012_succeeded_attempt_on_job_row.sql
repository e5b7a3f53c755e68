-- A job that succeeds keeps its last attempt on its job row; the completion no longer writes a
-- record for it.
--
-- Since 0009 the completion inserted the ended attempt's record (a heap row and two index
-- entries) from the attempt columns of the job row. For a job that ends done those columns
-- never change again: nothing moves a done job back to queued (a requeue takes failed and
-- cancelled jobs only), and a purge deletes the row and its records together. The record
-- repeated what the row keeps, and cost about a seventh of a single completion's server time,
-- a fifth of a completion of 100's, and a sixth of the WAL per job. The completion now writes
-- records for every outcome but success, and
-- job_attempts shows a done job's last attempt from its job row, as it shows a running job's.
--
-- Jobs that an older version completed have that record; so have jobs that an instance still
-- running an older version completes after this migration. The view shows the job row's
-- attempt only when no record of that attempt exists, so each attempt is listed once either
-- way, and older instances keep working next to newer ones. A done row edited by hand shows
-- its last attempt as edited; its started_at falls back to finished_at, then updated_at.
--
-- CREATE OR REPLACE keeps the view's owner and grants (0009 gave it to the owner of
-- job_attempt_records); the columns are the same, in the same order.
CREATE OR REPLACE VIEW {{schema}}.job_attempts AS
SELECT r.attempt_id, r.job_id, r.attempt, r.workflow_id, r.execution_id, r.started_at, r.lease_until,
	r.finished_at, r.outcome, r.error_code, r.error_message, r.checkpoint, r.checkpoint_at
FROM {{schema}}.job_attempt_records r
UNION ALL
SELECT j.attempt_id, j.id, j.attempts, j.attempt_workflow_id, j.attempt_execution_id, j.attempt_started_at,
	j.attempt_lease_until, NULL::timestamptz, NULL::text, NULL::text, NULL::text, j.attempt_checkpoint,
	j.attempt_checkpoint_at
FROM {{schema}}.jobs j
WHERE j.status = 'running'
UNION ALL
SELECT j.attempt_id, j.id, j.attempts, j.attempt_workflow_id, j.attempt_execution_id,
	coalesce(j.attempt_started_at, j.finished_at, j.updated_at), j.attempt_lease_until, j.finished_at, 'succeeded'::text,
	NULL::text, NULL::text, j.attempt_checkpoint, j.attempt_checkpoint_at
FROM {{schema}}.jobs j
WHERE j.status = 'done' AND j.attempt_id IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM {{schema}}.job_attempt_records r WHERE r.attempt_id = j.attempt_id);
