-- A heartbeat touches only unindexed columns again, so it can be a HOT update.
--
-- 0017 put the lease end (lease_until) into jobs_running, so that a lease learns whether a lease
-- of its queue expired in one index descent. But a heartbeat (Extend Lease) moves lease_until,
-- and with it in an index every heartbeat became an ordinary update: a new entry in every index
-- whose condition the job meets. jobs_running now holds attempt_lease_until instead: the end
-- the attempt's lease was given, which a heartbeat leaves as it is unless it shortens the lease
-- (the statements keep attempt_lease_until <= lease_until, so a lease that ends is found). The
-- lease asks for attempt_lease_until < now() AND lease_until < now(): the index finds the
-- attempts past the lease they were given, and the row says whether a heartbeat extended it.
-- A lease still reads the entries of the attempts that outlived their first lease by
-- heartbeats, one row each, until it meets an expired one; no longer every running job.
--
-- attempt_lease_until is set by every lease since migration 0009, which copied it onto the jobs
-- then running. Running jobs whose value is missing, or later than their lease end (a heartbeat
-- of an older version that shortened a lease), get their lease end, so none is missed.
--
-- Locks and a prepared index as in 0017: jobs is locked against everything first (at most 3 s,
-- else the migration stops with SQLSTATE DJ016 and is applied on a later use), then the index
-- is built. On a large table, create it first with
--   CREATE INDEX CONCURRENTLY jobs_running_attempt_lease ON <schema>.jobs (queue, attempt_lease_until)
--   	WHERE status = 'running';
-- and let it finish; the migration then only drops the old index and renames this one. An index
-- of that name with another definition, or left invalid, is built again; a jobs_running that
-- already holds attempt_lease_until is left as it is.
DO $$
DECLARE
	previous_lock_timeout text := current_setting('lock_timeout');
	prepared oid := to_regclass('{{schema}}.jobs_running_attempt_lease');
	wanted text := 'btree (queue, attempt_lease_until) WHERE (status = ''running''::text)';
BEGIN
	PERFORM set_config('lock_timeout', '3s', true);
	BEGIN
		LOCK TABLE {{schema}}.jobs IN ACCESS EXCLUSIVE MODE;
	EXCEPTION WHEN lock_not_available THEN
		RAISE EXCEPTION 'Migration 0018 waits: another transaction kept the jobs table for more than 3 s'
			USING ERRCODE = 'DJ016',
				HINT = 'Nothing needs doing: it is applied on a later use';
	END;
	PERFORM set_config('lock_timeout', previous_lock_timeout, true);

	UPDATE {{schema}}.jobs SET attempt_lease_until = lease_until
	WHERE status = 'running'
		AND (attempt_lease_until IS NULL OR attempt_lease_until > lease_until);

	IF regexp_replace(pg_get_indexdef('{{schema}}.jobs_running'::regclass), '^.* USING ', '') = wanted THEN
		RETURN;
	END IF;
	IF prepared IS NOT NULL AND NOT EXISTS (
		SELECT 1 FROM pg_index i
		WHERE i.indexrelid = prepared AND i.indisvalid AND i.indrelid = '{{schema}}.jobs'::regclass
			AND regexp_replace(pg_get_indexdef(i.indexrelid), '^.* USING ', '') = wanted
	) THEN
		DROP INDEX {{schema}}.jobs_running_attempt_lease;
		prepared := NULL;
	END IF;
	IF prepared IS NULL THEN
		CREATE INDEX jobs_running_attempt_lease ON {{schema}}.jobs (queue, attempt_lease_until)
			WHERE status = 'running';
	END IF;
	DROP INDEX {{schema}}.jobs_running;
	ALTER INDEX {{schema}}.jobs_running_attempt_lease RENAME TO jobs_running;
END
$$;
