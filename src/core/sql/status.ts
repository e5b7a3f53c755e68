import { JOB_COLUMNS, type SqlQuery } from './types';

export function jobsWithTokenQuery(s: string, jobIds: string[]): SqlQuery {
	return {
		text: `SELECT ${JOB_COLUMNS}, status_token_hash FROM ${s}.jobs WHERE id = ANY($1::uuid[])`,
		values: [jobIds],
	};
}

export function jobsByIdQuery(s: string, jobIds: string[]): SqlQuery {
	return {
		text: `SELECT ${JOB_COLUMNS} FROM ${s}.jobs WHERE id = ANY($1::uuid[])`,
		values: [jobIds],
	};
}

export function attemptsQuery(s: string, jobIds: string[]): SqlQuery {
	return {
		text: `
SELECT attempt_id, job_id, attempt, workflow_id, execution_id, started_at, lease_until, finished_at, outcome,
	error_code, error_message
FROM ${s}.job_attempts WHERE job_id = ANY($1::uuid[]) ORDER BY job_id, attempt, started_at`,
		values: [jobIds],
	};
}

/**
 * Queue health without counting finished rows: live counts come from the small partial
 * indexes (queued, running, failed), terminal totals from job_counts.
 */
export function statsQuery(s: string, queue: string | null): SqlQuery {
	return {
		text: `
WITH queues AS (
	SELECT DISTINCT queue FROM ${s}.job_counts WHERE $1::text IS NULL OR queue = $1
	UNION
	SELECT $1::text WHERE $1::text IS NOT NULL
	UNION
	SELECT q.queue FROM (
		SELECT DISTINCT queue FROM ${s}.jobs WHERE status IN ('queued', 'running') AND $1::text IS NULL
	) q
)
SELECT q.queue,
	(SELECT count(*) FROM ${s}.jobs j WHERE j.queue = q.queue AND j.status = 'queued')::bigint AS queued,
	(SELECT count(*) FROM ${s}.jobs j WHERE j.queue = q.queue AND j.status = 'queued' AND j.run_at <= now())::bigint AS ready,
	(SELECT count(*) FROM ${s}.jobs j WHERE j.queue = q.queue AND j.status = 'queued' AND j.attempts > 0)::bigint AS retrying,
	(SELECT count(*) FROM ${s}.jobs j WHERE j.queue = q.queue AND j.status = 'running')::bigint AS running,
	(SELECT count(*) FROM ${s}.jobs j WHERE j.queue = q.queue AND j.status = 'running' AND j.lease_until < now())::bigint AS running_expired,
	(SELECT extract(epoch FROM now() - min(j.run_at)) FROM ${s}.jobs j WHERE j.queue = q.queue AND j.status = 'queued' AND j.run_at <= now()) AS oldest_ready_age_seconds,
	(SELECT extract(epoch FROM now() - min(j.created_at)) FROM ${s}.jobs j WHERE j.queue = q.queue AND j.status = 'queued') AS oldest_queued_age_seconds,
	coalesce((SELECT sum(n) FROM ${s}.job_counts c WHERE c.queue = q.queue AND c.status = 'done'), 0)::bigint AS done,
	coalesce((SELECT sum(n) FROM ${s}.job_counts c WHERE c.queue = q.queue AND c.status = 'failed'), 0)::bigint AS failed,
	coalesce((SELECT sum(n) FROM ${s}.job_counts c WHERE c.queue = q.queue AND c.status = 'cancelled'), 0)::bigint AS cancelled
FROM queues q
ORDER BY q.queue`,
		values: [queue],
	};
}

export interface RequeueSelection {
	jobIds: string[] | null;
	queue: string | null;
	errorCode: string | null;
	errorClass: string | null;
	failedAfter: string | null;
	failedBefore: string | null;
	includeCancelled: boolean;
	limit: number;
	additionalAttempts: number;
}

