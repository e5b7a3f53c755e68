import { notifyChannel } from '../identifiers';
import { closeAttemptsSql, runningAttemptColumns } from './attempts';
import { countTerminalSql, countedMark } from './counting';
import { jsonRows } from './json';
import { cachedText } from './textCache';
import { resultColumns, type SqlQuery } from './types';

/**
 * One job a lease may take: the attempt id it gets, and the lease length and n8n ids of the
 * call that asked for it. A call asking for N jobs sends N slots; calls merged into one
 * statement (see RowStatement) send all their slots, and each leased job comes back with the
 * `ord` of the slot it filled.
 */
export interface LeaseSlot {
	ord: number;
	attempt_id: string;
	lease_ms: number;
	workflow_id: string | null;
	execution_id: string | null;
}

/**
 * The limit written into the locking branches for a number of slots: the number itself up to
 * 16, then the next of a series of round numbers that grows by at most 28% per step (20,
 * 25, 32, 40, 50, 64, 80, 100, 125, 160, …, 10,000), so every size merged calls can make has a
 * prepared statement with a kept plan (a few dozen texts in all), and the sizes callers
 * usually ask for are exact. Every row the queued branch locks beyond the slots is locked for
 * nothing: it costs a WAL record and keeps the job from other leasers until the commit (a
 * lease of 100 used to lock 128).
 */
export function lockingLimit(slots: number): number {
	if (slots <= 16) return Math.max(1, slots);
	for (let decade = 10; ; decade *= 10) {
		for (const percent of ROUND_STEPS) {
			const size = (percent * decade) / 100;
			if (slots <= size) return size;
		}
	}
}

/** One decade of the series lockingLimit rounds up to, in percent (R10 preferred numbers). */
const ROUND_STEPS = [125, 160, 200, 250, 320, 400, 500, 640, 800, 1000];

/** The columns a lease returns per job (LeasedJob without `recovered`). */
const LEASED_COLUMNS = [
	'id',
	'queue',
	'payload',
	'idempotency_key',
	'priority',
	'attempts',
	'max_attempts',
	'attempt_id',
	'lease_until',
	'ordering_key',
	'correlation_id',
	'created_at',
] as const;

/**
 * The columns a lease without metadata returns per job: what running the attempt needs. The
 * queue is the caller's own. The others (key, priority, lease end, ordering key, correlation
 * id, creation time) cost a value to send and parse each, two of them timestamps.
 */
const ESSENTIAL_LEASED_COLUMNS = [
	'id',
	'payload',
	'attempts',
	'max_attempts',
	'attempt_id',
] as const;

/**
 * What a lease writes on each job it takes, from the SQL expressions of its slot.
 * statement_timestamp() is now() for a lease alone in its transaction; under a concurrency limit
 * the transaction began before it waited for the queue's lock, and that wait must not be taken
 * off the lease.
 */
function leasedSet(slot: {
	attemptId: string;
	leaseMs: string;
	workflowId: string;
	executionId: string;
}): string {
	return `status = 'running', attempts = j.attempts + 1, attempt_id = ${slot.attemptId},
		lease_until = statement_timestamp() + ${slot.leaseMs} * interval '1 millisecond',
		started_at = coalesce(j.started_at, statement_timestamp()),
		updated_at = statement_timestamp(), attempt_started_at = statement_timestamp(),
		attempt_lease_until = statement_timestamp() + ${slot.leaseMs} * interval '1 millisecond',
		attempt_workflow_id = ${slot.workflowId}, attempt_execution_id = ${slot.executionId}, attempt_checkpoint = NULL,
		attempt_checkpoint_at = NULL`;
}

/**
 * Whether the lease of a running job (`alias`) has ended. jobs_running holds the end the
 * attempt's lease was given (attempt_lease_until, migration 0018), which a heartbeat changes only
 * to shorten it, so an extending heartbeat changes no indexed column and can be a HOT update;
 * the index finds the attempts past that end, and lease_until says whether a heartbeat extended
 * the lease. Every statement keeps attempt_lease_until <= lease_until for a running job.
 */
function leaseEnded(alias: string): string {
	return `${alias}.attempt_lease_until < now() AND ${alias}.lease_until < now()`;
}

