import { cancelledJobSet } from './status';
import type { SqlQuery } from './types';

/**
 * Statements of the jobs dashboard (src/core/dashboard/). Reads never touch the payload of a
 * listed job; the story of one job reads its row, its attempts and its callback events.
 *
 * List order is newest first by (created_at, seq): created_at is the time the job was received,
 * seq breaks ties (a batch enqueue gives every job of the batch the same created_at). The cursor
 * is the last row's (created_at in microseconds since the epoch, seq), so a page boundary inside
 * a run of equal timestamps neither repeats nor skips a job.
 */

export const TERMINAL_STATUSES = ['done', 'failed', 'cancelled'] as const;
export const LIVE_STATUSES = ['queued', 'running'] as const;

/** The predicate of the partial indexes jobs_history and jobs_history_correlation (migration 0007). */
const TERMINAL = `status IN ('done', 'failed', 'cancelled')`;

/** Columns of a list entry (no payload, no result, the error message cut short). */
const LIST_COLUMNS = `j.id, j.queue, j.status, j.priority, j.attempts, j.max_attempts, j.created_at, j.updated_at,
	j.run_at, j.started_at, j.finished_at, j.lease_until, j.lease_until < now() AS lease_expired,
	j.idempotency_key, j.correlation_id, j.error_code, j.error_class, left(j.error_message, 300) AS error_message,
	j.seq, (extract(epoch FROM j.created_at) * 1000000)::bigint::text AS created_us`;

/**
 * The `as_of` of an answer, as an ISO string with microseconds: the clock once the statement's
 * snapshot is taken (an uncorrelated subquery runs once, during execution). Every job the answer
 * shows as failed finished before it, and a job that fails again after a requeue finishes after
 * it, which is what makes a requeue "of what I saw" repeatable (see requeueFailedJobs).
 */
const AS_OF = `(SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))`;

/**
 * Settings for the transaction a list or chart statement runs in. Every branch of those
 * statements is built to read a partial index (see listJobsQuery), never the table: with
 * statistics taken during a backlog the planner may still prefer a sequential scan over the
 * whole table, retained rows included, and past jit_above_cost it JIT-compiles a statement that
 * costs milliseconds to run (the reasons queue_stats has the same settings, migrations 0004 and
 * 0005). SET LOCAL ends with the transaction.
 */
/** Plans the next statement of the transaction on the indexes (two statements: a simple query). */
export function indexPlanSettingsQuery(): SqlQuery {
	return { text: 'SET LOCAL jit = off; SET LOCAL enable_seqscan = off', values: [] };
}

export interface ListJobsParams {
	/** One queue, or null for every queue. */
	queue: string | null;
	/** Statuses to list (at least one). */
	statuses: string[];
	/** created_at >= from (ISO), created_at < to. */
	from: string | null;
	to: string | null;
	/** Exact match on the job id (when it is a UUID), the idempotency key or the correlation id. */
	text: string | null;
	textIsUuid: boolean;
	/** Keyset cursor: the last row of the previous page. */
	cursor: { createdUs: string; seq: string } | null;
	limit: number;
}

/** Numbered parameters for a statement built from optional parts. */
class Params {
	readonly values: unknown[] = [];
	add(value: unknown): string {
		this.values.push(value);
		return `$${this.values.length}`;
	}
}

/**
 * Conditions every branch of the list shares (time range, cursor). `j` is the jobs row.
 * The cursor comparison is a row comparison on the index columns (created_at, seq), so it is an
 * index condition of jobs_history.
 */
function rangeConditions(p: ListJobsParams, params: Params): string[] {
	const conditions: string[] = [];
	if (p.from !== null) conditions.push(`j.created_at >= ${params.add(p.from)}::timestamptz`);
	if (p.to !== null) conditions.push(`j.created_at < ${params.add(p.to)}::timestamptz`);
	if (p.cursor !== null) {
		const us = params.add(p.cursor.createdUs);
		const seq = params.add(p.cursor.seq);
		conditions.push(
			`(j.created_at, j.seq) < (timestamptz 'epoch' + ${us}::bigint * interval '1 microsecond', ${seq}::bigint)`,
		);
	}
	return conditions;
}

function and(conditions: string[]): string {
	return conditions.map((condition) => `\n\t\tAND ${condition}`).join('');
}

