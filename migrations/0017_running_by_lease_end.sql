-- Every lease asks whether a running job of its queue has an expired lease: the usual lease in
-- its probe, the full lease (and every lease under a concurrency limit) in its expired branch.
-- jobs_running held the queue only, so the question read every running job of the queue until
-- it met an expired one: beside 10,000 running jobs a lease of that queue took 2.5 ms instead of
-- 0.4. With the lease end in the index the probe is one index descent, and the expired branch
-- reads the expired entries only.
--
-- The price: a heartbeat (Extend Lease) now changes an indexed column, so it is no longer a HOT
-- update and adds an entry to every index whose condition the job meets (the primary key and this
-- one; the ordering-key and idempotency indexes for a job with such a key). A heartbeat is a call
-- a workflow makes a few times per attempt; every attempt takes a lease, and every lease asked.
--
-- Locks. The migration first locks jobs against everything, reads included, and then builds the
-- index, drops the old one and renames the new one. Taking that lock first matters: building
-- takes a weaker lock that lets reads through, and a lease that had read jobs before the drop
-- asked for the strong lock would wait for the migration while the migration waited for it (a
-- deadlock). The lock is asked for with a timeout of 3 s, so a long transaction on jobs (a dump,
-- a report) holds up the work queued behind the request for no longer; after it the migration
-- stops with SQLSTATE DJ016 (it "waits", as 0016 does: the package works without it and applies
-- it on a later use).
--
-- Building reads the whole jobs table, seconds per million rows, while reads and writes of jobs
-- wait. On a large table, create the index first with
--   CREATE INDEX CONCURRENTLY jobs_running_lease ON <schema>.jobs (queue, lease_until)
--   	WHERE status = 'running';
-- and let it finish; the migration then only drops the old index and renames this one, which
-- takes moments. An index of that name with another definition, or left invalid by a failed
-- CREATE INDEX CONCURRENTLY, is built again. A jobs_running that already holds the lease end is
-- left as it is.
DO $$
DECLARE
	previous_lock_timeout text := current_setting('lock_timeout');
	prepared oid := to_regclass('{{schema}}.jobs_running_lease');
	wanted text := 'btree (queue, lease_until) WHERE (status = ''running''::text)';
BEGIN
	PERFORM set_config('lock_timeout', '3s', true);
	BEGIN
		LOCK TABLE {{schema}}.jobs IN ACCESS EXCLUSIVE MODE;
	EXCEPTION WHEN lock_not_available THEN
		RAISE EXCEPTION 'Migration 0017 waits: another transaction kept the jobs table for more than 3 s'
			USING ERRCODE = 'DJ016',
				HINT = 'Nothing needs doing: it is applied on a later use';
	END;
	PERFORM set_config('lock_timeout', previous_lock_timeout, true);

	IF regexp_replace(pg_get_indexdef('{{schema}}.jobs_running'::regclass), '^.* USING ', '') = wanted THEN
		RETURN;
	END IF;
	IF prepared IS NOT NULL AND NOT EXISTS (
		SELECT 1 FROM pg_index i
		WHERE i.indexrelid = prepared AND i.indisvalid AND i.indrelid = '{{schema}}.jobs'::regclass
			AND regexp_replace(pg_get_indexdef(i.indexrelid), '^.* USING ', '') = wanted
	) THEN
		DROP INDEX {{schema}}.jobs_running_lease;
		prepared := NULL;
	END IF;
	IF prepared IS NULL THEN
		CREATE INDEX jobs_running_lease ON {{schema}}.jobs (queue, lease_until)
			WHERE status = 'running';
	END IF;
	DROP INDEX {{schema}}.jobs_running;
	ALTER INDEX {{schema}}.jobs_running_lease RENAME TO jobs_running;
END
$$;
