import { JOB_COLUMNS, type SqlQuery } from './types';

/**
 * How long until the earliest queued job of a queue that is not yet due (a delayed job or a
 * retry waiting out its backoff) becomes due, in milliseconds; NULL when there is none.
 *
 * The delay is computed by the database (its `now()`), so the client's clock does not matter:
 * a timer set from a client-side timestamp would fire early on a fast clock and find nothing.
 * It reads the queue's queued rows on `jobs_queued_claim` (run_at is not its first ordering
 * column after the queue, so every queued row of the queue is visited); the trigger asks only
 * when its last lease found nothing left to take.
 */
export function nextDueQuery(s: string, queue: string): SqlQuery {
	return {
		text: `SELECT ceil(extract(epoch FROM (min(run_at) - now())) * 1000)::bigint AS due_in_ms
FROM ${s}.jobs WHERE queue = $1 AND status = 'queued' AND run_at > now()`,
		values: [queue],
		prepare: true,
	};
}

/**
 * The job a lease would take next, read without a lock and without changing anything (the
 * trigger's test run shows it as a sample). Due jobs first, in lease order; when none is due,
 * the queued job that is due soonest.
 */
export function peekQuery(s: string, queue: string): SqlQuery {
	return {
		text: `SELECT ${JOB_COLUMNS}, run_at <= now() AS due
FROM ${s}.jobs WHERE queue = $1 AND status = 'queued'
ORDER BY run_at <= now() DESC, CASE WHEN run_at <= now() THEN priority END DESC, run_at, seq
LIMIT 1`,
		values: [queue],
	};
}

/**
 * One notice per queue whose jobs finished, on the channel enqueue's notices use (the payload is
 * the queue name), sent in a transaction of its own (see finishNotices.ts). A notifying
 * transaction gets a transaction id and so a commit record; a notice is a hint, so its commit
 * does not wait for the WAL flush (synchronous_commit off for this transaction only).
 */
export function finishNoticeQuery(channel: string, queues: string[]): SqlQuery {
	return {
		text: "SELECT pg_notify($1, queue), set_config('synchronous_commit', 'off', true) FROM unnest($2::text[]) AS queue",
		values: [channel, queues],
	};
}
