import { closeAttemptsSql, runningAttemptColumns } from './attempts';
import { countTerminalSql, countedMark, queuedNotice } from './counting';
import { jsonRows } from './json';
import { cachedText } from './textCache';
import { resultColumns, type SqlQuery } from './types';

export interface CompleteRow {
	ord: number;
	job_id: string;
	attempt_id: string;
	outcome: 'succeeded' | 'failed' | 'retry' | 'release';
	/** The result, serialised as JSON (succeeded only). */
	result: string | null;
	error_code: string | null;
	error_message: string | null;
	error_class: string | null;
	error_node: string | null;
	error_workflow: string | null;
	error_execution: string | null;
	/** Retry: explicit delay (e.g. from Retry-After); release: delay before the job is due again. */
	delay_ms: number | null;
	/** Retry only (the other outcomes leave it out of the statement's input). */
	backoff_base_ms: number | null;
	backoff_max_ms: number | null;
	/** Retry without an explicit delay: a uniform random number in [0, 1) for the backoff jitter. */
	jitter: number | null;
	/** Retry without an explicit delay: the least wait (a Retry-After); left out when none. */
	min_delay_ms?: number;
}

/** The status an item moves its job to. `j` is the job row before the update. */
const NEW_STATUS = `CASE x.outcome
			WHEN 'succeeded' THEN 'done'
			WHEN 'failed' THEN 'failed'
			WHEN 'retry' THEN CASE WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'queued' END
			WHEN 'release' THEN 'queued'
		END`;

/**
 * Fenced terminal-or-retry write for a batch. Only rows whose current (id, attempt_id) match
 * and that are still running are touched; everything else comes back with `applied = false`
 * and the job's current status, which the node routes to "Lease Lost".
 *
 * Retry backoff: d = min(max, base * 2^(attempt-1)); the job is due again after a uniformly
 * random delay in [d/2, d] ("equal jitter"), or `min_delay_ms` when that is longer, unless an
 * explicit delay is given. A retry of the last allowed attempt fails the job instead
 * (error_code kept, class defaults to retryable).
 * The random number is drawn by the client (`jitter`; random() only if it is missing), so the
 * jobs to update are found by a plain join: a volatile function in the row source kept the old
 * form of this statement from being planned as one.
 *
 * Plan shape, linear in the batch size and independent of the table's size:
 * - the jobs are read through the primary key with `id = ANY($3)` (the same ids as in the
 *   JSON), whose row estimate is the number of ids. Joined on the JSON alone, the planner
 *   assumes 100 input rows (jsonb_to_recordset's fixed estimate) and, while the table is small,
 *   scans all of it for a single completion;
 * - `input` is MATERIALIZED, so `fence` is an opaque column and `j.status = x.fence` a join
 *   clause. Written as `j.status = 'running'` it let the planner start from the
 *   `jobs_running` index, whose row estimate is often 1 (statistics taken while nothing was
 *   running), in a nested loop over every running job for every item;
 * - the fence is still checked against the locked row: READ COMMITTED re-checks the whole
 *   WHERE clause, join clauses included, on a row updated concurrently;
 * - items that were not applied look their job up by primary key (the LATERAL runs only for
 *   them), so a batch of completions reads no other job.
 *
 * The attempt's record is written here, from the job row (see closeAttemptsSql), for every
 * outcome but success: a job that ends done keeps its last attempt on its row, where
 * job_attempts shows it (migration 0012), since nothing changes a done job's row again. The
 * attempt's workflow and execution id are filled from the completing execution when neither
 * the lease nor a heartbeat knew them (a Job Trigger leases before n8n has created the
 * execution that runs the job), on the job row and so in the record. An id the lease recorded
 * (Job Lease inside a workflow) is kept.
 *
 * The event id is stable for one finish (job id, status, attempt number), so redelivery keeps it.
 * When the job has a callback URL and reaches done or failed, the job-finished event is
 * inserted into the callback queue by the same statement, so it commits with the result. The
 * function job_finished_event (migration 0010) inserts it, called only for those jobs: an
 * INSERT in the statement itself would run, and fire the insert trigger, for every completion.
 * `callbacks` is a SELECT, so it runs only as far as the statement reads it; the final join
 * reads all of it (every row is needed to match its `ord`), so every event is inserted.
 *
 * A batch in which every item succeeded (merged calls included) runs a statement of its own,
 * without the other outcomes' branches (see succeededText); any other batch runs the statement
 * for all outcomes. Both answer alike. One succeeded item alone runs oneSucceededQuery, which
 * answers as they do.
 */
