-- Attempt rows without a foreign key to their job.
--
-- Every lease inserts one job_attempts row per job it takes. With the foreign key, each of those
-- rows ran a referential-integrity check: one more query per leased job that looks the job up
-- again and locks it FOR KEY SHARE, although the same statement has just locked and updated that
-- job. It was about a sixth of a lease's server time. Attempt rows are written only by the lease
-- statement, for the jobs it has locked, so a row cannot point at a missing job.
--
-- The foreign key also deleted a job's attempts with the job (ON DELETE CASCADE). A statement
-- trigger of its own on DELETE now does that, once per statement, for the package's purge and
-- for an operator's own DELETE alike; the counting trigger of 0004 stays as it is. The DELETE
-- runs through EXECUTE, so it is planned for the number of rows deleted and the table's size at
-- the time: a plan kept from a purge of a nearly empty table would read every attempt row for
-- each later purge.
--
-- SECURITY DEFINER, as the schema's owner: the cascade of a foreign key ran with the owner's
-- rights too, so a runtime role with DELETE on jobs but not on job_attempts (the tighter grant
-- set in docs/SECURITY.md) can still purge. The function only deletes the attempts of the rows
-- its statement deleted, names its table with the trigger's own schema, and its search_path
-- holds only pg_catalog.
ALTER TABLE {{schema}}.job_attempts DROP CONSTRAINT IF EXISTS job_attempts_job_id_fkey;

CREATE FUNCTION {{schema}}.jobs_delete_attempts() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	EXECUTE format('DELETE FROM %I.job_attempts a USING old_rows o WHERE a.job_id = o.id', TG_TABLE_SCHEMA);
	RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_delete_attempts AFTER DELETE ON {{schema}}.jobs
	REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.jobs_delete_attempts();