/** Deliberate replay of dead-lettered (and optionally cancelled) jobs. Never touches live jobs. */
export function requeueQuery(s: string, selection: RequeueSelection): SqlQuery {
	return {
		text: `
WITH picked AS (
	SELECT id FROM ${s}.jobs
	WHERE (status = 'failed' OR ($7 AND status = 'cancelled'))
		AND ($1::uuid[] IS NULL OR id = ANY($1::uuid[]))
		AND ($2::text IS NULL OR queue = $2)
		AND ($3::text IS NULL OR error_code = $3)
		AND ($4::text IS NULL OR error_class = $4)
		AND ($5::timestamptz IS NULL OR finished_at >= $5)
		AND ($6::timestamptz IS NULL OR finished_at < $6)
	ORDER BY finished_at, seq
	LIMIT $8
	FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE ${s}.jobs j
SET status = 'queued', run_at = now(), lease_until = NULL, finished_at = NULL, updated_at = now(),
	max_attempts = j.attempts + $9, error_code = NULL, error_message = NULL, error_class = NULL,
	error_node = NULL, error_workflow = NULL, error_execution = NULL
FROM picked p
WHERE j.id = p.id
RETURNING j.id, j.queue, j.status, j.attempts, j.max_attempts`,
		values: [
			selection.jobIds,
			selection.queue,
			selection.errorCode,
			selection.errorClass,
			selection.failedAfter,
			selection.failedBefore,
			selection.includeCancelled,
			selection.limit,
			selection.additionalAttempts,
		],
	};
}

/** Cancels queued or running jobs; a running job's worker then gets Lease Lost. */
export function cancelQuery(s: string, jobIds: string[], reason: string | null): SqlQuery {
	return {
		text: `
WITH cancelled AS (
	UPDATE ${s}.jobs j
	SET status = 'cancelled', lease_until = NULL, finished_at = now(), updated_at = now(),
		error_code = 'cancelled', error_message = $2, error_class = 'discarded'
	WHERE j.id = ANY($1::uuid[]) AND j.status IN ('queued', 'running')
	RETURNING j.id, j.attempt_id, j.status
), closed AS (
	UPDATE ${s}.job_attempts a SET finished_at = now(), outcome = 'cancelled'
	FROM cancelled c WHERE a.attempt_id = c.attempt_id AND a.outcome IS NULL
	RETURNING 1
)
SELECT x.id, c.id IS NOT NULL AS cancelled, coalesce(c.status, cur.status) AS status
FROM unnest($1::uuid[]) AS x(id)
LEFT JOIN cancelled c ON c.id = x.id
LEFT JOIN ${s}.jobs cur ON c.id IS NULL AND cur.id = x.id`,
		values: [jobIds, reason],
	};
}

export function purgeJobsQuery(s: string, queue: string | null, olderThanMs: number, statuses: string[], limit: number): SqlQuery {
	return {
		text: `
WITH doomed AS (
	SELECT id FROM ${s}.jobs
	WHERE status = ANY($3::text[]) AND status IN ('done', 'failed', 'cancelled')
		AND finished_at < now() - $2 * interval '1 millisecond'
		AND ($1::text IS NULL OR queue = $1)
	ORDER BY finished_at
	LIMIT $4
	FOR UPDATE SKIP LOCKED
), deleted AS (
	DELETE FROM ${s}.jobs j USING doomed d WHERE j.id = d.id RETURNING j.status
)
SELECT count(*)::int AS deleted,
	count(*) FILTER (WHERE status = 'done')::int AS done,
	count(*) FILTER (WHERE status = 'failed')::int AS failed,
	count(*) FILTER (WHERE status = 'cancelled')::int AS cancelled
FROM deleted`,
		values: [queue, olderThanMs, statuses, limit],
	};
}

export function purgeIdempotencyQuery(s: string, limit: number): SqlQuery {
	return {
		text: `
WITH doomed AS (
	SELECT scope, key FROM ${s}.idempotency_keys WHERE expires_at < now() AND status <> 'in_progress'
	LIMIT $1 FOR UPDATE SKIP LOCKED
)
DELETE FROM ${s}.idempotency_keys k USING doomed d WHERE k.scope = d.scope AND k.key = d.key`,
		values: [limit],
	};
}

/** Last attempts that ended with no recorded outcome: the external effect may or may not have happened. */
export function unknownOutcomeQuery(s: string, queue: string | null, limit: number): SqlQuery {
	return {
		text: `
SELECT a.job_id, j.queue, j.status, a.attempt, a.attempt_id, a.workflow_id, a.execution_id, a.started_at,
	a.finished_at, a.outcome, j.id AS stable_key, j.correlation_id
FROM ${s}.job_attempts a
JOIN ${s}.jobs j ON j.id = a.job_id
WHERE a.outcome = 'lease_expired' AND ($1::text IS NULL OR j.queue = $1)
ORDER BY a.started_at DESC
LIMIT $2`,
		values: [queue, limit],
	};
}
