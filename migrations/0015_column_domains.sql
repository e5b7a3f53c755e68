-- Four of the six conditions on the columns of jobs are domains instead of CHECK constraints
-- of the table, and the status condition is a comparison with an array constant.
--
-- PostgreSQL checks every CHECK constraint of a table on every row that an UPDATE writes,
-- whichever columns the UPDATE sets, and builds the constraints' expressions anew from the
-- catalog in every statement that writes the table. A lease, a heartbeat or a completion of one
-- job paid 10-12 µs for the six of jobs, 7-9% of its time on the server. A domain's condition
-- is checked only where a value is given to the column (an INSERT, an UPDATE that sets that
-- column), and the backend keeps its expression ready between statements: in
-- bench/write-costs.ts the six as domains cost 0-1 µs per statement.
--
-- attempts, max_attempts, error_class and attempt_checkpoint become domains. status and
-- idempotency_key keep CHECK constraints: the predicates of the partial indexes of jobs read
-- them, and changing their type would build those indexes again under this migration's lock
-- (seconds per million rows). status IN (...) is written = ANY ('{...}'::text[]): the list of IN
-- is folded into an array again in every statement, the constant is not (about 3 µs against 7).
--
-- The domains are created without their conditions, so that changing the columns' types keeps
-- every row and every index as it is (each domain is over the column's own type): no table
-- rewrite, no index build. The conditions, and the new status constraint, are then added NOT
-- VALID, which skips reading the table under the lock: every existing row passed the same
-- conditions as the old constraints, which this transaction drops, and every new or changed
-- value is checked. The conditions and their names are the same, and a violation is the same
-- error (SQLSTATE 23514, check_violation), naming the domain where there is one.
--
-- The view job_attempts reads two of the columns, and a column that a view reads cannot change
-- its type. CREATE OR REPLACE VIEW swaps its definition for one that does not read them, and
-- then back to the one of 0012, so the view keeps its owner and grants (DROP VIEW would lose
-- them). Its columns keep their types: a domain meets its base type in a UNION as that type.
-- A view of these columns made by someone else stops the migration with PostgreSQL's error
-- naming it: drop it, migrate, and create it again.
CREATE DOMAIN {{schema}}.job_attempt_count AS integer;
CREATE DOMAIN {{schema}}.job_max_attempts AS integer;
CREATE DOMAIN {{schema}}.job_error_class AS text;
CREATE DOMAIN {{schema}}.job_checkpoint AS text;

CREATE OR REPLACE VIEW {{schema}}.job_attempts AS
SELECT r.attempt_id, r.job_id, r.attempt, r.workflow_id, r.execution_id, r.started_at, r.lease_until,
	r.finished_at, r.outcome, r.error_code, r.error_message, r.checkpoint, r.checkpoint_at
FROM {{schema}}.job_attempt_records r;

ALTER TABLE {{schema}}.jobs
	ALTER COLUMN attempts TYPE {{schema}}.job_attempt_count,
	ALTER COLUMN max_attempts TYPE {{schema}}.job_max_attempts,
	ALTER COLUMN error_class TYPE {{schema}}.job_error_class,
	ALTER COLUMN attempt_checkpoint TYPE {{schema}}.job_checkpoint,
	DROP CONSTRAINT jobs_attempts_check,
	DROP CONSTRAINT jobs_max_attempts_check,
	DROP CONSTRAINT jobs_error_class_check,
	DROP CONSTRAINT jobs_attempt_checkpoint_length,
	DROP CONSTRAINT jobs_status_check;

ALTER TABLE {{schema}}.jobs ADD CONSTRAINT jobs_status_check
	CHECK (status = ANY ('{queued,running,done,failed,cancelled}'::text[])) NOT VALID;
ALTER DOMAIN {{schema}}.job_attempt_count ADD CONSTRAINT jobs_attempts_check
	CHECK (VALUE >= 0) NOT VALID;
ALTER DOMAIN {{schema}}.job_max_attempts ADD CONSTRAINT jobs_max_attempts_check
	CHECK (VALUE >= 1) NOT VALID;
ALTER DOMAIN {{schema}}.job_error_class ADD CONSTRAINT jobs_error_class_check
	CHECK (VALUE IN ('retryable', 'needs_mapping', 'needs_manual_review', 'discarded')) NOT VALID;
ALTER DOMAIN {{schema}}.job_checkpoint ADD CONSTRAINT jobs_attempt_checkpoint_length
	CHECK (char_length(VALUE) <= 100) NOT VALID;

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

-- Changing a column's type drops its statistics; the planner would estimate filters on these
-- columns (requeue by error class, say) from defaults until autovacuum analyzed the table.
ANALYZE {{schema}}.jobs (attempts, max_attempts, error_class, attempt_checkpoint);