export function completeQuery(
	schema: string,
	s: string,
	rows: CompleteRow[],
	callbackQueue: string,
): SqlQuery {
	const allSucceeded = rows.every((row) => row.outcome === 'succeeded');
	if (allSucceeded && rows.length === 1)
		return oneSucceededQuery(schema, s, rows[0], callbackQueue);
	return {
		text: allSucceeded
			? cachedText(`complete-succeeded|${s}`, () => succeededText(schema, s))
			: cachedText(`complete|${s}`, () => anyOutcomeText(schema, s)),
		values: [jsonRows(rows, ['result']), callbackQueue, rows.map((row) => row.job_id)],
		prepare: true,
	};
}

/** The statement for any mix of outcomes (see completeQuery). */
function anyOutcomeText(schema: string, s: string): string {
	return `
WITH input AS MATERIALIZED (
	SELECT x.*, 'running'::text AS fence FROM jsonb_to_recordset($1::jsonb) AS x(
		ord int, job_id uuid, attempt_id uuid, outcome text, result jsonb, error_code text,
		error_message text, error_class text, error_node text, error_workflow text, error_execution text,
		delay_ms bigint, backoff_base_ms bigint, backoff_max_ms bigint, jitter float8, min_delay_ms bigint)
), updated AS (
	UPDATE ${s}.jobs j
	SET status = ${NEW_STATUS},
		result = CASE WHEN x.outcome = 'succeeded' THEN x.result ELSE j.result END,
		attempts = CASE WHEN x.outcome = 'release' THEN j.attempts - 1 ELSE j.attempts END,
		run_at = CASE WHEN (${NEW_STATUS}) = 'queued' THEN now() + (CASE
				WHEN x.outcome = 'retry' AND x.delay_ms IS NOT NULL THEN x.delay_ms
				WHEN x.outcome = 'retry' THEN greatest(coalesce(x.min_delay_ms, 0), (
					least(x.backoff_max_ms::float8, x.backoff_base_ms * power(2::float8, least(j.attempts - 1, 40)))
					* (0.5 + coalesce(x.jitter, random()) * 0.5))::bigint)
				ELSE coalesce(x.delay_ms, 0)
			END) * interval '1 millisecond' ELSE j.run_at END,
		lease_until = NULL,
		finished_at = CASE WHEN (${NEW_STATUS}) IN ('done', 'failed') THEN now() ELSE NULL END,
		updated_at = now(),
		error_code = CASE WHEN x.outcome IN ('failed', 'retry') THEN coalesce(x.error_code, CASE
				WHEN x.outcome = 'failed' THEN 'failed'
				WHEN (${NEW_STATUS}) = 'failed' THEN 'retries_exhausted'
				ELSE 'retry' END)
			WHEN x.outcome = 'succeeded' THEN NULL ELSE j.error_code END,
		error_message = CASE WHEN x.outcome IN ('failed', 'retry') THEN x.error_message WHEN x.outcome = 'succeeded' THEN NULL ELSE j.error_message END,
		error_class = CASE
			WHEN x.outcome = 'failed' THEN coalesce(x.error_class, 'needs_manual_review')
			WHEN x.outcome = 'retry' THEN coalesce(x.error_class, 'retryable')
			WHEN x.outcome = 'succeeded' THEN NULL ELSE j.error_class END,
		error_node = CASE WHEN x.outcome IN ('failed', 'retry') THEN x.error_node WHEN x.outcome = 'succeeded' THEN NULL ELSE j.error_node END,
		error_workflow = CASE WHEN x.outcome IN ('failed', 'retry') THEN x.error_workflow WHEN x.outcome = 'succeeded' THEN NULL ELSE j.error_workflow END,
		error_execution = CASE WHEN x.outcome IN ('failed', 'retry') THEN x.error_execution WHEN x.outcome = 'succeeded' THEN NULL ELSE j.error_execution END,
		${ATTEMPT_IDS_FROM_COMPLETION}
	FROM input x
	${FENCE}
	RETURNING x.ord, x.outcome, ${CALLBACK_EVENT_ID}, j.id, j.queue, j.status, j.attempts, j.max_attempts,
		j.attempt_id, j.run_at, j.result, j.error_code, j.error_message, j.error_class,
		j.callback_url, j.correlation_id, j.finished_at,
		${runningAttemptColumns('j')},
		CASE WHEN x.outcome = 'release' THEN j.attempts + 1 ELSE j.attempts END AS attempt_number,
		${queuedNotice(schema, 'j')}, ${countedMark(schema)}
), counted AS (
	${countTerminalSql(s, 'SELECT u.queue, u.status FROM updated u')}
), attempt_log AS (
	${closeAttemptsSql(
		s,
		`SELECT u.attempt_id, u.id, u.attempt_number, u.attempt_workflow_id, u.attempt_execution_id,
		u.attempt_started_at, u.attempt_lease_until, u.attempt_checkpoint, u.attempt_checkpoint_at,
		CASE u.outcome WHEN 'release' THEN 'released' ELSE u.outcome END,
		CASE WHEN u.outcome IN ('failed', 'retry') THEN u.error_code END,
		CASE WHEN u.outcome IN ('failed', 'retry') THEN left(u.error_message, 1000) END
	FROM updated u WHERE u.outcome <> 'succeeded'`,
	)}
), ${callbacksAndAnswer(s)}`;
}

