-- Jobs and outbox events share one table: an outbox event is a job in an outbox queue, so
-- leasing, fencing, retries, dead letters, replay and stats are one mechanism.
--
-- Index design (see docs/ARCHITECTURE.md):
-- * jobs_queued_claim matches the lease predicate for due work exactly (status = 'queued').
-- * jobs_running holds only running rows and does not include lease_until, so a heartbeat
--   (which changes lease_until only) touches no indexed column and can be a HOT update.
-- * Terminal rows (done / failed / cancelled) are in neither hot index.
-- * fillfactor leaves room on each page for those HOT updates.
CREATE TABLE {{schema}}.jobs (
	id uuid PRIMARY KEY,
	seq bigint GENERATED ALWAYS AS IDENTITY,
	queue text NOT NULL,
	status text NOT NULL DEFAULT 'queued'
		CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled')),
	payload jsonb NOT NULL,
	idempotency_key text CHECK (char_length(idempotency_key) <= 255),
	payload_fingerprint text,
	priority integer NOT NULL DEFAULT 0,
	run_at timestamptz NOT NULL DEFAULT now(),
	attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
	max_attempts integer NOT NULL DEFAULT 5 CHECK (max_attempts >= 1),
	attempt_id uuid,
	lease_until timestamptz,
	ordering_key text,
	result jsonb,
	error_code text,
	error_message text,
	error_class text CHECK (error_class IN ('retryable', 'needs_mapping', 'needs_manual_review', 'discarded')),
	error_node text,
	error_workflow text,
	error_execution text,
	status_token_hash bytea,
	callback_url text,
	correlation_id text,
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now(),
	started_at timestamptz,
	finished_at timestamptz
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);

CREATE UNIQUE INDEX jobs_idempotency ON {{schema}}.jobs (queue, idempotency_key)
	WHERE idempotency_key IS NOT NULL;

CREATE INDEX jobs_queued_claim ON {{schema}}.jobs (queue, priority DESC, run_at, seq)
	WHERE status = 'queued';

CREATE INDEX jobs_running ON {{schema}}.jobs (queue)
	WHERE status = 'running';

CREATE INDEX jobs_ordering ON {{schema}}.jobs (queue, ordering_key, seq)
	WHERE ordering_key IS NOT NULL AND status IN ('queued', 'running');

CREATE INDEX jobs_failed ON {{schema}}.jobs (queue, finished_at)
	WHERE status = 'failed';

CREATE INDEX jobs_finished ON {{schema}}.jobs (finished_at)
	WHERE status IN ('done', 'failed', 'cancelled');

-- Every lease and its outcome. Ids and timings only: never the payload's personal data.
CREATE TABLE {{schema}}.job_attempts (
	attempt_id uuid PRIMARY KEY,
	job_id uuid NOT NULL REFERENCES {{schema}}.jobs (id) ON DELETE CASCADE,
	attempt integer NOT NULL,
	workflow_id text,
	execution_id text,
	started_at timestamptz NOT NULL DEFAULT now(),
	lease_until timestamptz,
	finished_at timestamptz,
	outcome text CHECK (outcome IN ('succeeded', 'failed', 'retry', 'released', 'lease_expired', 'cancelled')),
	error_code text,
	error_message text
);

CREATE INDEX job_attempts_job ON {{schema}}.job_attempts (job_id, attempt);

-- Exact counts of terminal jobs, kept by a statement trigger so Queue Stats never counts a
-- million finished rows. Several slots per (queue, status) spread concurrent increments
-- so that completing workers do not queue up behind one counter row.
CREATE TABLE {{schema}}.job_counts (
	queue text NOT NULL,
	status text NOT NULL,
	slot smallint NOT NULL,
	n bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (queue, status, slot)
);

CREATE FUNCTION {{schema}}.jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('{{channel}}', q.queue) FROM (SELECT DISTINCT queue FROM new_rows) q;
	RETURN NULL;
END;
$$;

CREATE FUNCTION {{schema}}.jobs_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {{schema}}.job_counts AS c (queue, status, slot, n)
	SELECT d.queue, d.status, (random() * 7)::smallint, sum(d.delta)
	FROM (
		SELECT n.queue, n.status, 1 AS delta
		FROM new_rows n JOIN old_rows o ON o.id = n.id
		WHERE n.status IS DISTINCT FROM o.status AND n.status IN ('done', 'failed', 'cancelled')
		UNION ALL
		SELECT o.queue, o.status, -1
		FROM new_rows n JOIN old_rows o ON o.id = n.id
		WHERE n.status IS DISTINCT FROM o.status AND o.status IN ('done', 'failed', 'cancelled')
	) d
	GROUP BY d.queue, d.status
	ON CONFLICT (queue, status, slot) DO UPDATE SET n = c.n + EXCLUDED.n;

	PERFORM pg_notify('{{channel}}', q.queue)
	FROM (
		SELECT DISTINCT n.queue FROM new_rows n JOIN old_rows o ON o.id = n.id
		WHERE n.status = 'queued' AND o.status <> 'queued'
	) q;
	RETURN NULL;
END;
$$;

CREATE FUNCTION {{schema}}.jobs_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {{schema}}.job_counts AS c (queue, status, slot, n)
	SELECT o.queue, o.status, (random() * 7)::smallint, -count(*)
	FROM old_rows o
	WHERE o.status IN ('done', 'failed', 'cancelled')
	GROUP BY o.queue, o.status
	ON CONFLICT (queue, status, slot) DO UPDATE SET n = c.n + EXCLUDED.n;
	RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_after_insert AFTER INSERT ON {{schema}}.jobs
	REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.jobs_after_insert();

CREATE TRIGGER jobs_after_update AFTER UPDATE ON {{schema}}.jobs
	REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.jobs_after_update();

CREATE TRIGGER jobs_after_delete AFTER DELETE ON {{schema}}.jobs
	REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.jobs_after_delete();