/**
 * One page of jobs, newest first. The statement is assembled from the filters that are set, so
 * each branch reads through the index that matches it:
 *
 * - finished jobs (done / failed / cancelled): for each (queue, status) pair, the newest rows
 *   below the cursor from jobs_history, at most one page each, keys only (an index-only scan).
 *   Without a queue filter the queues come from jobs_history itself, one index probe per queue
 *   (a loose index scan).
 * - queued and running jobs: their keys from the partial indexes jobs_queued_claim and
 *   jobs_running, which hold only live rows (Queue Stats reads the same rows), so the cost grows
 *   with the live jobs of the selected queues, not with the retained ones.
 * - the newest keys of both make the page; only its rows are read in full (finished ones by
 *   their jobs_history key, live ones by id).
 * - text: the job id through the primary key, the idempotency key through jobs_idempotency (one
 *   probe per queue), the correlation id through jobs_history_correlation for finished jobs and
 *   the live indexes for the others; the hits are then filtered and ordered like any page.
 *
 * Returns at most `limit + 1` rows: the extra row only says whether there is a next page.
 */
export function listJobsQuery(s: string, p: ListJobsParams): SqlQuery {
	const params = new Params();
	const fetch = params.add(p.limit + 1);
	if (p.text !== null) return textSearchQuery(s, p, params, fetch);

	const terminal = p.statuses.filter((status) =>
		(TERMINAL_STATUSES as readonly string[]).includes(status),
	);
	const live = p.statuses.filter((status) => (LIVE_STATUSES as readonly string[]).includes(status));
	const ctes: string[] = [];
	const keySets: string[] = [];

	if (terminal.length > 0) {
		const queueSource =
			p.queue !== null ? `(SELECT ${params.add(p.queue)}::text AS queue) q` : 'queues q';
		if (p.queue === null) {
			ctes.push(`queues(queue) AS (
	SELECT min(j.queue) FROM ${s}.jobs j WHERE j.${TERMINAL}
	UNION ALL
	SELECT (SELECT min(j.queue) FROM ${s}.jobs j WHERE j.${TERMINAL} AND j.queue > q.queue)
	FROM queues q WHERE q.queue IS NOT NULL
)`);
		}
		const statuses = params.add(terminal);
		const range = rangeConditions(p, params);
		ctes.push(`finished_keys AS MATERIALIZED (
	SELECT k.queue, k.status, k.created_at, k.seq, NULL::uuid AS id
	FROM ${queueSource}
	CROSS JOIN unnest(${statuses}::text[]) AS st(status)
	CROSS JOIN LATERAL (
		SELECT j.queue, j.status, j.created_at, j.seq FROM ${s}.jobs j
		WHERE j.queue = q.queue AND j.status = st.status AND j.${TERMINAL}${and(range)}
		ORDER BY j.created_at DESC, j.seq DESC
		LIMIT ${fetch}
	) k
	WHERE q.queue IS NOT NULL
	ORDER BY k.created_at DESC, k.seq DESC
	LIMIT ${fetch}
)`);
		keySets.push('SELECT * FROM finished_keys');
	}

	// Live rows: their keys first, so only the rows of the page are read in full (the sort over
	// a backlog of queued jobs then carries three columns instead of twenty).
	const liveBranches = live.map((status) => {
		const conditions = [`j.status = '${status}'`];
		if (p.queue !== null) conditions.push(`j.queue = ${params.add(p.queue)}`);
		conditions.push(...rangeConditions(p, params));
		return `(SELECT j.queue, j.status, j.created_at, j.seq, j.id FROM ${s}.jobs j
		WHERE ${conditions.join('\n\t\t\tAND ')}
		ORDER BY j.created_at DESC, j.seq DESC
		LIMIT ${fetch})`;
	});
	if (liveBranches.length > 0) {
		ctes.push(`live_keys AS MATERIALIZED (
	${liveBranches.join('\n\tUNION ALL\n\t')}
)`);
		keySets.push('SELECT * FROM live_keys');
	}
	ctes.push(`page_keys AS MATERIALIZED (
	SELECT * FROM (${keySets.join(' UNION ALL ')}) k
	ORDER BY k.created_at DESC, k.seq DESC
	LIMIT ${fetch}
)`);

	return {
		text: `WITH RECURSIVE ${ctes.join(',\n')}
SELECT r.*, ${AS_OF} AS as_of FROM page_keys k
CROSS JOIN LATERAL (
	SELECT ${LIST_COLUMNS} FROM ${s}.jobs j
	WHERE k.id IS NULL AND j.queue = k.queue AND j.status = k.status AND j.${TERMINAL}
		AND j.created_at = k.created_at AND j.seq = k.seq
	UNION ALL
	SELECT ${LIST_COLUMNS} FROM ${s}.jobs j
	WHERE k.id IS NOT NULL AND j.id = k.id
) r
ORDER BY r.created_at DESC, r.seq DESC`,
		values: params.values,
	};
}

