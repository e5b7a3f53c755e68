import { closeAttemptsSql, runningAttemptColumns } from './attempts';
import { JOB_COLUMN_NAMES, JOB_COLUMNS, resultColumns, type SqlQuery } from './types';

/**
 * Only the id and token hash: the status check reads the same few bytes whether the job
 * exists or not, so answering a wrong token takes as long as answering an unknown id (reading
 * the whole row, payload included, would make a known id measurably slower).
 */
export function tokenHashesQuery(s: string, jobIds: string[]): SqlQuery {
	return {
		text: `SELECT id, status_token_hash FROM ${s}.jobs WHERE id = ANY($1::uuid[])`,
		values: [jobIds],
		prepare: true,
	};
}

/** Jobs with their attempt timelines, for lookups whose token matched. */
export function statusViewsQuery(s: string, jobIds: string[]): SqlQuery {
	return {
		text: `
SELECT ${resultColumns(JOB_COLUMN_NAMES, 'j')},
	(SELECT coalesce(json_agg(json_build_object(
		'attempt_id', a.attempt_id, 'job_id', a.job_id, 'attempt', a.attempt, 'workflow_id', a.workflow_id,
		'execution_id', a.execution_id, 'started_at', a.started_at, 'lease_until', a.lease_until,
		'finished_at', a.finished_at, 'outcome', a.outcome, 'error_code', a.error_code,
		'error_message', a.error_message) ORDER BY a.attempt, a.started_at), '[]'::json)
	 FROM ${s}.job_attempts a WHERE a.job_id = j.id) AS attempt_rows
FROM ${s}.jobs j WHERE j.id = ANY($1::uuid[])`,
		values: [jobIds],
		prepare: true,
	};
}

export function jobsByIdQuery(s: string, jobIds: string[]): SqlQuery {
	return {
		text: `SELECT ${JOB_COLUMNS} FROM ${s}.jobs WHERE id = ANY($1::uuid[])`,
		values: [jobIds],
		prepare: true,
	};
}

export function attemptsQuery(s: string, jobIds: string[]): SqlQuery {
	return {
		text: `
SELECT attempt_id, job_id, attempt, workflow_id, execution_id, started_at, lease_until, finished_at, outcome,
	error_code, error_message
FROM ${s}.job_attempts WHERE job_id = ANY($1::uuid[]) ORDER BY job_id, attempt, started_at`,
		values: [jobIds],
		prepare: true,
	};
}

/**
 * Queue health without counting finished rows. The statement lives in the schema as the
 * function queue_stats (migration 0004), declared `SET jit = off` so that it is never
 * JIT-compiled: one queue reads that queue's queued and running rows once each, from their
 * partial indexes, and sums the job_counts slots; NULL does the same for every queue, grouped.
 */
