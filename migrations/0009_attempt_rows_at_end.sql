-- An attempt's row is written once, when the attempt ends.
--
-- Every lease used to insert an attempt row (a heap tuple and two index entries per job) that
-- the completion then updated: two writes per attempt, about a third of a lease's server time,
-- and the completion's upsert cost as much again. The attempt that is running is now kept on its
-- job row (attempt_started_at, attempt_lease_until, attempt_workflow_id, attempt_execution_id,
-- attempt_checkpoint, attempt_checkpoint_at, next to attempt_id and attempts), which the lease
-- and the heartbeat update anyway. The statement that ends the attempt (complete, cancel, the
-- lease that takes over an expired lease or fails an exhausted job) inserts its record, with its
-- outcome, in the same statement that moves the job off that attempt; that update is fenced by
-- the attempt id, so each attempt is ended, and its record inserted, exactly once.
--
-- The records are in job_attempt_records (the table job_attempts, renamed with its indexes,
-- grants and rows). job_attempts is now a view that shows every attempt as before: the records
-- of ended attempts, and the current attempt of each running job, from its job row. Queries
-- that read job_attempts keep working and see running attempts as they did.
--
-- Attempts that an older version started are running with a record that has no outcome yet:
-- their record moves onto the job row, so that they end like any other attempt. Every n8n
-- instance that uses the schema must run this version or a later one: an older one writes to
-- job_attempts, which is no longer a table.
ALTER TABLE {{schema}}.jobs
	ADD COLUMN attempt_started_at timestamptz,
	ADD COLUMN attempt_lease_until timestamptz,
	ADD COLUMN attempt_workflow_id text,
	ADD COLUMN attempt_execution_id text,
	ADD COLUMN attempt_checkpoint text,
	ADD COLUMN attempt_checkpoint_at timestamptz;

-- NOT VALID: every existing row holds NULL there, and validating would read the whole table
-- under the lock this ALTER takes; new and updated rows are checked all the same.
ALTER TABLE {{schema}}.jobs ADD CONSTRAINT jobs_attempt_checkpoint_length
	CHECK (char_length(attempt_checkpoint) <= 100) NOT VALID;

ALTER TABLE {{schema}}.job_attempts RENAME TO job_attempt_records;

WITH running AS (
	UPDATE {{schema}}.jobs j
	SET attempt_started_at = r.started_at, attempt_lease_until = r.lease_until,
		attempt_workflow_id = r.workflow_id, attempt_execution_id = r.execution_id,
		attempt_checkpoint = r.checkpoint, attempt_checkpoint_at = r.checkpoint_at
	FROM {{schema}}.job_attempt_records r
	WHERE j.status = 'running' AND r.attempt_id = j.attempt_id AND r.outcome IS NULL
	RETURNING r.attempt_id
)
DELETE FROM {{schema}}.job_attempt_records r USING running WHERE r.attempt_id = running.attempt_id;

-- A record without an outcome whose job is not running on it cannot be ended by anyone any
-- more; how it ended is unknown, as after an expired lease.
UPDATE {{schema}}.job_attempt_records SET outcome = 'lease_expired', finished_at = now()
WHERE outcome IS NULL;

-- Records are written once and never updated.
ALTER TABLE {{schema}}.job_attempt_records SET (fillfactor = 100);

CREATE VIEW {{schema}}.job_attempts AS
SELECT r.attempt_id, r.job_id, r.attempt, r.workflow_id, r.execution_id, r.started_at, r.lease_until,
	r.finished_at, r.outcome, r.error_code, r.error_message, r.checkpoint, r.checkpoint_at
FROM {{schema}}.job_attempt_records r
UNION ALL
SELECT j.attempt_id, j.id, j.attempts, j.attempt_workflow_id, j.attempt_execution_id, j.attempt_started_at,
	j.attempt_lease_until, NULL::timestamptz, NULL::text, NULL::text, NULL::text, j.attempt_checkpoint,
	j.attempt_checkpoint_at
FROM {{schema}}.jobs j
WHERE j.status = 'running';

-- The view belongs to the table's owner, and whoever could read the attempts before can read
-- it (a role granted privileges on job_attempts keeps them on the renamed table, where the
-- package's statements write). Renaming the table required owning it (or being a member of
-- its owner, or a superuser), so the migrating role may give the view to that owner.
DO $$
DECLARE
	grantee_name text;
BEGIN
	EXECUTE format('ALTER VIEW {{schema}}.job_attempts OWNER TO %s',
		(SELECT c.relowner::regrole::text FROM pg_class c WHERE c.oid = '{{schema}}.job_attempt_records'::regclass));
	FOR grantee_name IN
		SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END
		FROM pg_class c
		CROSS JOIN LATERAL aclexplode(c.relacl) a
		LEFT JOIN pg_roles r ON r.oid = a.grantee
		WHERE c.oid = '{{schema}}.job_attempt_records'::regclass AND a.privilege_type = 'SELECT'
			AND a.grantee <> c.relowner
	LOOP
		EXECUTE format('GRANT SELECT ON {{schema}}.job_attempts TO %s', grantee_name);
	END LOOP;
END;
$$;

-- The delete trigger of 0008 names its table at run time; it now deletes records.
CREATE OR REPLACE FUNCTION {{schema}}.jobs_delete_attempts() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	EXECUTE format('DELETE FROM %I.job_attempt_records a USING old_rows o WHERE a.job_id = o.id', TG_TABLE_SCHEMA);
	RETURN NULL;
END;
$$;
