import { jsonRows } from './json';
import type { SqlQuery } from './types';

export interface ClaimRow {
	ord: number;
	scope: string;
	key: string;
	fingerprint: string | null;
	claim_id: string;
	claim_ms: number;
	ttl_ms: number;
}

/**
 * Insert-or-inspect for a batch of keys (one row per distinct (scope, key)). A new key is
 * claimed; an existing key is taken over only when its claim failed, its claim expired
 * (same fingerprint) or its TTL passed (any fingerprint). ON CONFLICT DO UPDATE waits for a
 * concurrent claimer of the same key and then re-checks the WHERE against the committed row,
 * so 32 concurrent claims yield exactly one winner. Rows that were not claimed are read back
 * in the same statement when visible, else by `readKeysQuery`; so are rows this statement's
 * snapshot shows as takeable that it did not take (`existing_was_takeable`): a concurrent
 * claimer took them over first, and the snapshot still shows them as they were before.
 */
export function claimQuery(s: string, rows: ClaimRow[]): SqlQuery {
	return {
		text: `
WITH input AS (
	SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
		ord int, scope text, key text, fingerprint text, claim_id uuid, claim_ms bigint, ttl_ms bigint)
), claimed AS (
	INSERT INTO ${s}.idempotency_keys AS k (scope, key, fingerprint, status, claim_id, claim_until, expires_at)
	SELECT scope, key, fingerprint, 'in_progress', claim_id, now() + claim_ms * interval '1 millisecond',
		now() + greatest(ttl_ms, claim_ms) * interval '1 millisecond'
	FROM input
	ORDER BY scope, key
	ON CONFLICT (scope, key) DO UPDATE
	SET fingerprint = EXCLUDED.fingerprint, status = 'in_progress', claim_id = EXCLUDED.claim_id,
		claim_until = EXCLUDED.claim_until, expires_at = EXCLUDED.expires_at,
		prior_status = CASE WHEN k.expires_at <= now() THEN NULL ELSE k.status END,
		claims = CASE WHEN k.expires_at <= now() THEN 1 ELSE k.claims + 1 END,
		result = NULL, error_message = NULL, updated_at = now(),
		created_at = CASE WHEN k.expires_at <= now() THEN now() ELSE k.created_at END
	WHERE k.expires_at <= now()
		OR (k.fingerprint IS NOT DISTINCT FROM EXCLUDED.fingerprint
			AND (k.status = 'failed' OR (k.status = 'in_progress' AND k.claim_until < now())))
	RETURNING k.scope, k.key, k.claim_id, k.claim_until, k.expires_at, k.prior_status, k.claims
)
SELECT x.ord,
	c.claim_id IS NOT NULL AND c.claim_id = x.claim_id AS claimed,
	c.prior_status, c.claims, c.claim_until, c.expires_at,
	e.status AS existing_status, e.fingerprint AS existing_fingerprint, e.result AS existing_result,
	e.claim_id AS existing_claim_id, e.claim_until AS existing_claim_until, e.created_at AS existing_created_at,
	e.updated_at AS existing_updated_at, e.claims AS existing_claims,
	(e.expires_at <= now()
		OR (e.fingerprint IS NOT DISTINCT FROM x.fingerprint
			AND (e.status = 'failed' OR (e.status = 'in_progress' AND e.claim_until < now()))))
		AS existing_was_takeable
FROM input x
LEFT JOIN claimed c ON c.scope = x.scope AND c.key = x.key
LEFT JOIN LATERAL (
	SELECT e.status, e.fingerprint, e.result, e.claim_id, e.claim_until, e.created_at, e.updated_at, e.claims,
		e.expires_at
	FROM ${s}.idempotency_keys e
	WHERE c.scope IS NULL AND e.scope = x.scope AND e.key = x.key
	OFFSET 0
) e ON true
ORDER BY x.ord`,
		values: [jsonRows(rows)],
		prepare: true,
	};
}

export function readKeysQuery(
	s: string,
	keys: Array<{ ord: number; scope: string; key: string }>,
): SqlQuery {
	return {
		text: `
SELECT x.ord, e.status AS existing_status, e.fingerprint AS existing_fingerprint, e.result AS existing_result,
	e.claim_id AS existing_claim_id, e.claim_until AS existing_claim_until, e.created_at AS existing_created_at,
	e.updated_at AS existing_updated_at, e.claims AS existing_claims
FROM jsonb_to_recordset($1::jsonb) AS x(ord int, scope text, key text)
JOIN ${s}.idempotency_keys e ON e.scope = x.scope AND e.key = x.key`,
		values: [jsonRows(keys)],
		prepare: true,
	};
}

