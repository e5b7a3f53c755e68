import { notifyChannel } from '../identifiers';

/**
 * How the lease, the completion and the heartbeat keep job_counts themselves (migration 0011).
 * Each upserts the terminal counts of the rows it updated in a CTE of its own statement (the
 * heartbeat changes no status and has none), sends the wake-up notice of each row it leaves
 * queued from its RETURNING list, and marks the statement as counted; the update trigger
 * jobs_after_update then clears the mark and does nothing else. Any UPDATE that does not mark
 * itself is counted by the trigger.
 *
 * The mark must be set whenever the statement counted a row, and only then may the trigger
 * skip: `countedMark` goes into the RETURNING list of every UPDATE of the statement, so it is
 * set as soon as one row is updated (an uncorrelated subquery: evaluated once, at the first
 * row). A statement that updated nothing counted nothing, and leaves the (empty) work to the
 * trigger.
 *
 * The mark names the schema, the trigger depth of the statement and the statement's start
 * (statement_timestamp(), the same inside its triggers), and the trigger compares all three
 * with its own: an UPDATE run by a trigger inside the statement (one level deeper), or a later
 * statement of the transaction whose trigger the mark outlived (with triggers disabled, say),
 * never matches it.
 */
const COUNTED_UPDATE = 'durable_jobs.counted_update';

/**
 * The same for an enqueue of one job (migration 0013): its statement sends the wake-up notice
 * (`insertedNotice`) and sets this mark from the RETURNING list of its INSERT, so the mark is set
 * only when the row was inserted (a repeated idempotency key inserts nothing), and the insert
 * trigger jobs_after_insert clears it and does nothing else. An enqueue of many jobs leaves the
 * notice and the (empty) count to the trigger, which pays its two queries once per statement.
 */
const COUNTED_INSERT = 'durable_jobs.counted_insert';

function literal(text: string): string {
	return `'${text.replace(/'/g, "''")}'`;
}

function mark(setting: string, schema: string): string {
	return `(SELECT set_config('${setting}', ${literal(`${schema}:`)} || pg_trigger_depth() || ':' || statement_timestamp(), true)) AS counted_mark`;
}

/** A RETURNING item that marks the statement as counted, for the schema's update trigger. */
export function countedMark(schema: string): string {
	return mark(COUNTED_UPDATE, schema);
}

/** A RETURNING item of a one-row INSERT that marks it as counted, for the insert trigger. */
export function countedInsertMark(schema: string): string {
	return mark(COUNTED_INSERT, schema);
}

/** A RETURNING item that sends the queue's wake-up notice when the row is left queued. */
export function queuedNotice(schema: string, alias: string): string {
	return `CASE WHEN ${alias}.status = 'queued' THEN pg_notify(${literal(notifyChannel(schema))}, ${alias}.queue) END AS queued_notice`;
}

/** A RETURNING item of an enqueue's INSERT that sends the wake-up notice of the row's queue. */
export function insertedNotice(schema: string): string {
	return `pg_notify(${literal(notifyChannel(schema))}, queue) AS inserted_notice`;
}

/**
 * A data-modifying CTE body adding the terminal rows of `source` (columns queue, status; one
 * row per job that became terminal) to job_counts, in the backend's slot as the trigger does.
 */
export function countTerminalSql(s: string, source: string): string {
	return `INSERT INTO ${s}.job_counts AS c (queue, status, slot, n)
	SELECT t.queue, t.status, (pg_backend_pid() % 16)::smallint, count(*)
	FROM (${source}) AS t (queue, status)
	WHERE t.status IN ('done', 'failed', 'cancelled')
	GROUP BY t.queue, t.status
	ON CONFLICT (queue, status, slot) DO UPDATE SET n = c.n + EXCLUDED.n`;
}
