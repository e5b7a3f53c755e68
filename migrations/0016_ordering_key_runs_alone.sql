-- Jobs sharing an ordering key never run at the same time. A lease checks this against its
-- statement's snapshot, which can miss a lease of the same key that committed while the
-- statement ran (two leases whose snapshots cross, when one job's enqueue committed after a
-- later job's). This index refuses the second of such leases; nothing of it is written, and
-- the lease runs again with a new snapshot.
--
-- The package before this migration could leave two running jobs of one key (a job requeued
-- while a later one ran). The index cannot be built while such a pair runs, so the migration
-- stops, names the pair, and is applied on a later use once one of them has finished.
DO $$
DECLARE
	pair record;
BEGIN
	SELECT queue, ordering_key, count(*) AS running INTO pair
	FROM {{schema}}.jobs
	WHERE status = 'running' AND ordering_key IS NOT NULL
	GROUP BY queue, ordering_key
	HAVING count(*) > 1
	LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'Migration 0016 waits: % jobs of queue "%" with ordering key "%" are running at once', pair.running, pair.queue, pair.ordering_key
			USING HINT = 'Let them finish (or cancel all but one with Job Status → Cancel); the migration is applied again on the next use';
	END IF;
END
$$;

CREATE UNIQUE INDEX IF NOT EXISTS jobs_ordering_running ON {{schema}}.jobs (queue, ordering_key)
	WHERE ordering_key IS NOT NULL AND status = 'running';