export interface GuardRow {
	ord: number;
	scope: string;
	entity_key: string;
	version: string | null;
	occurred_at: string | null;
	state: string | null;
	state_rank: number | null;
	event_key: string;
}

/**
 * Late-event guard. Records the event's version / occurred_at / state for its entity unless an
 * already applied event is newer, or the state would move backwards in the configured order.
 * Items that come back with applied = false are stale. Runs in the claim's transaction; stale
 * items are then undone with their round (a savepoint; see `claim`).
 */
export function guardQuery(s: string, rows: GuardRow[]): SqlQuery {
	return {
		text: `
WITH input AS (
	SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
		ord int, scope text, entity_key text, version numeric, occurred_at timestamptz, state text,
		state_rank int, event_key text)
), applied AS (
	INSERT INTO ${s}.entity_versions AS v (scope, entity_key, version, occurred_at, state, state_rank, event_key)
	SELECT DISTINCT ON (scope, entity_key) scope, entity_key, version, occurred_at, state, state_rank, event_key
	FROM input
	ORDER BY scope, entity_key, version DESC NULLS LAST, occurred_at DESC NULLS LAST, ord
	ON CONFLICT (scope, entity_key) DO UPDATE
	SET version = coalesce(EXCLUDED.version, v.version),
		occurred_at = coalesce(EXCLUDED.occurred_at, v.occurred_at),
		state = coalesce(EXCLUDED.state, v.state),
		state_rank = coalesce(EXCLUDED.state_rank, v.state_rank),
		event_key = EXCLUDED.event_key,
		updated_at = now()
	WHERE (EXCLUDED.version IS NULL OR v.version IS NULL OR EXCLUDED.version >= v.version)
		AND (EXCLUDED.occurred_at IS NULL OR v.occurred_at IS NULL OR EXCLUDED.occurred_at >= v.occurred_at)
		AND (EXCLUDED.state_rank IS NULL OR v.state_rank IS NULL OR EXCLUDED.state_rank >= v.state_rank)
	RETURNING v.scope, v.entity_key, v.event_key
)
SELECT x.ord, a.event_key IS NOT NULL AS applied,
	cur.version AS current_version, cur.occurred_at AS current_occurred_at, cur.state AS current_state
FROM input x
LEFT JOIN applied a ON a.scope = x.scope AND a.entity_key = x.entity_key AND a.event_key = x.event_key
LEFT JOIN LATERAL (
	SELECT cur.version, cur.occurred_at, cur.state FROM ${s}.entity_versions cur
	WHERE a.scope IS NULL AND cur.scope = x.scope AND cur.entity_key = x.entity_key
	OFFSET 0
) cur ON true
ORDER BY x.ord`,
		values: [jsonRows(rows)],
		prepare: true,
	};
}

export interface SettleRow {
	ord: number;
	scope: string;
	key: string;
	claim_id: string | null;
	/** The result, serialised as JSON. */
	result: string | null;
	error_message: string | null;
	ttl_ms: number | null;
}

/**
 * Complete (status 'completed', result stored) or fail/release (status 'failed', reclaimable)
 * claims. Fenced by claim_id when the caller has it: a claimer whose claim expired and was
 * taken over cannot overwrite the new claimer's outcome.
 */
export function settleClaimsQuery(
	s: string,
	rows: SettleRow[],
	status: 'completed' | 'failed',
): SqlQuery {
	return {
		text: `
WITH input AS (
	SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
		ord int, scope text, key text, claim_id uuid, result jsonb, error_message text, ttl_ms bigint)
), settled AS (
	UPDATE ${s}.idempotency_keys k
	SET status = $2, result = CASE WHEN $2 = 'completed' THEN x.result ELSE NULL END,
		error_message = CASE WHEN $2 = 'failed' THEN x.error_message END,
		claim_until = NULL, updated_at = now(),
		expires_at = CASE WHEN x.ttl_ms IS NULL THEN k.expires_at ELSE now() + x.ttl_ms * interval '1 millisecond' END
	FROM input x
	WHERE k.scope = x.scope AND k.key = x.key AND k.status = 'in_progress'
		AND (x.claim_id IS NULL OR k.claim_id = x.claim_id)
	RETURNING x.ord, k.status, k.expires_at
)
SELECT x.ord, s.ord IS NOT NULL AS applied, s.expires_at, cur.status AS current_status, cur.claim_id AS current_claim_id
FROM input x
LEFT JOIN settled s ON s.ord = x.ord
LEFT JOIN LATERAL (
	SELECT cur.status, cur.claim_id FROM ${s}.idempotency_keys cur
	WHERE s.ord IS NULL AND cur.scope = x.scope AND cur.key = x.key
	OFFSET 0
) cur ON true
ORDER BY x.ord`,
		values: [jsonRows(rows, ['result']), status],
		prepare: true,
	};
}
