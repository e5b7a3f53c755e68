import { jsonRows } from './json';
import type { SqlQuery } from './types';

export interface OutboxRow {
	ord: number;
	id: string;
	queue: string;
	event_id: string;
	envelope: unknown;
	fingerprint: string;
	ordering_key: string | null;
	correlation_id: string | null;
	max_attempts: number;
	run_at: string | null;
}

/**
 * Outbox events are jobs in an outbox queue whose idempotency key is the event id, so a
 * duplicate event id is accepted once and answers with the event already stored (and its
 * payload's fingerprint, type and destination, which tell a repeat from another event under
 * the same id).
 */
export function outboxInsertQuery(s: string, rows: OutboxRow[]): SqlQuery {
	return {
		text: `
WITH input AS (
	SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
		ord int, id uuid, queue text, event_id text, envelope jsonb, fingerprint text,
		ordering_key text, correlation_id text, max_attempts int, run_at timestamptz)
), inserted AS (
	INSERT INTO ${s}.jobs (id, queue, payload, idempotency_key, payload_fingerprint, ordering_key,
		correlation_id, max_attempts, run_at)
	SELECT id, queue, envelope, event_id, fingerprint, ordering_key, correlation_id, max_attempts,
		coalesce(run_at, now())
	FROM input
	ORDER BY ord
	ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING id, status
)
SELECT x.ord, coalesce(n.id, e.id) AS id, coalesce(n.status, e.status) AS status, n.id IS NULL AS deduplicated,
	e.payload_fingerprint AS existing_fingerprint, e.payload->>'event_type' AS existing_event_type,
	e.payload->>'destination' AS existing_destination
FROM input x
LEFT JOIN inserted n ON n.id = x.id
LEFT JOIN LATERAL (
	SELECT e.id, e.status, e.payload_fingerprint, e.payload FROM ${s}.jobs e
	WHERE n.id IS NULL AND e.queue = x.queue AND e.idempotency_key = x.event_id
	OFFSET 0
) e ON true
ORDER BY x.ord`,
		values: [jsonRows(rows)],
		prepare: true,
	};
}

/** The user's own SQL for an outbox item (the business write), with that item's parameters. */
export function companionQuery(sql: string, params: unknown[]): SqlQuery {
	return { text: sql, values: params, oneStatement: true };
}

/**
 * Stored events by queue and event id, with what tells a repeat from another event: for the
 * events the INSERT's snapshot missed (see outbox.ts, insertEvents).
 */
export function findEventsQuery(
	s: string,
	keys: Array<{ ord: number; queue: string; event_id: string }>,
): SqlQuery {
	return {
		text: `
SELECT k.ord, j.id, j.status, j.payload_fingerprint AS existing_fingerprint,
	j.payload->>'event_type' AS existing_event_type, j.payload->>'destination' AS existing_destination
FROM jsonb_to_recordset($1::jsonb) AS k(ord int, queue text, event_id text)
JOIN ${s}.jobs j ON j.queue = k.queue AND j.idempotency_key = k.event_id`,
		values: [jsonRows(keys)],
		prepare: true,
	};
}