/** LEASED_SET from the slot a job was assigned (`a`: a row of the statement's slots). */
const LEASED_SET = leasedSet({
	attemptId: 'a.new_attempt_id',
	leaseMs: 'a.lease_ms',
	workflowId: 'a.workflow_id',
	executionId: 'a.execution_id',
});

/**
 * Claims up to one job per slot of one queue in one statement.
 *
 * Candidates come from two branches, each matching one partial index: due queued jobs
 * (jobs_queued_claim) and running jobs whose lease has expired (jobs_running, by queue and the
 * end the attempt's lease was given, so only the attempts past it are read; see leaseEnded). A single
 * `status = 'queued' OR (status = 'running' AND lease_until < now())` predicate would match
 * neither index and fall back to scanning every live row of the queue.
 *
 * A job with an ordering key is a candidate only while no job with that key is running and no
 * earlier one is queued (see orderingKeyFree), so jobs sharing a key run one at a time, in
 * enqueue order. At most `$8` queued jobs are taken (a concurrency limit's free slots; the
 * number of slots otherwise); expired jobs are taken over in the slots left.
 *
 * Expired jobs that have used all their attempts are failed with `lease_expired` in the same
 * statement instead of being leased again, and those with a callback URL get their job-finished
 * event in the callback queue (`$9`), as a failure by Job Complete does. `callbacks` is a SELECT
 * (the function inserts), which runs only if the statement reads it: the final WHERE reads it
 * once, before any row, even when nothing is leased. The candidate CTE is MATERIALIZED so the
 * planner cannot re-run the LIMITed, locking subquery once per outer row.
 *
 * The slots are arrays (`$3`…`$7`, one element per slot), so the text does not depend on how
 * many calls a statement serves. Candidates are numbered in lease order and the n-th takes the
 * n-th slot: merged calls get their jobs in the order they asked, each in lease order.
 *
 * The limit of the two locking branches is written into the text (see lockingLimit). As a
 * parameter, the planner has to assume it selects 10% of the rows when it plans the statement
 * once for all values (a generic plan); that plan then looks far more expensive than one
 * planned for the actual value, so PostgreSQL re-planned every lease of a prepared statement,
 * about as costly as running it. With the limit in the text the generic plan is as good as a
 * custom one, and is kept. `$2` is the number of slots, which may be below the locking limit.
 *
 * The `expired` branch reads the queue as a subquery's value, as probeAndQueued's probe does and
 * for the same reason: every lease under a concurrency limit runs this statement.
 *
 * The two UPDATEs find their jobs with `id = ANY(ARRAY(…))` besides the join: the join alone
 * let the planner read the leased jobs by scanning the whole table (a hash join, chosen for a
 * batch of 100 on a table of a few thousand rows, and kept as the prepared statement's plan as
 * the table grew); an array of ids is read through the primary key, like completeQuery's.
 *
 * Without `waitForFlush`, the statement sets synchronous_commit off for its own transaction
 * (set_config's third argument), so its commit does not wait for the WAL flush (see
 * StoreOptions.durableLeases for what that trades). It is evaluated only when a job was leased.
 *
 * A job failed because its lease expired on its last attempt frees its ordering key and its
 * slot of a concurrency limit: the statement then notifies its queue, at its commit, as a
 * finish notice (finishNotices.ts) would; like the callbacks, the condition of the final
 * WHERE is uncorrelated, so it is evaluated once, whether or not a job was leased. Only these
 * rare leases take the notify lock.
 */