export function statsQuery(s: string, queue: string | null): SqlQuery {
	return {
		text: `SELECT * FROM ${s}.queue_stats($1::text)`,
		values: [queue],
		prepare: true,
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

/**
 * Deliberate replay of dead-lettered (and optionally cancelled) jobs. Never touches live jobs.
 * By filter it answers the jobs it replayed; by ids, one row per id, `requeued` false (with the
 * job's current status, or none for an unknown id) for a job it did not replay.
 */
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
), requeued AS (
	UPDATE ${s}.jobs j
	SET status = 'queued', run_at = now(), lease_until = NULL, finished_at = NULL, updated_at = now(),
		max_attempts = j.attempts + $9, error_code = NULL, error_message = NULL, error_class = NULL,
		error_node = NULL, error_workflow = NULL, error_execution = NULL
	FROM picked p
	WHERE j.id = p.id
	RETURNING j.id, j.queue, j.status, j.attempts, j.max_attempts
)
SELECT r.id, r.queue, r.status, r.attempts, r.max_attempts, true AS requeued
FROM requeued r
WHERE $1::uuid[] IS NULL
UNION ALL
SELECT x.id, coalesce(r.queue, cur.queue), coalesce(r.status, cur.status),
	coalesce(r.attempts, cur.attempts), coalesce(r.max_attempts, cur.max_attempts),
	r.id IS NOT NULL
FROM unnest($1::uuid[]) AS x(id)
LEFT JOIN requeued r ON r.id = x.id
LEFT JOIN ${s}.jobs cur ON r.id IS NULL AND cur.id = x.id`,
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

/**
 * What a cancel writes on a job (Cancel, and the dashboard's cancel of queued jobs): finished
 * now, with `reason` (a parameter placeholder) as its error message, class discarded.
 */
export function cancelledJobSet(reason: string): string {
	return `status = 'cancelled', lease_until = NULL, finished_at = now(), updated_at = now(),
		error_code = 'cancelled', error_message = ${reason}, error_class = 'discarded'`;
}

/**
 * Cancels queued or running jobs; a running job's worker then gets Lease Lost. The jobs are
 * locked first, so the statement knows which were running: only their attempts end here (a
 * queued job's last attempt already has its record). `target` reads the newest version of each
 * job once its lock is granted, while the UPDATE scans the statement's snapshot and re-checks
 * its WHERE on the newest version only when the row changed since; so the UPDATE must not
 * compare the status with `target`'s (a lease that committed while the cancel waited would make
 * them differ, and the job would not be cancelled), and takes the previous status from `target`.
 */
export function cancelQuery(s: string, jobIds: string[], reason: string | null): SqlQuery {
	return {
		text: `
WITH target AS MATERIALIZED (
	SELECT j.id, j.status AS previous_status FROM ${s}.jobs j
	WHERE j.id = ANY($1::uuid[]) AND j.status IN ('queued', 'running')
	FOR NO KEY UPDATE
), cancelled AS (
	UPDATE ${s}.jobs j
	SET ${cancelledJobSet('$2')}
	FROM target t
	WHERE j.id = ANY($1::uuid[]) AND j.id = t.id AND j.status IN ('queued', 'running')
	RETURNING j.id, j.queue, j.attempt_id, j.attempts, j.status, t.previous_status, ${runningAttemptColumns('j')}
), closed AS (
	${closeAttemptsSql(
		s,
		`SELECT attempt_id, id, attempts, ${runningAttemptColumns('c')}, 'cancelled', NULL::text, NULL::text
		FROM cancelled c WHERE c.previous_status = 'running'`,
	)}
)
SELECT x.id, c.id IS NOT NULL AS cancelled, coalesce(c.status, cur.status) AS status, c.queue
FROM unnest($1::uuid[]) AS x(id)
LEFT JOIN cancelled c ON c.id = x.id
LEFT JOIN ${s}.jobs cur ON c.id IS NULL AND cur.id = x.id`,
		values: [jobIds, reason],
	};
}

export function purgeJobsQuery(
	s: string,
	queue: string | null,
	olderThanMs: number,
	statuses: string[],
	limit: number,
): SqlQuery {
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

/**
 * Attempts that ended with no recorded outcome. With a checkpoint the attempt got that far, so
 * the external effect after it may or may not have happened; without one it never got there.
 */
export function unknownOutcomeQuery(s: string, queue: string | null, limit: number): SqlQuery {
	return {
		text: `
SELECT a.job_id, j.queue, j.status, a.attempt, a.attempt_id, a.workflow_id, a.execution_id, a.started_at,
	a.finished_at, a.outcome, a.checkpoint, a.checkpoint_at, j.id AS stable_key, j.correlation_id
FROM ${s}.job_attempt_records a
JOIN ${s}.jobs j ON j.id = a.job_id
WHERE a.outcome = 'lease_expired' AND ($1::text IS NULL OR j.queue = $1)
ORDER BY a.started_at DESC
LIMIT $2`,
		values: [queue, limit],
	};
}

/** The secret status tokens are derived from (migration 0003). */
export function tokenSecretQuery(s: string): SqlQuery {
	return {
		text: `SELECT value FROM ${s}.settings WHERE name = 'status_token_secret'`,
		values: [],
	};
}

/**
 * The status of the given jobs now (null for an unknown id), in a statement of its own: after a
 * write that left some of them unchanged, its own read of them would show them as they were when
 * it began (a dashboard requeue or cancel, a completion's Lease Lost answer).
 */
export function statusesQuery(s: string, jobIds: string[]): SqlQuery {
	return {
		text: `SELECT x.id, j.status FROM unnest($1::uuid[]) AS x(id) LEFT JOIN ${s}.jobs j ON j.id = x.id`,
		values: [jobIds],
	};
}
