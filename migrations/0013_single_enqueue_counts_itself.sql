-- An enqueue of one job sends its own wake-up notice, so the insert trigger has nothing left to
-- do for it.
--
-- The statement trigger jobs_after_insert (0004) ran two queries over its transition table
-- after every INSERT into jobs: the upsert of the terminal counts (an enqueue inserts only
-- queued jobs, so it found nothing to count) and the notice for each queue inserted into.
-- For one job, the usual call of a webhook that answers 202, those two queries were about a
-- sixth of the statement's time on the server. The one-row enqueue statements now send the
-- notice from their RETURNING list and set the transaction-local setting
-- durable_jobs.counted_insert to '<schema>:<trigger depth>:<statement start>', as the lease and
-- the completion do for updates since 0011; the trigger, finding its own schema, depth and
-- statement there, clears the setting and returns.
--
-- Every other INSERT (an enqueue of many jobs, an operator's, a completion's job-finished
-- event, an older version of the package, an INSERT run by a trigger inside the statement) does
-- not match, and the trigger counts and notifies as before. A statement sets the mark only
-- when it inserted its row, so a repeated idempotency key, which inserts nothing, leaves the
-- (empty) work to the trigger.
CREATE OR REPLACE FUNCTION {{schema}}.jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	cleared text;
BEGIN
	IF current_setting('durable_jobs.counted_insert', true)
			= TG_TABLE_SCHEMA || ':' || (pg_trigger_depth() - 1) || ':' || statement_timestamp() THEN
		-- An assignment, not PERFORM: a simple expression, evaluated without a query.
		cleared := set_config('durable_jobs.counted_insert', '', true);
		RETURN NULL;
	END IF;

	INSERT INTO {{schema}}.job_counts AS c (queue, status, slot, n)
	SELECT n.queue, n.status, (pg_backend_pid() % 16)::smallint, count(*)
	FROM new_rows n
	WHERE n.status IN ('done', 'failed', 'cancelled')
	GROUP BY n.queue, n.status
	ON CONFLICT (queue, status, slot) DO UPDATE SET n = c.n + EXCLUDED.n;

	PERFORM pg_notify('{{channel}}', q.queue) FROM (SELECT DISTINCT queue FROM new_rows) q;
	RETURN NULL;
END;
$$;
