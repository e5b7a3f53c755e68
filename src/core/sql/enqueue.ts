import type { SqlQuery } from './types';

export interface EnqueueRow {
	ord: number;
	id: string;
	queue: string;
	payload: string;
	idempotency_key: string | null;
	payload_fingerprint: string;
	priority: number;
	run_at: string | null;
	delay_ms: number | null;
	max_attempts: number;
	ordering_key: string | null;
	callback_url: string | null;
	correlation_id: string | null;
	status_token_hash: string | null;
}

/**
 * One INSERT for the whole batch. Rows whose (queue, idempotency_key) already exists are not
 * inserted; the statement then returns the existing job if its commit is visible to this
 * statement's snapshot. A key committed concurrently (after the snapshot) comes back with
 * existing_id NULL and is resolved by `findByKeysQuery`, which, as a new statement under
 * READ COMMITTED, sees the winner.
 */
export function enqueueQuery(s: string, rows: EnqueueRow[]): SqlQuery {
	return {
		text: `
WITH input AS (
	SELECT x.*, x.payload_text::jsonb AS payload
	FROM jsonb_to_recordset($1::jsonb) AS x(
		ord int, id uuid, queue text, payload_text text, idempotency_key text, payload_fingerprint text,
		priority int, run_at timestamptz, delay_ms bigint, max_attempts int, ordering_key text,
		callback_url text, correlation_id text, status_token_hash text)
), inserted AS (
	INSERT INTO ${s}.jobs (id, queue, payload, idempotency_key, payload_fingerprint, priority, run_at,
		max_attempts, ordering_key, callback_url, correlation_id, status_token_hash)
	SELECT id, queue, payload, idempotency_key, payload_fingerprint, priority,
		coalesce(run_at, now() + coalesce(delay_ms, 0) * interval '1 millisecond'),
		max_attempts, ordering_key, callback_url, correlation_id, decode(status_token_hash, 'hex')
	FROM input
	ORDER BY ord
	ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING id, status, run_at
)
SELECT i.ord, i.id AS requested_id,
	coalesce(n.id, e.id) AS id,
	coalesce(n.status, e.status) AS status,
	coalesce(n.run_at, e.run_at) AS run_at,
	(n.id IS NULL) AS deduplicated,
	e.payload_fingerprint AS existing_fingerprint
FROM input i
LEFT JOIN inserted n ON n.id = i.id
LEFT JOIN ${s}.jobs e ON n.id IS NULL AND e.queue = i.queue AND e.idempotency_key = i.idempotency_key
ORDER BY i.ord`,
		values: [JSON.stringify(rows.map((row) => ({ ...row, payload_text: row.payload, payload: undefined })))],
	};
}

export function findByKeysQuery(s: string, keys: Array<{ ord: number; queue: string; idempotency_key: string }>): SqlQuery {
	return {
		text: `
SELECT k.ord, j.id, j.status, j.run_at, j.payload_fingerprint AS existing_fingerprint
FROM jsonb_to_recordset($1::jsonb) AS k(ord int, queue text, idempotency_key text)
JOIN ${s}.jobs j ON j.queue = k.queue AND j.idempotency_key = k.idempotency_key`,
		values: [JSON.stringify(keys)],
	};
}