/**
 * The statement for a batch in which every item succeeded, the usual completion: the same
 * effect on each job as anyOutcomeText's for a success (done, the result, no error, the
 * attempt kept on the job row), without the branches of the other outcomes. Those branches cost
 * every execution: the SET list's CASE expressions are compiled per execution, and the attempt
 * record's INSERT opens its table and indexes even when it writes nothing.
 */
function succeededText(schema: string, s: string): string {
	return `
WITH input AS MATERIALIZED (
	SELECT x.*, 'running'::text AS fence FROM jsonb_to_recordset($1::jsonb) AS x(
		ord int, job_id uuid, attempt_id uuid, result jsonb, error_workflow text, error_execution text)
), updated AS (
	UPDATE ${s}.jobs j
	SET status = 'done', result = x.result, lease_until = NULL, finished_at = now(), updated_at = now(),
		error_code = NULL, error_message = NULL, error_class = NULL, error_node = NULL,
		error_workflow = NULL, error_execution = NULL,
		${ATTEMPT_IDS_FROM_COMPLETION}
	FROM input x
	${FENCE}
	RETURNING x.ord, ${CALLBACK_EVENT_ID}, j.id, j.queue, j.status, j.attempts, j.max_attempts,
		j.run_at, j.result, j.error_code, j.error_message, j.error_class,
		j.callback_url, j.correlation_id, j.finished_at, ${countedMark(schema)}
), counted AS (
	${countTerminalSql(s, 'SELECT u.queue, u.status FROM updated u')}
), ${callbacksAndAnswer(s)}`;
}

/**
 * `succeededText` for one item, the usual call of a Job Complete node: the same update and the
 * same answer, from typed parameters instead of a JSON document, without its unpacking and the
 * materialised input. A JSON `null` result is stored as SQL NULL, as `jsonb_to_recordset` reads
 * it. The fence's status is the value of a subquery (an InitPlan), which no plan sees: with a
 * literal 'running', or a parameter, which a custom plan reads as a literal, the planner may start
 * from the jobs_running index when its statistics say few jobs run, and read every running job
 * for one completion (seen in EXPLAIN on a table analysed before 2,500 jobs started). Custom
 * plans are the first five executions of a prepared statement, and every execution without
 * prepared statements.
 */
function oneSucceededQuery(
	schema: string,
	s: string,
	row: CompleteRow,
	callbackQueue: string,
): SqlQuery {
	return {
		text: cachedText(`complete-one-succeeded|${s}`, () => oneSucceededText(schema, s)),
		values: [
			callbackQueue,
			row.job_id,
			row.attempt_id,
			row.result,
			row.error_workflow,
			row.error_execution,
			row.ord,
		],
		prepare: true,
	};
}

