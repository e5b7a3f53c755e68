-- The job-finished event of a job with a callback URL is written by a function that the
-- completion calls only for the jobs that need one.
--
-- The completion used to insert these events with an INSERT … ON CONFLICT in its own statement.
-- That INSERT ran for every completion, with or without rows: it opened the indexes of jobs and
-- fired the statement trigger jobs_after_insert, about a ninth of a single completion's server
-- time although almost no job has a callback URL. The completion now calls this function from
-- a plain SELECT over the jobs it finished that have one; a completion without such jobs runs
-- no INSERT at all. The event and its id are the same as before, and it still commits with the
-- result, in the completion's own statement.
--
-- Returns the event id, or NULL when an event with that id is already in the callback queue
-- (a finish that was redelivered). SECURITY INVOKER: it inserts with the caller's privileges,
-- which the completion needed for its own INSERT. search_path is fixed, so the caller's cannot
-- change what the body's unqualified names (gen_random_uuid, jsonb_build_object) resolve to.
CREATE FUNCTION {{schema}}.job_finished_event(
	p_callback_queue text,
	p_event_id text,
	p_job_id uuid,
	p_job_queue text,
	p_status text,
	p_attempts integer,
	p_finished_at timestamptz,
	p_correlation_id text,
	p_destination text,
	p_result jsonb,
	p_error_code text,
	p_error_message text,
	p_error_class text
) RETURNS text LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	inserted_event_id text;
BEGIN
	INSERT INTO {{schema}}.jobs (id, queue, payload, idempotency_key, payload_fingerprint, max_attempts, correlation_id)
	VALUES (gen_random_uuid(), p_callback_queue, jsonb_build_object(
			'event_id', p_event_id,
			'event_type', CASE p_status WHEN 'done' THEN 'job.succeeded' ELSE 'job.failed' END,
			'event_version', 1,
			'occurred_at', p_finished_at,
			'source', 'n8n-nodes-durable-jobs',
			'correlation_id', p_correlation_id,
			'destination', p_destination,
			'payload', jsonb_build_object(
				'job_id', p_job_id, 'queue', p_job_queue, 'status', p_status, 'attempts', p_attempts,
				'result', CASE WHEN p_status = 'done' THEN p_result END,
				'error', CASE WHEN p_status = 'failed' THEN jsonb_build_object(
					'code', p_error_code, 'message', p_error_message, 'class', p_error_class) END)),
		p_event_id, p_event_id, 10, p_correlation_id)
	ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING idempotency_key INTO inserted_event_id;
	RETURN inserted_event_id;
END;
$$;
