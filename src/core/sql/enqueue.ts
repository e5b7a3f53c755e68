import { integerArray, textArray } from './arrays';
import { countedInsertMark, insertedNotice } from './counting';
import { jsonRows } from './json';
import { cachedText } from './textCache';
import type { SqlQuery } from './types';

export interface EnqueueRow {
	ord: number;
	id: string;
	queue: string;
	/** The payload, serialised as JSON. */
	payload: string;
	idempotency_key: string | null;
	/** SHA-256 (hex) of the canonical payload; only needed, and only sent, with an idempotency key. */
	payload_fingerprint: string | null;
	priority: number;
	run_at: string | null;
	delay_ms: number | null;
	max_attempts: number;
	ordering_key: string | null;
	callback_url: string | null;
	correlation_id: string | null;
	/** SHA-256 of the status token, base64. */
	status_token_hash: string | null;
}

/**
 * One INSERT for the whole batch. Rows whose (queue, idempotency_key) already exists are not
 * inserted; the statement then returns the existing job if its commit is visible to this
 * statement's snapshot. A key committed concurrently (after the snapshot) comes back with
 * existing_id NULL and is resolved by `findByKeysQuery`, which, as a new statement under
 * READ COMMITTED, sees the winner.
 *
 * The payload is embedded in the JSON parameter as JSON (not as an escaped string); a JSON
 * `null` payload reads as SQL NULL there, hence the coalesce back to the JSON value null.
 * A batch without idempotency keys uses `enqueueWithoutKeysQuery` instead.
 */
export function enqueueQuery(schema: string, s: string, rows: EnqueueRow[]): SqlQuery {
	if (rows.length === 1) return enqueueOneQuery(schema, s, rows[0]);
	return {
		text: `
WITH input AS (
	SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
		ord int, id uuid, queue text, payload jsonb, idempotency_key text, payload_fingerprint text,
		priority int, run_at timestamptz, delay_ms bigint, max_attempts int, ordering_key text,
		callback_url text, correlation_id text, status_token_hash text)
), inserted AS (
	INSERT INTO ${s}.jobs (id, queue, payload, idempotency_key, payload_fingerprint, priority, run_at,
		max_attempts, ordering_key, callback_url, correlation_id, status_token_hash)
	SELECT id, queue, coalesce(payload, 'null'::jsonb), idempotency_key, payload_fingerprint, coalesce(priority, 0),
		coalesce(run_at, now() + coalesce(delay_ms, 0) * interval '1 millisecond'),
		max_attempts, ordering_key, callback_url, correlation_id, decode(status_token_hash, 'base64')
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
LEFT JOIN LATERAL (
	SELECT e.id, e.status, e.run_at, e.payload_fingerprint FROM ${s}.jobs e
	WHERE n.id IS NULL AND e.queue = i.queue AND e.idempotency_key = i.idempotency_key
	OFFSET 0
) e ON true
ORDER BY i.ord`,
		values: [jsonRows(rows, ['payload'])],
		prepare: true,
	};
}

/**
 * `enqueueQuery` for one job, the usual call of a webhook that passes an idempotency key: the
 * same INSERT and the same answer, from typed parameters instead of a JSON document. The row it
 * inserts sends its own wake-up notice (see `countedInsertMark`).
 */
function enqueueOneQuery(schema: string, s: string, row: EnqueueRow): SqlQuery {
	return {
		text: cachedText(`enqueue-one|${s}`, () => enqueueOneText(schema, s)),
		values: [
			row.id,
			row.queue,
			row.payload,
			row.idempotency_key,
			row.payload_fingerprint,
			...oneRowValues(row),
			row.ord,
		],
		prepare: true,
	};
}

