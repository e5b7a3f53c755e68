import { createHash, createHmac, hash, timingSafeEqual } from 'node:crypto';

import { DurableJobsError } from './errors';
import type { Executor } from './executor';
import { quoteIdentifier } from './identifiers';
import { tokenSecretQuery } from './sql/status';

/**
 * Status tokens: HMAC-SHA256(secret, job id), the secret drawn once per schema (migration
 * 0003). Deriving the token lets an idempotent retry of an enqueue get the same token back;
 * only SHA-256(token) is stored on the job.
 */

export function hashToken(token: string): Buffer {
	return createHash('sha256').update(token, 'utf8').digest();
}

/** The stored form of a token's hash (base64 of its SHA-256), as enqueue writes it. */
export function storedTokenHash(token: string): string {
	return hash('sha256', token, 'base64');
}

/** The status token of a job: 256 bits, derived so it can be handed out again to an idempotent retry. */
export function statusToken(secret: Buffer, jobId: string): string {
	return statusTokenSigner(secret)(jobId);
}

const HMAC_BLOCK = 64;
/** Job ids up to this many UTF-16 units take the fast path (a UUID has 36). */
const FAST_ID_LENGTH = 64;
const signers = new WeakMap<Buffer, (jobId: string) => string>();

/**
 * `statusToken` for one secret, for many ids: HMAC-SHA256 as RFC 2104 defines it, with the
 * padded keys prepared once. A batch of 1,000 jobs spent more on creating one Hmac object per
 * job than on hashing; two one-shot hashes over reused buffers cost about half as much.
 */
export function statusTokenSigner(secret: Buffer): (jobId: string) => string {
	let signer = signers.get(secret);
	if (signer) return signer;
	const key = Buffer.alloc(HMAC_BLOCK);
	if (secret.length > HMAC_BLOCK) createHash('sha256').update(secret).digest().copy(key);
	else secret.copy(key);
	const inner = Buffer.alloc(HMAC_BLOCK + FAST_ID_LENGTH * 3);
	const outer = Buffer.alloc(HMAC_BLOCK + 32);
	for (let index = 0; index < HMAC_BLOCK; index++) {
		inner[index] = key[index] ^ 0x36;
		outer[index] = key[index] ^ 0x5c;
	}
	signer = (jobId: string): string => {
		if (jobId.length > FAST_ID_LENGTH)
			return createHmac('sha256', secret).update(jobId).digest('base64url');
		const length = inner.write(jobId, HMAC_BLOCK, 'utf8');
		// Hex, not a Buffer: `hash` is several times slower when it returns a Buffer.
		outer.write(hash('sha256', inner.subarray(0, HMAC_BLOCK + length), 'hex'), HMAC_BLOCK, 'hex');
		return hash('sha256', outer, 'base64url');
	};
	signers.set(secret, signer);
	return signer;
}

/**
 * The secret's row is gone (deleted or edited by hand): migration 0003 made it and is recorded
 * as applied, so running the migrations again does not make it again. The fix makes a new one as
 * 0003 does; tokens handed out before keep working (jobs store their hash), but an idempotent
 * retry of an enqueue made before gets a token derived from the new secret, which does not.
 */
function missingSecretError(schema: string, s: string): DurableJobsError {
	return new DurableJobsError(
		'schema_incomplete',
		`Schema "${schema}" has no status token secret`,
		{
			fix: `Running the migrations again does not bring it back. Restore the row 'status_token_secret' of ${s}.settings from a backup, or create a new secret as the role that owns the schema (status tokens handed out before keep working): INSERT INTO ${s}.settings (name, value) VALUES ('status_token_secret', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'))`,
			httpStatus: 503,
		},
	);
}

/** Per pool and schema: the secret's read, shared by every store of the process. */
const secrets = new WeakMap<object, Map<string, Promise<Buffer>>>();

export async function tokenSecret(db: Executor, schema: string): Promise<Buffer> {
	let bySchema = secrets.get(db.pool);
	if (!bySchema) {
		bySchema = new Map();
		secrets.set(db.pool, bySchema);
	}
	let secret = bySchema.get(schema);
	if (!secret) {
		const cache = bySchema;
		const s = quoteIdentifier(schema);
		secret = db.run<{ value: Buffer }>(tokenSecretQuery(s)).then(([row]) => {
			if (!row) throw missingSecretError(schema, s);
			return row.value;
		});
		cache.set(schema, secret);
		secret.catch(() => cache.delete(schema));
	}
	return await secret;
}

const DUMMY_TOKEN_HASH = hashToken('durable-jobs-no-such-job');
const NIL_UUID = '00000000-0000-0000-0000-000000000000';
const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The id to look up for a status request; a malformed one is looked up as the nil id, so it costs the same. */
export function lookupId(jobId: unknown): string {
	return typeof jobId === 'string' && UUID_TEXT.test(jobId) ? jobId.toLowerCase() : NIL_UUID;
}

/**
 * Whether a token matches a job's stored hash. Unknown ids, malformed ids and wrong tokens take
 * the same work: one constant-time compare, against a dummy hash when the job has none.
 */
export function tokenMatches(stored: Buffer | null | undefined, token: unknown): boolean {
	const expected = stored && stored.length === DUMMY_TOKEN_HASH.length ? stored : DUMMY_TOKEN_HASH;
	const given = hashToken(typeof token === 'string' ? token : '');
	return timingSafeEqual(expected, given) && expected === stored;
}
