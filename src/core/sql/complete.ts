import type { SqlQuery } from './types';

export interface CompleteRow {
	ord: number;
	job_id: string;
	attempt_id: string;
	outcome: 'succeeded' | 'failed' | 'retry' | 'release';
	result: unknown;
	error_code: string | null;
	error_message: string | null;
	error_class: string | null;
	error_node: string | null;
	error_workflow: string | null;
	error_execution: string | null;
	/** Retry: explicit delay (e.g. from Retry-After); release: delay before the job is due again. */
	delay_ms: number | null;
	backoff_base_ms: number;
	backoff_max_ms: number;
}

/**
 * Fenced terminal-or-retry write for a batch. Only rows whose current (id, attempt_id) match
 * and that are still running are touched; everything else comes back with `applied = false`
 * and the job's current status, which the node routes to "Lease Lost".
 *
 * Retry backoff: d = min(max, base * 2^(attempt-1)); the job is due again after a uniformly
 * random delay in [d/2, d] ("equal jitter"), unless an explicit delay is given. A retry of the
 * last allowed attempt fails the job instead (error_code kept, class defaults to retryable).
 *
 * The event id is stable for one finish (job id, status, attempt number), so redelivery keeps it.
 * When the job has a callback URL and reaches done or failed, the job-finished event is
 * inserted into the callback queue by the same statement, so it commits with the result.
 */
export function completeQuery(s: string, rows: CompleteRow[], callbackQueue: string): SqlQuery {
	return {
		text: `
WITH input AS (
	SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
		ord int, job_id uuid, attempt_id uuid, outcome text, result jsonb, error_code text,
		error_message text, error_class text, error_node text, error_workflow text, error_execution text,
		delay_ms bigint, backoff_base_ms bigint, backoff_max_ms bigint)
), target AS (
	SELECT x.*, j.attempts, j.max_attempts,
		CASE x.outcome
			WHEN 'succeeded' THEN 'done'
			WHEN 'failed' THEN 'failed'
			WHEN 'retry' THEN CASE WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'queued' END
			WHEN 'release' THEN 'queued'
		END AS new_status,
		CASE
			WHEN x.outcome = 'retry' AND x.delay_ms IS NOT NULL THEN x.delay_ms
			WHEN x.outcome = 'retry' THEN (
				least(x.backoff_max_ms::float8, x.backoff_base_ms * power(2::float8, least(j.attempts - 1, 40)))
				* (0.5 + random() * 0.5))::bigint
			WHEN x.outcome = 'release' THEN coalesce(x.delay_ms, 0)
			ELSE 0
		END AS wait_ms
	FROM input x
	JOIN ${s}.jobs j ON j.id = x.job_id AND j.attempt_id = x.attempt_id AND j.status = 'running'
), updated AS (
	UPDATE ${s}.jobs j
	SET status = t.new_status,
		result = CASE WHEN t.new_status = 'done' THEN t.result ELSE j.result END,
		attempts = CASE WHEN t.outcome = 'release' THEN j.attempts - 1 ELSE j.attempts END,
		run_at = CASE WHEN t.new_status = 'queued' THEN now() + t.wait_ms * interval '1 millisecond' ELSE j.run_at END,
		lease_until = NULL,
		finished_at = CASE WHEN t.new_status IN ('done', 'failed') THEN now() ELSE NULL END,
		updated_at = now(),
		error_code = CASE WHEN t.outcome IN ('failed', 'retry') THEN coalesce(t.error_code, CASE WHEN t.outcome = 'retry' THEN 'retries_exhausted' ELSE 'failed' END)
			WHEN t.new_status = 'done' THEN NULL ELSE j.error_code END,
		error_message = CASE WHEN t.outcome IN ('failed', 'retry') THEN t.error_message WHEN t.new_status = 'done' THEN NULL ELSE j.error_message END,
		error_class = CASE
			WHEN t.outcome = 'failed' THEN coalesce(t.error_class, 'needs_manual_review')
			WHEN t.outcome = 'retry' THEN coalesce(t.error_class, 'retryable')
			WHEN t.new_status = 'done' THEN NULL ELSE j.error_class END,
		error_node = CASE WHEN t.outcome IN ('failed', 'retry') THEN t.error_node WHEN t.new_status = 'done' THEN NULL ELSE j.error_node END,
		error_workflow = CASE WHEN t.outcome IN ('failed', 'retry') THEN t.error_workflow WHEN t.new_status = 'done' THEN NULL ELSE j.error_workflow END,
		error_execution = CASE WHEN t.outcome IN ('failed', 'retry') THEN t.error_execution WHEN t.new_status = 'done' THEN NULL ELSE j.error_execution END
	FROM target t
	WHERE j.id = t.job_id AND j.attempt_id = t.attempt_id AND j.status = 'running'
	RETURNING t.ord, t.outcome, ('job_' || j.id || '_' || j.status || '_' || j.attempts) AS callback_event_id, j.id, j.queue, j.status, j.attempts, j.max_attempts,
		j.attempt_id, j.run_at, j.result, j.error_code, j.error_message, j.error_class,
		j.callback_url, j.correlation_id, j.finished_at
), attempt_log AS (
	UPDATE ${s}.job_attempts a
	SET finished_at = now(),
		outcome = CASE u.outcome WHEN 'release' THEN 'released' ELSE u.outcome END,
		error_code = CASE WHEN u.outcome IN ('failed', 'retry') THEN u.error_code END,
		error_message = CASE WHEN u.outcome IN ('failed', 'retry') THEN left(u.error_message, 1000) END
	FROM updated u
	WHERE a.attempt_id = u.attempt_id
	RETURNING 1
), callbacks AS (
	INSERT INTO ${s}.jobs (id, queue, payload, idempotency_key, payload_fingerprint, max_attempts, correlation_id)
	SELECT gen_random_uuid(), $2, jsonb_build_object(
			'event_id', u.callback_event_id,
			'event_type', CASE u.status WHEN 'done' THEN 'job.succeeded' ELSE 'job.failed' END,
			'event_version', 1,
			'occurred_at', u.finished_at,
			'source', 'n8n-nodes-durable-jobs',
			'correlation_id', u.correlation_id,
			'destination', u.callback_url,
			'payload', jsonb_build_object(
				'job_id', u.id, 'queue', u.queue, 'status', u.status, 'attempts', u.attempts,
				'result', CASE WHEN u.status = 'done' THEN u.result END,
				'error', CASE WHEN u.status = 'failed' THEN jsonb_build_object(
					'code', u.error_code, 'message', u.error_message, 'class', u.error_class) END)),
		u.callback_event_id, u.callback_event_id, 10, u.correlation_id
	FROM updated u
	WHERE u.callback_url IS NOT NULL AND u.status IN ('done', 'failed')
	ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING idempotency_key
)
SELECT x.ord, u.id IS NOT NULL AS applied, u.status, u.attempts, u.max_attempts, u.run_at, u.error_code,
	u.error_class, u.finished_at, c.idempotency_key AS callback_event_id,
	cur.status AS current_status, cur.attempt_id AS current_attempt_id, cur.id IS NOT NULL AS job_exists
FROM input x
LEFT JOIN updated u ON u.ord = x.ord
LEFT JOIN callbacks c ON c.idempotency_key = u.callback_event_id
LEFT JOIN ${s}.jobs cur ON u.ord IS NULL AND cur.id = x.job_id
ORDER BY x.ord`,
		values: [JSON.stringify(rows), callbackQueue],
	};
}