export function leaseQuery(
	schema: string,
	s: string,
	queue: string,
	slots: LeaseSlot[],
	options: LeaseOptions & { queuedSlots?: number; callbackQueue: string },
): SqlQuery {
	return leaseStatement(
		`lease|${s}`,
		queue,
		slots,
		options,
		[options.queuedSlots ?? slots.length, options.callbackQueue],
		(limit, columns) => `
WITH queued AS (
	SELECT j.id, j.priority, j.run_at, j.seq, j.attempt_id AS previous_attempt_id, false AS expired
	FROM ${s}.jobs j
	WHERE j.queue = $1 AND j.status = 'queued' AND j.run_at <= now()
		AND ${orderingKeyFree(s)}
	ORDER BY j.priority DESC, j.run_at, j.seq
	LIMIT ${limit}
	FOR NO KEY UPDATE SKIP LOCKED
), expired AS (
	SELECT j.id, j.priority, j.run_at, j.seq, j.attempt_id AS previous_attempt_id, true AS expired,
		j.attempts >= j.max_attempts AS exhausted, ${runningAttemptColumns('j')}
	FROM ${s}.jobs j
	WHERE j.queue = (SELECT $1::text) AND j.status = 'running' AND ${leaseEnded('j')}
	ORDER BY j.seq
	LIMIT ${limit}
	FOR NO KEY UPDATE SKIP LOCKED
), candidates AS MATERIALIZED (
	SELECT id, priority, run_at, seq, previous_attempt_id, expired FROM (
		(SELECT id, priority, run_at, seq, previous_attempt_id, expired FROM queued
		ORDER BY priority DESC, run_at, seq
		LIMIT $8)
		UNION ALL
		SELECT id, priority, run_at, seq, previous_attempt_id, expired FROM expired WHERE NOT exhausted
	) c
	ORDER BY expired DESC, priority DESC, run_at, seq
	LIMIT $2
), numbered AS (
	SELECT c.*, row_number() OVER (ORDER BY c.expired DESC, c.priority DESC, c.run_at, c.seq) AS slot
	FROM candidates c
), assigned AS (
	SELECT n.id, n.previous_attempt_id, n.expired, n.slot,
		($3::int[])[n.slot] AS ord, ($4::uuid[])[n.slot] AS new_attempt_id,
		($5::bigint[])[n.slot] AS lease_ms, ($6::text[])[n.slot] AS workflow_id,
		($7::text[])[n.slot] AS execution_id
	FROM numbered n
), exhausted_jobs AS (
	UPDATE ${s}.jobs j
	SET status = 'failed', lease_until = NULL, finished_at = now(), updated_at = now(),
		error_code = 'lease_expired',
		error_message = 'The lease expired on the last allowed attempt (the worker died or ran longer than its lease)',
		error_class = 'retryable', error_node = NULL, error_workflow = j.attempt_workflow_id,
		error_execution = j.attempt_execution_id
	FROM expired e
	WHERE j.id = ANY(ARRAY(SELECT id FROM expired WHERE exhausted)) AND e.exhausted AND j.id = e.id
	RETURNING j.id, j.attempts, e.previous_attempt_id, ${runningAttemptColumns('j')},
		j.queue, j.finished_at, j.correlation_id, j.callback_url, j.error_code, j.error_message,
		j.error_class, ${countedMark(schema)}
), callbacks AS MATERIALIZED (
	SELECT ${s}.job_finished_event($9, 'job_' || x.id || '_failed_' || x.attempts, x.id, x.queue,
		'failed', x.attempts, x.finished_at, x.correlation_id, x.callback_url, NULL, x.error_code,
		x.error_message, x.error_class) AS callback_event_id
	FROM exhausted_jobs x
	WHERE x.callback_url IS NOT NULL
), counted AS (
	${countTerminalSql(s, `SELECT $1::text, 'failed'::text FROM exhausted_jobs`)}
), leased AS (
	UPDATE ${s}.jobs j
	SET ${LEASED_SET}
	FROM assigned a
	WHERE j.id = ANY(ARRAY(SELECT id FROM candidates)) AND j.id = a.id
	RETURNING ${columns.map((column) => `j.${column}`).join(', ')},
		a.previous_attempt_id, a.expired, a.slot, a.ord, ${countedMark(schema)}
), closed_attempts AS (
	${closeAttemptsSql(
		s,
		`SELECT l.previous_attempt_id, l.id, l.attempts - 1, ${runningAttemptColumns('e')}, 'lease_expired',
			NULL::text, NULL::text
		FROM leased l JOIN expired e ON e.id = l.id WHERE l.expired
		UNION ALL
		SELECT x.previous_attempt_id, x.id, x.attempts, ${runningAttemptColumns('x')}, 'lease_expired', NULL, NULL
		FROM exhausted_jobs x`,
	)}
)
SELECT ${resultColumns(columns)}, ord, expired
FROM leased${commitWithoutFlush(options)}
WHERE (SELECT count(*) FROM callbacks) >= 0
	AND (SELECT count(pg_notify('${notifyChannel(schema)}', $1::text)) FROM (SELECT FROM exhausted_jobs LIMIT 1) x) >= 0
ORDER BY slot`,
	);
}

