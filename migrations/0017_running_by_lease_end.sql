-- Every lease asks whether a running job of its queue has an expired lease: the usual lease in
-- its probe, the full lease (and every lease under a concurrency limit) in its expired branch.
-- jobs_running held the queue only, so the question read every running job of the queue until
-- it met an expired one: beside 10,000 running jobs a lease of that queue took 2.5 ms instead of
-- 0.4. With the lease end in the index the probe is one index descent, and the expired branch
-- reads the expired entries only.
--
-- The price: a heartbeat (Extend Lease) now changes an indexed column, so it is no longer a HOT
-- update and adds an entry to the primary key and to this index (and to the ordering-key and
-- idempotency indexes of a job that has one). A heartbeat is a call a workflow makes a few times
-- per attempt; every attempt takes a lease, and every lease asked the question.
--
-- Building the index takes a lock that blocks writes to jobs while it runs (seconds per million
-- rows, however few jobs run). On a large table, create it first with CREATE INDEX CONCURRENTLY,
-- named jobs_running_lease, with this definition; the migration then only drops the old index
-- and gives the new one its name. An index of that name left invalid by a failed
-- CREATE INDEX CONCURRENTLY is built again.
DO $$
BEGIN
	IF EXISTS (
		SELECT 1 FROM pg_index
		WHERE indexrelid = to_regclass('{{schema}}.jobs_running_lease') AND NOT indisvalid
	) THEN
		DROP INDEX {{schema}}.jobs_running_lease;
	END IF;
END
$$;

CREATE INDEX IF NOT EXISTS jobs_running_lease ON {{schema}}.jobs (queue, lease_until)
	WHERE status = 'running';

DROP INDEX {{schema}}.jobs_running;

ALTER INDEX {{schema}}.jobs_running_lease RENAME TO jobs_running;
