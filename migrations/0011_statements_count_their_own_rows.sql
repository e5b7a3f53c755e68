-- The lease, the completion and the heartbeat keep job_counts and send the wake-up notices
-- themselves, so the update trigger has nothing left to do for them.
--
-- The statement trigger jobs_after_update (0004) ran two queries over its transition tables
-- after every UPDATE of jobs: the upsert of the terminal counts and the notice for rows left
-- queued. Each query of a trigger function pays its own executor start and end, which the
-- statement that fired it does not: together about a quarter of a single lease's or
-- completion's server time, although a lease never changes a terminal count and a completion
-- changes one counter row. These statements now upsert their terminal counts in a CTE of their
-- own (the heartbeat changes no status and has none), send the notice for each row they leave
-- queued from their RETURNING list, and set the transaction-local setting
-- durable_jobs.counted_update to '<schema>:<trigger depth>:<statement start>'. The trigger,
-- finding its own schema, depth and statement there, clears the setting and returns: one
-- comparison instead of two queries.
--
-- Every other UPDATE (an operator's, requeue, cancel, an older version of the package, an
-- UPDATE run by a trigger inside one of these statements) does not match, and the trigger
-- counts and notifies as before. A statement sets the mark only when it updated a row, in the
-- same statement that counted those rows, so a count is never taken twice or missed; the
-- trigger of that statement clears it at the statement's end, so a later UPDATE in the same
-- transaction is counted by the trigger again.
CREATE OR REPLACE FUNCTION {{schema}}.jobs_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	cleared text;
BEGIN
	IF current_setting('durable_jobs.counted_update', true)
			= TG_TABLE_SCHEMA || ':' || (pg_trigger_depth() - 1) || ':' || statement_timestamp() THEN
		-- An assignment, not PERFORM: a simple expression, evaluated without a query.
		cleared := set_config('durable_jobs.counted_update', '', true);
		RETURN NULL;
	END IF;

	INSERT INTO {{schema}}.job_counts AS c (queue, status, slot, n)
	SELECT d.queue, d.status, (pg_backend_pid() % 16)::smallint, sum(d.delta)
	FROM (
		SELECT n.queue, n.status, 1 AS delta FROM new_rows n WHERE n.status IN ('done', 'failed', 'cancelled')
		UNION ALL
		SELECT o.queue, o.status, -1 FROM old_rows o WHERE o.status IN ('done', 'failed', 'cancelled')
	) d
	GROUP BY d.queue, d.status
	HAVING sum(d.delta) <> 0
	ON CONFLICT (queue, status, slot) DO UPDATE SET n = c.n + EXCLUDED.n;

	PERFORM pg_notify('{{channel}}', q.queue) FROM (SELECT DISTINCT n.queue FROM new_rows n WHERE n.status = 'queued') q;
	RETURN NULL;
END;
$$;