interface LeaseOptions {
	waitForFlush: boolean;
	/** Return every column of LEASED_COLUMNS (default); false: only ESSENTIAL_LEASED_COLUMNS. */
	metadata?: boolean;
}

/**
 * A lease statement: its text for the locking limit of `slots` (kept per `key`, the limit and
 * the commit mode, see lockingLimit) and the parameters both lease statements take: the
 * queue, the number of slots and the slot arrays, then the statement's own (`$8` on).
 */
function leaseStatement(
	key: string,
	queue: string,
	slots: LeaseSlot[],
	options: LeaseOptions,
	ownValues: unknown[],
	text: (limit: number, columns: readonly string[]) => string,
): SqlQuery {
	const limit = lockingLimit(slots.length);
	const metadata = options.metadata ?? true;
	const columns = metadata ? LEASED_COLUMNS : ESSENTIAL_LEASED_COLUMNS;
	return {
		text: cachedText(`${key}|${limit}|${options.waitForFlush}|${metadata}`, () =>
			text(limit, columns),
		),
		values: [
			queue,
			slots.length,
			slots.map((slot) => slot.ord),
			slots.map((slot) => slot.attempt_id),
			slots.map((slot) => slot.lease_ms),
			slots.map((slot) => slot.workflow_id),
			slots.map((slot) => slot.execution_id),
			...ownValues,
		],
		prepare: true,
	};
}

/**
 * A queued job whose ordering key has no job running and no earlier job queued (`j`: the job).
 * A running job blocks the key whatever its seq: a job requeued after a later one started, or
 * one whose enqueue committed after a later one's was leased, has the lower seq. The statement's
 * snapshot can still miss a lease of the key that committed while it ran; the unique index
 * jobs_ordering_running (migration 0016) refuses that second lease, and lease() runs again.
 */
function orderingKeyFree(s: string): string {
	// Two checks, each an index range: earlier jobs through jobs_ordering (queue, key, seq), a
	// running one through jobs_ordering_running (its predicate spelled out so it applies). One
	// check with `status = 'running' OR seq < j.seq` would read every queued job of the key.
	// OFFSET 0 keeps the second a probe per candidate: without it the planner may hash it instead,
	// reading the key of every running job of every queue once per lease (through jobs_running).
	return `(j.ordering_key IS NULL OR (NOT EXISTS (
			SELECT 1 FROM ${s}.jobs p
			WHERE p.queue = j.queue AND p.ordering_key = j.ordering_key
				AND p.status IN ('queued', 'running') AND p.seq < j.seq)
		AND NOT EXISTS (
			SELECT 1 FROM ${s}.jobs r
			WHERE r.queue = j.queue AND r.ordering_key = j.ordering_key
				AND r.ordering_key IS NOT NULL AND r.status = 'running'
			OFFSET 0)))`;
}

/**
 * The first two CTEs of the usual lease, for one slot or many: `probe`, whether a running job of
 * the queue (`$1`) has an expired lease, and `queued`, up to `limit` due queued jobs (`columns`
 * of them) that no ordering key holds back, locked in lease order, none while the probe found one.
 *
 * The probe reads the queue as a subquery's value, which no plan sees. As `$1` the generic plan
 * estimated the running jobs of an average queue, so while one queue had thousands running, the
 * generic plan of every other queue's lease looked several times costlier than a plan for its
 * actual queue, and PostgreSQL planned each lease anew (about 0.8 ms, more than the lease).
 */
