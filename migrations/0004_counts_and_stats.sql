-- Cheaper statement triggers, queue stats as a function that can never be JIT-compiled, and room
-- for the update that closes each attempt.
--
-- Triggers (same names and events as 0001; only the function bodies change):
-- * job_counts deltas are computed without joining old_rows to new_rows: the net change of
--   terminal jobs per (queue, status) is (rows in new_rows) - (rows in old_rows), because an
--   UPDATE has the same rows on both sides. The join it replaces ran for every UPDATE (lease,
--   heartbeat) and was planned once per session from the row counts of its first call, so a
--   session whose first UPDATE touched one row joined later batches in a nested loop.
--   Counter rows are only written where the net change is not zero.
-- * The slot is the backend's pid modulo 16, so one connection always adds to the same
--   counter row and concurrent connections mostly to different ones (random() gave 8 slots
--   with uneven weights). Queue stats sum every slot, whatever their number.
-- * Inserting a job that is already terminal is counted too.
-- * An UPDATE notifies the queues of the rows it leaves queued. Every statement of the package
--   that leaves a row queued moved it there (retry, release, requeue), so this is the same
--   notification as before; an operator's UPDATE of rows that stay queued now also notifies,
--   which listeners treat as a hint to poll.
CREATE OR REPLACE FUNCTION {{schema}}.jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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

CREATE OR REPLACE FUNCTION {{schema}}.jobs_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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

CREATE OR REPLACE FUNCTION {{schema}}.jobs_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {{schema}}.job_counts AS c (queue, status, slot, n)
	SELECT o.queue, o.status, (pg_backend_pid() % 16)::smallint, -count(*)
	FROM old_rows o
	WHERE o.status IN ('done', 'failed', 'cancelled')
	GROUP BY o.queue, o.status
	ON CONFLICT (queue, status, slot) DO UPDATE SET n = c.n + EXCLUDED.n;
	RETURN NULL;
END;
$$;

-- Queue stats (JobStore.stats). One queue: its queued rows and its running rows are each read
-- once, from their partial index, plus the job_counts slots. All queues (NULL): the same,
-- grouped by queue. Finished rows are never read.
--
-- `SET jit = off`: the plan cost grows with the number of live rows and with the size of the
-- partial indexes (which keep their pages after a burst of work), and above jit_above_cost
-- PostgreSQL would JIT-compile the statement, which costs far more than the statement itself.
-- A function's SET applies while its queries are planned; the calling statement is too cheap
-- to be compiled.
--
-- The queries run through EXECUTE, so each call is planned for the queue it asks about and for
-- the table as it is now. A cached plan would keep whatever access path suited the table when
-- it was first planned (e.g. a sequential scan while the table was nearly empty).
CREATE FUNCTION {{schema}}.queue_stats(p_queue text)
RETURNS TABLE (
	queue text, queued bigint, ready bigint, retrying bigint, running bigint, running_expired bigint,
	oldest_ready_age_seconds double precision, oldest_queued_age_seconds double precision,
	done bigint, failed bigint, cancelled bigint)
LANGUAGE plpgsql STABLE
SET jit = off
AS $$
BEGIN
	IF p_queue IS NOT NULL THEN
		RETURN QUERY EXECUTE $q$
		SELECT $1, q.queued, q.ready, q.retrying, r.running, r.running_expired,
			extract(epoch FROM now() - q.oldest_ready)::double precision,
			extract(epoch FROM now() - q.oldest_queued)::double precision,
			c.done, c.failed, c.cancelled
		FROM (
			SELECT count(*) AS queued,
				count(*) FILTER (WHERE j.run_at <= now()) AS ready,
				count(*) FILTER (WHERE j.attempts > 0) AS retrying,
				min(j.run_at) FILTER (WHERE j.run_at <= now()) AS oldest_ready,
				min(j.created_at) AS oldest_queued
			FROM {{schema}}.jobs j
			WHERE j.queue = $1 AND j.status = 'queued'
		) q, (
			SELECT count(*) AS running, count(*) FILTER (WHERE j.lease_until < now()) AS running_expired
			FROM {{schema}}.jobs j
			WHERE j.queue = $1 AND j.status = 'running'
		) r, (
			SELECT coalesce(sum(k.n) FILTER (WHERE k.status = 'done'), 0)::bigint AS done,
				coalesce(sum(k.n) FILTER (WHERE k.status = 'failed'), 0)::bigint AS failed,
				coalesce(sum(k.n) FILTER (WHERE k.status = 'cancelled'), 0)::bigint AS cancelled
			FROM {{schema}}.job_counts k
			WHERE k.queue = $1
		) c$q$ USING p_queue;
	ELSE
		RETURN QUERY EXECUTE $q$
		WITH q AS (
			SELECT j.queue, count(*) AS queued,
				count(*) FILTER (WHERE j.run_at <= now()) AS ready,
				count(*) FILTER (WHERE j.attempts > 0) AS retrying,
				min(j.run_at) FILTER (WHERE j.run_at <= now()) AS oldest_ready,
				min(j.created_at) AS oldest_queued
			FROM {{schema}}.jobs j
			WHERE j.status = 'queued'
			GROUP BY j.queue
		), r AS (
			SELECT j.queue, count(*) AS running, count(*) FILTER (WHERE j.lease_until < now()) AS running_expired
			FROM {{schema}}.jobs j
			WHERE j.status = 'running'
			GROUP BY j.queue
		), c AS (
			SELECT k.queue,
				coalesce(sum(k.n) FILTER (WHERE k.status = 'done'), 0)::bigint AS done,
				coalesce(sum(k.n) FILTER (WHERE k.status = 'failed'), 0)::bigint AS failed,
				coalesce(sum(k.n) FILTER (WHERE k.status = 'cancelled'), 0)::bigint AS cancelled
			FROM {{schema}}.job_counts k
			GROUP BY k.queue
		)
		SELECT names.queue, coalesce(q.queued, 0), coalesce(q.ready, 0), coalesce(q.retrying, 0),
			coalesce(r.running, 0), coalesce(r.running_expired, 0),
			extract(epoch FROM now() - q.oldest_ready)::double precision,
			extract(epoch FROM now() - q.oldest_queued)::double precision,
			coalesce(c.done, 0), coalesce(c.failed, 0), coalesce(c.cancelled, 0)
		FROM (SELECT q.queue FROM q UNION SELECT r.queue FROM r UNION SELECT c.queue FROM c) names
		LEFT JOIN q ON q.queue = names.queue
		LEFT JOIN r ON r.queue = names.queue
		LEFT JOIN c ON c.queue = names.queue
		ORDER BY names.queue$q$;
	END IF;
END;
$$;

-- Every attempt row is updated at most once, when its attempt ends (complete, cancel, lease
-- expiry). With full pages that update must put the new row version on another page and add
-- entries to both indexes of the table; with half of each page free it is usually a HOT update
-- on the same page, touching no index. Applies to pages written from now on.
ALTER TABLE {{schema}}.job_attempts SET (fillfactor = 50);