function oneSucceededText(schema: string, s: string): string {
	return `
WITH updated AS (
	UPDATE ${s}.jobs j
	SET status = 'done', result = nullif($4::jsonb, 'null'::jsonb), lease_until = NULL,
		finished_at = now(), updated_at = now(),
		error_code = NULL, error_message = NULL, error_class = NULL, error_node = NULL,
		error_workflow = NULL, error_execution = NULL,
		attempt_workflow_id = coalesce(j.attempt_workflow_id, $5::text),
		attempt_execution_id = coalesce(j.attempt_execution_id, $6::text)
	WHERE j.id = $2::uuid AND j.attempt_id = $3::uuid AND j.status = (SELECT 'running'::text)
	RETURNING ${CALLBACK_EVENT_ID}, j.id, j.queue, j.status, j.attempts, j.max_attempts,
		j.run_at, j.result, j.error_code, j.error_message, j.error_class,
		j.callback_url, j.correlation_id, j.finished_at, ${countedMark(schema)}
), counted AS (
	${countTerminalSql(s, 'SELECT u.queue, u.status FROM updated u')}
), callbacks AS MATERIALIZED (
	SELECT ${s}.job_finished_event($1, u.callback_event_id, u.id, u.queue, u.status, u.attempts,
		u.finished_at, u.correlation_id, u.callback_url, u.result, u.error_code, u.error_message,
		u.error_class) AS callback_event_id
	FROM updated u
	WHERE u.callback_url IS NOT NULL AND u.status IN ('done', 'failed')
)
SELECT $7::int AS ord, u.id IS NOT NULL AS applied, u.status, u.queue,
	${resultColumns(['attempts', 'max_attempts', 'error_code', 'error_class'], 'u')},
	CASE WHEN u.status = 'queued' THEN u.run_at END AS run_at, c.callback_event_id,
	cur.status AS current_status, cur.attempt_id AS current_attempt_id, cur.id IS NOT NULL AS job_exists
FROM (VALUES (1)) AS one (x)
LEFT JOIN updated u ON true
LEFT JOIN callbacks c ON true
LEFT JOIN LATERAL (
	SELECT cur.id, cur.status, cur.attempt_id FROM ${s}.jobs cur
	WHERE u.id IS NULL AND cur.id = $2::uuid
	OFFSET 0
) cur ON true`;
}

/** The running attempt's n8n ids, filled from the completing execution when nothing knew them. */
const ATTEMPT_IDS_FROM_COMPLETION = `attempt_workflow_id = coalesce(j.attempt_workflow_id, x.error_workflow),
		attempt_execution_id = coalesce(j.attempt_execution_id, x.error_execution)`;

/** The fence: the job, read by primary key, still running the item's attempt. */
const FENCE =
	'WHERE j.id = ANY($3::uuid[]) AND j.id = x.job_id AND j.attempt_id = x.attempt_id AND j.status = x.fence';

const CALLBACK_EVENT_ID = `('job_' || j.id || '_' || j.status || '_' || j.attempts) AS callback_event_id`;

/**
 * The last CTE of both statements and their answer: the job-finished events of the jobs with a
 * callback URL, and one row per item with what became of it. The answer has the job's run_at
 * only when it is queued again (when it is due): a finished job's is of no use, and each
 * timestamp is one more value for the client to parse.
 */
function callbacksAndAnswer(s: string): string {
	return `callbacks AS MATERIALIZED (
	SELECT u.ord, ${s}.job_finished_event($2, u.callback_event_id, u.id, u.queue, u.status, u.attempts,
		u.finished_at, u.correlation_id, u.callback_url, u.result, u.error_code, u.error_message,
		u.error_class) AS callback_event_id
	FROM updated u
	WHERE u.callback_url IS NOT NULL AND u.status IN ('done', 'failed')
)
SELECT x.ord, u.id IS NOT NULL AS applied, u.status, u.queue,
	${resultColumns(['attempts', 'max_attempts', 'error_code', 'error_class'], 'u')},
	CASE WHEN u.status = 'queued' THEN u.run_at END AS run_at, c.callback_event_id,
	cur.status AS current_status, cur.attempt_id AS current_attempt_id, cur.id IS NOT NULL AS job_exists
FROM input x
LEFT JOIN updated u ON u.ord = x.ord
LEFT JOIN callbacks c ON c.ord = x.ord
LEFT JOIN LATERAL (
	SELECT cur.id, cur.status, cur.attempt_id FROM ${s}.jobs cur
	WHERE u.ord IS NULL AND cur.id = x.job_id
	OFFSET 0
) cur ON true
ORDER BY x.ord`;
}