function probeAndQueued(s: string, columns: string, limit: number): string {
	return `probe AS MATERIALIZED (
	SELECT EXISTS (
		SELECT 1 FROM ${s}.jobs e WHERE e.queue = (SELECT $1::text) AND e.status = 'running' AND ${leaseEnded('e')}
	) AS lease_expired
), queued AS (
	SELECT ${columns}
	FROM ${s}.jobs j
	WHERE j.queue = $1 AND j.status = 'queued' AND j.run_at <= now()
		AND ${orderingKeyFree(s)}
		AND NOT (SELECT lease_expired FROM probe)
	ORDER BY j.priority DESC, j.run_at, j.seq
	LIMIT ${limit}
	FOR NO KEY UPDATE SKIP LOCKED
)`;
}

/** The FROM item that commits a lease without waiting for the WAL flush, unless asked to wait. */
function commitWithoutFlush(options: LeaseOptions): string {
	return options.waitForFlush
		? ''
		: `, (SELECT set_config('synchronous_commit', 'off', true)) AS commit_without_flush`;
}

/**
 * The usual lease: due queued jobs only, while no lease of the queue has expired. It is
 * leaseQuery without the branches that recover expired leases (their locking scan, the
 * exhausted jobs' failure, its count and the attempt records), which every execution of
 * leaseQuery plans, opens and initialises although they rarely have a row to work on.
 *
 * When a running job of the queue has an expired lease, it leases nothing and answers one row
 * per slot with `rerun` set instead: the caller then runs leaseQuery, which recovers that job
 * first, as a lease always has. Concurrent callers that got `rerun` make their leaseQuery calls
 * at once, so those are merged as well. The probe reads the queue's entries of jobs_running
 * past the end their lease was given, as leaseQuery's expired branch does (see leaseEnded: one
 * index descent while no attempt has outlived that end); a job that has expired but is locked by another leaser
 * recovering it still counts, which costs its callers one more statement, never a wrong lease.
 *
 * Everything else (the locking limit in the text, the ordering-key check, the slot arrays,
 * `id = ANY(ARRAY(…))`, the counted mark, the commit without flush) is leaseQuery's. The rows
 * are ordered by `ord`: slots are numbered in the order of their `ord`s, so that is lease order.
 * One slot alone runs leaseOneQueuedQuery, which takes, writes and answers the same.
 */
export function leaseQueuedQuery(
	schema: string,
	s: string,
	queue: string,
	slots: LeaseSlot[],
	options: LeaseOptions,
): SqlQuery {
	if (slots.length === 1) return leaseOneQueuedQuery(schema, s, queue, slots[0], options);
	return leaseStatement(
		`lease-queued|${s}`,
		queue,
		slots,
		options,
		[],
		(limit, columns) => `
WITH ${probeAndQueued(s, 'j.id, j.priority, j.run_at, j.seq', limit)}, assigned AS (
	SELECT n.id, n.slot,
		($3::int[])[n.slot] AS ord, ($4::uuid[])[n.slot] AS new_attempt_id,
		($5::bigint[])[n.slot] AS lease_ms, ($6::text[])[n.slot] AS workflow_id,
		($7::text[])[n.slot] AS execution_id
	FROM (
		SELECT q.id, row_number() OVER (ORDER BY q.priority DESC, q.run_at, q.seq) AS slot FROM queued q
	) n
	WHERE n.slot <= $2
), leased AS (
	UPDATE ${s}.jobs j
	SET ${LEASED_SET}
	FROM assigned a
	WHERE j.id = ANY(ARRAY(SELECT id FROM assigned)) AND j.id = a.id
	RETURNING ${columns.map((column) => `j.${column}`).join(', ')}, a.slot, a.ord,
		${countedMark(schema)}
)
SELECT ${resultColumns(columns)}, ord, false AS expired, false AS rerun
FROM leased${commitWithoutFlush(options)}
UNION ALL
SELECT ${columns.map(() => 'NULL').join(', ')}, slot.ord, false, true
FROM probe, unnest($3::int[]) AS slot (ord)
WHERE probe.lease_expired
ORDER BY ord`,
	);
}

/**
 * leaseQueuedQuery for one slot, the usual lease of a Job Trigger with one free slot and of Job
 * Lease: the same job, the same writes and the same answer, with the slot as typed parameters
 * instead of arrays, and without numbering candidates: there is one, found by primary key.
 */