function enqueueOneText(schema: string, s: string): string {
	return `
WITH inserted AS (
	INSERT INTO ${s}.jobs (id, queue, payload, idempotency_key, payload_fingerprint, priority, run_at,
		max_attempts, ordering_key, callback_url, correlation_id, status_token_hash)
	VALUES ($1::uuid, $2::text, $3::jsonb, $4::text, $5::text, coalesce($6::int, 0),
		coalesce($7::timestamptz, now() + coalesce($8::bigint, 0) * interval '1 millisecond'),
		$9::int, $10::text, $11::text, $12::text, decode($13::text, 'base64'))
	ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING id, status, run_at, ${insertedNotice(schema)}, ${countedInsertMark(schema)}
)
SELECT $14::int AS ord,
	coalesce(n.id, e.id) AS id,
	coalesce(n.status, e.status) AS status,
	coalesce(n.run_at, e.run_at) AS run_at,
	(n.id IS NULL) AS deduplicated,
	e.payload_fingerprint AS existing_fingerprint
FROM (VALUES (1)) AS one (x)
LEFT JOIN inserted n ON true
LEFT JOIN LATERAL (
	SELECT e.id, e.status, e.run_at, e.payload_fingerprint FROM ${s}.jobs e
	WHERE n.id IS NULL AND e.queue = $2::text AND e.idempotency_key = $4::text
	OFFSET 0
) e ON true`;
}

/**
 * The parameters both one-row forms take, in this order, after the id, queue, payload (and key
 * columns): priority, run_at, delay_ms, max_attempts, ordering_key, callback_url,
 * correlation_id, status_token_hash.
 */
function oneRowValues(row: EnqueueRow): unknown[] {
	return [
		row.priority,
		row.run_at,
		row.delay_ms,
		row.max_attempts,
		row.ordering_key,
		row.callback_url,
		row.correlation_id,
		row.status_token_hash,
	];
}

/** A returned run_at, with the key (`runAtKey`) of the rows it belongs to. */
export interface RunAtRow {
	key: string;
	run_at: Date;
}

/**
 * What a row's run_at is computed from: its explicit run_at, or its delay from the
 * statement's now(). Rows with equal keys get equal run_at values.
 */
export function runAtKey(row: EnqueueRow): string {
	return row.run_at === null ? `in ${row.delay_ms}` : `at ${row.run_at}`;
}

/**
 * The batch has no idempotency key, so nothing can conflict: a plain INSERT, in input order
 * (`seq` follows it). The ids are the client's and a new job is always 'queued', so the
 * statement returns only the run_at of each distinct `runAtKey` (one row for a batch without
 * runAt or delay), computed by the same expression from the same now() as the inserted rows.
 *
 * Columns go as arrays, the payloads as one JSON array: no JSON document per row to build
 * and parse, as `jsonb_to_recordset` needs.
 */
