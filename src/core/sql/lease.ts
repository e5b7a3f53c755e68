import { JOB_COLUMNS, type SqlQuery } from './types';

export interface LeaseParams {
	queue: string;
	limit: number;
	leaseMs: number;
	workflowId: string | null;
	executionId: string | null;
	attemptIds: string[];
}

/**
 * Claims up to `limit` jobs of one queue in one statement.
 *
 * Candidates come from two branches, each matching one partial index: due queued jobs
 * (jobs_queued_claim) and running jobs whose lease has expired (jobs_running). A single
 * `status = 'queued' OR (status = 'running' AND lease_until < now())` predicate would match
 * neither index and fall back to scanning every live row of the queue.
 *
 * A job with an ordering key is a candidate only while no earlier job with that key is queued
 * or running, so jobs sharing a key run one at a time, in enqueue order.
 *
 * Expired jobs that have used all their attempts are failed with `lease_expired` in the same
 * statement instead of being leased again. The candidate CTE is MATERIALIZED so the planner
 * cannot re-run the LIMITed, locking subquery once per outer row.
 *
 * `$5` is how many jobs may still start under a per-queue concurrency limit (or the limit
 * itself when there is none); the caller computes it under an advisory lock.
 */
export function leaseQuery(s: string, params: LeaseParams & { slots: number }): SqlQuery {
	return {
		text: `
WITH queued AS (
	SELECT j.id, j.priority, j.run_at, j.seq, j.attempt_id AS previous_attempt_id, false AS expired
	FROM ${s}.jobs j
	WHERE j.queue = $1 AND j.status = 'queued' AND j.run_at <= now()
		AND (j.ordering_key IS NULL OR NOT EXISTS (
			SELECT 1 FROM ${s}.jobs p
			WHERE p.queue = j.queue AND p.ordering_key = j.ordering_key
				AND p.status IN ('queued', 'running') AND p.seq < j.seq))
	ORDER BY j.priority DESC, j.run_at, j.seq
	LIMIT $2
	FOR NO KEY UPDATE SKIP LOCKED
), expired AS (
	SELECT j.id, j.priority, j.run_at, j.seq, j.attempt_id AS previous_attempt_id, true AS expired,
		j.attempts >= j.max_attempts AS exhausted
	FROM ${s}.jobs j
	WHERE j.queue = $1 AND j.status = 'running' AND j.lease_until < now()
	ORDER BY j.seq
	LIMIT $2
	FOR NO KEY UPDATE SKIP LOCKED
), candidates AS MATERIALIZED (
	SELECT id, priority, run_at, seq, previous_attempt_id, expired FROM (
		SELECT id, priority, run_at, seq, previous_attempt_id, expired FROM queued
		UNION ALL
		SELECT id, priority, run_at, seq, previous_attempt_id, expired FROM expired WHERE NOT exhausted
	) c
	ORDER BY expired DESC, priority DESC, run_at, seq
	LIMIT $5
), numbered AS (
	SELECT c.*, ($4::uuid[])[row_number() OVER (ORDER BY c.expired DESC, c.priority DESC, c.run_at, c.seq)] AS new_attempt_id
	FROM candidates c
), exhausted_jobs AS (
	UPDATE ${s}.jobs j
	SET status = 'failed', lease_until = NULL, finished_at = now(), updated_at = now(),
		error_code = 'lease_expired',
		error_message = 'The lease expired on the last allowed attempt (the worker died or ran longer than its lease)',
		error_class = 'retryable'
	FROM expired e
	WHERE e.exhausted AND j.id = e.id
	RETURNING j.id, e.previous_attempt_id
), leased AS (
	UPDATE ${s}.jobs j
	SET status = 'running', attempts = j.attempts + 1, attempt_id = n.new_attempt_id,
		lease_until = now() + $3 * interval '1 millisecond', started_at = coalesce(j.started_at, now()),
		updated_at = now()
	FROM numbered n
	WHERE j.id = n.id
	RETURNING ${JOB_COLUMNS.split(',').map((column) => `j.${column.trim()}`).join(', ')},
		n.previous_attempt_id, n.expired, n.seq AS lease_order_seq, n.priority AS lease_order_priority, n.run_at AS lease_order_run_at
), closed_attempts AS (
	UPDATE ${s}.job_attempts a
	SET finished_at = now(), outcome = 'lease_expired'
	WHERE a.attempt_id IN (
		SELECT previous_attempt_id FROM leased WHERE expired
		UNION ALL SELECT previous_attempt_id FROM exhausted_jobs
	) AND a.outcome IS NULL
	RETURNING 1
), new_attempts AS (
	INSERT INTO ${s}.job_attempts (attempt_id, job_id, attempt, workflow_id, execution_id, started_at, lease_until)
	SELECT attempt_id, id, attempts, $6, $7, now(), lease_until FROM leased
	RETURNING 1
)
SELECT l.*, (SELECT count(*) FROM exhausted_jobs) AS exhausted_count
FROM leased l
ORDER BY l.expired DESC, l.lease_order_priority DESC, l.lease_order_run_at, l.lease_order_seq`,
		values: [params.queue, params.limit, params.leaseMs, params.attemptIds, params.slots, params.workflowId, params.executionId],
	};
}

/** Live running jobs of a queue, for the concurrency limit (taken under the queue's lock). */
export function runningCountQuery(s: string, queue: string): SqlQuery {
	return {
		text: `SELECT count(*)::int AS running FROM ${s}.jobs WHERE queue = $1 AND status = 'running' AND lease_until >= now()`,
		values: [queue],
	};
}

export function extendLeaseQuery(s: string, rows: Array<{ ord: number; job_id: string; attempt_id: string; lease_ms: number }>): SqlQuery {
	return {
		text: `
WITH input AS (
	SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(ord int, job_id uuid, attempt_id uuid, lease_ms bigint)
), extended AS (
	UPDATE ${s}.jobs j
	SET lease_until = now() + x.lease_ms * interval '1 millisecond', updated_at = now()
	FROM input x
	WHERE j.id = x.job_id AND j.attempt_id = x.attempt_id AND j.status = 'running'
	RETURNING x.ord, j.id, j.attempt_id, j.lease_until
)
SELECT x.ord, e.id IS NOT NULL AS extended, e.lease_until,
	cur.status AS current_status, cur.attempt_id AS current_attempt_id
FROM input x
LEFT JOIN extended e ON e.ord = x.ord
LEFT JOIN ${s}.jobs cur ON e.ord IS NULL AND cur.id = x.job_id
ORDER BY x.ord`,
		values: [JSON.stringify(rows)],
	};
}