function leaseOneQueuedQuery(
	schema: string,
	s: string,
	queue: string,
	slot: LeaseSlot,
	options: LeaseOptions,
): SqlQuery {
	const metadata = options.metadata ?? true;
	const columns = metadata ? LEASED_COLUMNS : ESSENTIAL_LEASED_COLUMNS;
	return {
		text: cachedText(`lease-queued-one|${s}|${options.waitForFlush}|${metadata}`, () =>
			leaseOneQueuedText(schema, s, columns, options),
		),
		values: [queue, slot.ord, slot.attempt_id, slot.lease_ms, slot.workflow_id, slot.execution_id],
		prepare: true,
	};
}

function leaseOneQueuedText(
	schema: string,
	s: string,
	columns: readonly string[],
	options: LeaseOptions,
): string {
	return `
WITH ${probeAndQueued(s, 'j.id', 1)}, leased AS (
	UPDATE ${s}.jobs j
	SET ${leasedSet({
		attemptId: '$3::uuid',
		leaseMs: '$4::bigint',
		workflowId: '$5::text',
		executionId: '$6::text',
	})}
	WHERE j.id = (SELECT id FROM queued)
	RETURNING ${columns.map((column) => `j.${column}`).join(', ')}, ${countedMark(schema)}
)
SELECT ${resultColumns(columns)}, $2::int AS ord, false AS expired, false AS rerun
FROM leased${commitWithoutFlush(options)}
UNION ALL
SELECT ${columns.map(() => 'NULL').join(', ')}, $2::int, false, true
FROM probe
WHERE probe.lease_expired`;
}

/**
 * Running jobs of a queue, for the concurrency limit (read under the queue's lock), how many
 * of them a lease may take over, and how many expired on their last attempt (the lease fails
 * those, which frees their slots for the next lease). A job whose lease expired keeps its slot until it is taken
 * over or fails: its worker may still be at work and extend the lease (or be extending it while
 * the lease skips the locked row), so handing its slot to a queued job could run one job more
 * than the limit.
 */
export function runningCountQuery(s: string, queue: string): SqlQuery {
	return {
		text: `SELECT count(*)::int AS running,
			count(*) FILTER (WHERE lease_until < statement_timestamp() AND attempts < max_attempts)::int AS expired,
			count(*) FILTER (WHERE lease_until < statement_timestamp() AND attempts >= max_attempts)::int AS exhausted
		FROM ${s}.jobs WHERE queue = $1 AND status = 'running'`,
		values: [queue],
		prepare: true,
	};
}

export interface ExtendRow {
	ord: number;
	job_id: string;
	attempt_id: string;
	lease_ms: number;
	checkpoint: string | null;
	workflow_id: string | null;
	execution_id: string | null;
}

/**
 * What a heartbeat writes on its job, from the SQL expressions of its item (as leasedSet does for
 * a lease): the new lease end, the n8n ids if the lease did not know them, and the checkpoint
 * with its time when the item has one. attempt_lease_until, the indexed end (see leaseEnded),
 * moves only when the new end comes before it: a heartbeat that extends the lease writes it
 * unchanged, and PostgreSQL, which compares the values, can make the update a HOT one.
 */
function extendedSet(item: {
	leaseMs: string;
	checkpoint: string;
	workflowId: string;
	executionId: string;
}): string {
	return `lease_until = now() + ${item.leaseMs} * interval '1 millisecond', updated_at = now(),
		attempt_lease_until = least(j.attempt_lease_until, now() + ${item.leaseMs} * interval '1 millisecond'),
		attempt_workflow_id = coalesce(j.attempt_workflow_id, ${item.workflowId}),
		attempt_execution_id = coalesce(j.attempt_execution_id, ${item.executionId}),
		attempt_checkpoint = coalesce(${item.checkpoint}, j.attempt_checkpoint),
		attempt_checkpoint_at = CASE WHEN ${item.checkpoint} IS NOT NULL THEN now() ELSE j.attempt_checkpoint_at END`;
}