export function enqueueWithoutKeysQuery(schema: string, s: string, rows: EnqueueRow[]): SqlQuery {
	if (rows.length === 1) return enqueueOneWithoutKeyQuery(schema, s, rows[0]);
	const count = rows.length;
	const ids = new Array<string>(count);
	const queues = new Array<string>(count);
	const payloads = new Array<string>(count);
	const priorities = new Array<number>(count);
	const runAts = new Array<string | null>(count);
	const delays = new Array<number | null>(count);
	const maxAttempts = new Array<number>(count);
	const orderingKeys = new Array<string | null>(count);
	const callbackUrls = new Array<string | null>(count);
	const correlationIds = new Array<string | null>(count);
	const tokenHashes = new Array<string | null>(count);
	const keys: string[] = [];
	const seen = new Set<string>();
	const keyRunAts: Array<string | null> = [];
	const keyDelays: Array<number | null> = [];
	for (let index = 0; index < count; index++) {
		const row = rows[index];
		ids[index] = row.id;
		queues[index] = row.queue;
		payloads[index] = row.payload;
		priorities[index] = row.priority;
		runAts[index] = row.run_at;
		delays[index] = row.delay_ms;
		maxAttempts[index] = row.max_attempts;
		orderingKeys[index] = row.ordering_key;
		callbackUrls[index] = row.callback_url;
		correlationIds[index] = row.correlation_id;
		tokenHashes[index] = row.status_token_hash;
		const key = runAtKey(row);
		if (!seen.has(key)) {
			seen.add(key);
			keys.push(key);
			keyRunAts.push(row.run_at);
			keyDelays.push(row.delay_ms);
		}
	}
	return {
		text: `
WITH inserted AS (
	INSERT INTO ${s}.jobs (id, queue, payload, priority, run_at, max_attempts, ordering_key, callback_url,
		correlation_id, status_token_hash)
	SELECT x.id, x.queue, x.payload, coalesce(x.priority, 0),
		coalesce(x.run_at, now() + coalesce(x.delay_ms, 0) * interval '1 millisecond'),
		x.max_attempts, x.ordering_key, x.callback_url, x.correlation_id, decode(x.status_token_hash, 'base64')
	FROM ROWS FROM (
		unnest($1::uuid[], $2::text[]),
		jsonb_array_elements($3::jsonb),
		unnest($4::int[], $5::timestamptz[], $6::bigint[], $7::int[], $8::text[], $9::text[], $10::text[],
			$11::text[])
	) WITH ORDINALITY AS x(id, queue, payload, priority, run_at, delay_ms, max_attempts, ordering_key,
		callback_url, correlation_id, status_token_hash, ord)
	ORDER BY x.ord
)
SELECT k.key, coalesce(k.run_at, now() + coalesce(k.delay_ms, 0) * interval '1 millisecond') AS run_at
FROM unnest($12::text[], $13::timestamptz[], $14::bigint[]) AS k(key, run_at, delay_ms)`,
		values: [
			textArray(ids),
			textArray(queues),
			`[${payloads.join(',')}]`,
			integerArray(priorities),
			textArray(runAts),
			integerArray(delays),
			integerArray(maxAttempts),
			textArray(orderingKeys),
			textArray(callbackUrls),
			textArray(correlationIds),
			textArray(tokenHashes),
			textArray(keys),
			textArray(keyRunAts),
			integerArray(keyDelays),
		],
		prepare: true,
	};
}

/**
 * `enqueueWithoutKeysQuery` for one job, the usual call of a webhook that answers 202: the
 * same row from the same expressions, as one VALUES row with typed parameters. Unpacking
 * arrays and a JSON array for one row made the statement take about a fifth longer. The row
 * sends its own wake-up notice (see `countedInsertMark`).
 */
function enqueueOneWithoutKeyQuery(schema: string, s: string, row: EnqueueRow): SqlQuery {
	return {
		text: cachedText(
			`enqueue-one-without-key|${s}`,
			() => `
INSERT INTO ${s}.jobs (id, queue, payload, priority, run_at, max_attempts, ordering_key, callback_url,
	correlation_id, status_token_hash)
VALUES ($1::uuid, $2::text, $3::jsonb, coalesce($4::int, 0),
	coalesce($5::timestamptz, now() + coalesce($6::bigint, 0) * interval '1 millisecond'),
	$7::int, $8::text, $9::text, $10::text, decode($11::text, 'base64'))
RETURNING $12::text AS key, run_at, ${insertedNotice(schema)}, ${countedInsertMark(schema)}`,
		),
		values: [row.id, row.queue, row.payload, ...oneRowValues(row), runAtKey(row)],
		prepare: true,
	};
}

export function findByKeysQuery(
	s: string,
	keys: Array<{ ord: number; queue: string; idempotency_key: string }>,
): SqlQuery {
	return {
		text: `
SELECT k.ord, j.id, j.status, j.run_at, j.payload_fingerprint AS existing_fingerprint
FROM jsonb_to_recordset($1::jsonb) AS k(ord int, queue text, idempotency_key text)
JOIN ${s}.jobs j ON j.queue = k.queue AND j.idempotency_key = k.idempotency_key`,
		values: [jsonRows(keys)],
		prepare: true,
	};
}