function textSearchQuery(s: string, p: ListJobsParams, params: Params, fetch: string): SqlQuery {
	const text = params.add(p.text);
	const hits: string[] = [];
	const ctes: string[] = [];
	// A parameter of its own: one parameter cannot be typed both uuid and text.
	if (p.textIsUuid)
		hits.push(`SELECT j.id FROM ${s}.jobs j WHERE j.id = ${params.add(p.text)}::uuid`);
	if (p.queue !== null) {
		hits.push(
			`SELECT j.id FROM ${s}.jobs j WHERE j.queue = ${params.add(p.queue)} AND j.idempotency_key = ${text}`,
		);
	} else {
		// Distinct queues of jobs with a key, one probe each (jobs_idempotency leads with queue).
		ctes.push(`key_queues(queue) AS (
	SELECT min(j.queue) FROM ${s}.jobs j WHERE j.idempotency_key IS NOT NULL
	UNION ALL
	SELECT (SELECT min(j.queue) FROM ${s}.jobs j WHERE j.idempotency_key IS NOT NULL AND j.queue > q.queue)
	FROM key_queues q WHERE q.queue IS NOT NULL
)`);
		hits.push(`SELECT k.id FROM key_queues q CROSS JOIN LATERAL (
		SELECT j.id FROM ${s}.jobs j WHERE j.queue = q.queue AND j.idempotency_key = ${text}
	) k WHERE q.queue IS NOT NULL`);
	}
	hits.push(`SELECT j.id FROM ${s}.jobs j WHERE j.correlation_id = ${text} AND j.${TERMINAL}`);
	for (const status of LIVE_STATUSES)
		hits.push(
			`SELECT j.id FROM ${s}.jobs j WHERE j.status = '${status}' AND j.correlation_id = ${text}`,
		);
	ctes.push(`hits AS MATERIALIZED (
	${hits.join('\n\tUNION\n\t')}
)`);

	const conditions = [
		`j.id IN (SELECT id FROM hits)`,
		`j.status = ANY(${params.add(p.statuses)}::text[])`,
	];
	if (p.queue !== null) conditions.push(`j.queue = ${params.add(p.queue)}`);
	conditions.push(...rangeConditions(p, params));
	return {
		text: `WITH RECURSIVE ${ctes.join(',\n')}
SELECT ${LIST_COLUMNS}, ${AS_OF} AS as_of FROM ${s}.jobs j
WHERE ${conditions.join('\n\tAND ')}
ORDER BY j.created_at DESC, j.seq DESC
LIMIT ${fetch}`,
		values: params.values,
	};
}

/**
 * Jobs finished (done) and failed per queue and minute, from `since` (at most the last hour) up
 * to now, read through jobs_finished (finished_at, terminal rows only). The cost is the number
 * of jobs finished in the window, so a refreshing page asks only for the last minutes.
 */
export function finishedPerMinuteQuery(s: string, since: string): SqlQuery {
	return {
		text: `
SELECT j.queue, (extract(epoch FROM date_trunc('minute', j.finished_at)))::bigint AS minute,
	count(*) FILTER (WHERE j.status = 'done')::int AS done,
	count(*) FILTER (WHERE j.status = 'failed')::int AS failed
FROM ${s}.jobs j
WHERE j.status IN ('done', 'failed')
	AND j.finished_at >= greatest($1::timestamptz, date_trunc('minute', now()) - interval '59 minutes')
GROUP BY 1, 2
ORDER BY 1, 2`,
		values: [since],
	};
}

/** The statement clock, for the time axis of the chart. */
export function clockQuery(): SqlQuery {
	return {
		text: `SELECT ${AS_OF} AS as_of, (extract(epoch FROM date_trunc('minute', now())))::bigint AS minute`,
		values: [],
	};
}