/**
 * Heartbeat for a batch, fenced like complete (see completeQuery for the `id = ANY` filter,
 * the fence as a join clause on a MATERIALIZED input, and the LATERAL lookup of lost items).
 * An item with a checkpoint records it on its attempt, only when its lease was extended: an
 * attempt that lost its lease is not the one whose progress the job's history should show.
 * The first heartbeat of an attempt whose lease did not know its n8n execution (a Job Trigger
 * leases before the execution exists) records the workflow and execution id too. Both go to
 * the job row, where the running attempt lives (see attempts.ts), so a heartbeat stays an
 * update of one row, of unindexed columns only (see extendedSet). One item alone runs
 * extendOneQuery, which writes and answers the same.
 */
export function extendLeaseQuery(schema: string, s: string, rows: ExtendRow[]): SqlQuery {
	if (rows.length === 1) return extendOneQuery(schema, s, rows[0]);
	return {
		text: cachedText(
			`extend|${s}`,
			() => `
WITH input AS MATERIALIZED (
	SELECT x.*, 'running'::text AS fence
	FROM jsonb_to_recordset($1::jsonb) AS x(ord int, job_id uuid, attempt_id uuid, lease_ms bigint, checkpoint text,
		workflow_id text, execution_id text)
), extended AS (
	UPDATE ${s}.jobs j
	SET ${extendedSet({
		leaseMs: 'x.lease_ms',
		checkpoint: 'x.checkpoint',
		workflowId: 'x.workflow_id',
		executionId: 'x.execution_id',
	})}
	FROM input x
	WHERE j.id = ANY($2::uuid[]) AND j.id = x.job_id AND j.attempt_id = x.attempt_id AND j.status = x.fence
	RETURNING x.ord, j.id, j.lease_until, ${countedMark(schema)}
)
SELECT x.ord, e.id IS NOT NULL AS extended, e.lease_until,
	cur.status AS current_status, cur.attempt_id AS current_attempt_id
FROM input x
LEFT JOIN extended e ON e.ord = x.ord
LEFT JOIN LATERAL (
	SELECT cur.status, cur.attempt_id FROM ${s}.jobs cur
	WHERE e.ord IS NULL AND cur.id = x.job_id
	OFFSET 0
) cur ON true
ORDER BY x.ord`,
		),
		values: [jsonRows(rows), rows.map((row) => row.job_id)],
		prepare: true,
	};
}

/**
 * extendLeaseQuery for one item, the heartbeat of one Extend Lease call of Job Lease: the
 * same update and the same answer, from typed parameters instead of a JSON document, without its
 * unpacking and the materialised input. The fence's status is a subquery's value for the reason
 * oneSucceededQuery's is (see complete.ts): a custom plan reads a literal or a parameter and may
 * start from the jobs_running index.
 */
function extendOneQuery(schema: string, s: string, row: ExtendRow): SqlQuery {
	return {
		text: cachedText(`extend-one|${s}`, () => extendOneText(schema, s)),
		values: [
			row.job_id,
			row.attempt_id,
			row.lease_ms,
			row.checkpoint,
			row.workflow_id,
			row.execution_id,
			row.ord,
		],
		prepare: true,
	};
}

function extendOneText(schema: string, s: string): string {
	return `
WITH extended AS (
	UPDATE ${s}.jobs j
	SET ${extendedSet({
		leaseMs: '$3::bigint',
		checkpoint: '$4::text',
		workflowId: '$5::text',
		executionId: '$6::text',
	})}
	WHERE j.id = $1::uuid AND j.attempt_id = $2::uuid AND j.status = (SELECT 'running'::text)
	RETURNING j.id, j.lease_until, ${countedMark(schema)}
)
SELECT $7::int AS ord, e.id IS NOT NULL AS extended, e.lease_until,
	cur.status AS current_status, cur.attempt_id AS current_attempt_id
FROM (VALUES (1)) AS one (x)
LEFT JOIN extended e ON true
LEFT JOIN LATERAL (
	SELECT cur.status, cur.attempt_id FROM ${s}.jobs cur
	WHERE e.id IS NULL AND cur.id = $1::uuid
	OFFSET 0
) cur ON true`;
}

/** Takes the per-queue lock under which a concurrency-limited lease counts and leases. */
export function queueLockQuery(namespace: number, queue: string): SqlQuery {
	return {
		text: 'SELECT pg_advisory_xact_lock($1, hashtext($2))',
		values: [namespace, queue],
		prepare: true,
	};
}
