-- Jobs sharing an ordering key never run at the same time. A lease checks this against its
-- statement's snapshot, which can miss a lease of the same key that committed while the
-- statement ran (two leases whose snapshots cross, when one job's enqueue committed after a
-- later job's). This index refuses the second of such leases; nothing of it is written, and
-- the lease runs again with a new snapshot.
--
-- The package before this migration could leave two running jobs of one key (a job requeued
-- while a later one ran). The index cannot be built while such a pair runs, so the migration
-- stops with SQLSTATE DJ016, naming the pair; the package then works on the schema before it
-- (its lease checks running jobs without the index) and applies it on a later use, once one of
-- the pair has finished.
--
-- An index of this name left invalid by a failed CREATE INDEX CONCURRENTLY is built again.
DO $$
DECLARE
	pair record;
BEGIN
	SELECT queue, ordering_key, count(*) AS running INTO pair
	FROM {{schema}}.jobs
	WHERE ordering_key IS NOT NULL AND status = 'running'
	GROUP BY queue, ordering_key
	HAVING count(*) > 1
	LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'Migration 0016 waits: % jobs of queue "%" with ordering key "%" are running at once', pair.running, pair.queue, pair.ordering_key
			USING ERRCODE = 'DJ016',
				HINT = 'Nothing needs doing: it is applied on a later use once one of them has finished';
	END IF;
	IF EXISTS (
		SELECT 1 FROM pg_index
		WHERE indexrelid = to_regclass('{{schema}}.jobs_ordering_running') AND NOT indisvalid
	) THEN
		DROP INDEX {{schema}}.jobs_ordering_running;
	END IF;
END
$$;

CREATE UNIQUE INDEX IF NOT EXISTS jobs_ordering_running ON {{schema}}.jobs (queue, ordering_key)
	WHERE ordering_key IS NOT NULL AND status = 'running';