/**
 * Everything the story of one job shows, in one statement: the job (payload and result as text,
 * cut to `previewChars`), its newest `maxAttempts` attempts with their checkpoints, and its
 * job-finished callback events (see completeQuery: jobs in the callback queue whose idempotency
 * key is `job_<id>_<status>_<attempts>`) with their delivery attempts. The event keys are
 * computed from the job's attempt count, so they are found through jobs_idempotency.
 */
export function jobStoryQuery(
	s: string,
	jobId: string,
	callbackQueue: string,
	previewChars: number,
	maxAttempts: number,
): SqlQuery {
	const attemptJson = (alias: string) => `json_build_object(
		'attempt_id', ${alias}.attempt_id, 'attempt', ${alias}.attempt, 'workflow_id', ${alias}.workflow_id,
		'execution_id', ${alias}.execution_id, 'started_at', ${alias}.started_at, 'lease_until', ${alias}.lease_until,
		'finished_at', ${alias}.finished_at, 'outcome', ${alias}.outcome, 'error_code', ${alias}.error_code,
		'error_message', ${alias}.error_message, 'checkpoint', ${alias}.checkpoint, 'checkpoint_at', ${alias}.checkpoint_at)`;
	return {
		text: `
SELECT j.id, j.queue, j.status, j.priority, j.attempts, j.max_attempts, j.attempt_id, j.created_at, j.updated_at,
	j.run_at, j.started_at, j.finished_at, j.lease_until, j.lease_until < now() AS lease_expired,
	j.idempotency_key, j.correlation_id, j.callback_url, j.ordering_key,
	j.error_code, j.error_message, j.error_class, j.error_node, j.error_workflow, j.error_execution,
	char_length(p.payload) AS payload_chars, left(p.payload, $2) AS payload_preview,
	char_length(p.result) AS result_chars, left(p.result, $2) AS result_preview,
	(SELECT count(*)::int FROM ${s}.job_attempts a WHERE a.job_id = j.id) AS attempts_total,
	(SELECT coalesce(json_agg(${attemptJson('a')} ORDER BY a.attempt, a.started_at), '[]'::json)
	 FROM (SELECT * FROM ${s}.job_attempts a WHERE a.job_id = j.id
	       ORDER BY a.attempt DESC, a.started_at DESC LIMIT $3) a) AS attempt_rows,
	(SELECT coalesce(json_agg(json_build_object(
			'job_id', c.id, 'event_id', c.idempotency_key, 'event_type', c.payload->>'event_type',
			'destination', c.payload->>'destination', 'status', c.status, 'attempts', c.attempts,
			'max_attempts', c.max_attempts, 'created_at', c.created_at, 'run_at', c.run_at,
			'finished_at', c.finished_at, 'error_code', c.error_code, 'error_message', c.error_message,
			'deliveries', (SELECT coalesce(json_agg(${attemptJson('d')} ORDER BY d.attempt, d.started_at), '[]'::json)
				FROM (SELECT * FROM ${s}.job_attempts d WHERE d.job_id = c.id
				      ORDER BY d.attempt DESC, d.started_at DESC LIMIT $3) d)
		) ORDER BY c.created_at, c.seq), '[]'::json)
	 FROM ${s}.jobs c
	 WHERE c.queue = $4 AND c.idempotency_key = ANY (ARRAY(
		SELECT 'job_' || j.id || '_' || st.status || '_' || n
		FROM unnest(ARRAY['done', 'failed']) AS st(status),
			generate_series(greatest(0, j.attempts - $3), j.attempts) AS n))) AS callback_rows,
	${AS_OF} AS as_of
FROM ${s}.jobs j
CROSS JOIN LATERAL (SELECT j.payload::text AS payload, j.result::text AS result) p
WHERE j.id = $1::uuid`,
		values: [jobId, previewChars, maxAttempts, callbackQueue],
	};
}

/**
 * Cancels the listed jobs that are still queued (nothing else: a running job keeps its lease),
 * and returns those it cancelled. The status of the others is read by statusesQuery after it:
 * a read in this statement would see a job as it was when the statement began, so a job that a
 * lease took while the cancel waited for its row would be answered as still queued.
 */
export function cancelQueuedQuery(s: string, jobIds: string[], reason: string): SqlQuery {
	return {
		text: `
UPDATE ${s}.jobs j
SET ${cancelledJobSet('$2')}
WHERE j.id = ANY($1::uuid[]) AND j.status = 'queued'
RETURNING j.id, j.status, j.queue`,
		values: [jobIds, reason],
	};
}
