import { v7 as uuidv7 } from 'uuid';

import type { StoreContext } from './context';
import { CLAIM, KEY_TTL } from './defaults';
import { DurableJobsError, ValidationError } from './errors';
import type { Session } from './executor';
import {
	runWithReread,
	validateItems,
	writeRows,
	type BatchOptions,
	type ItemResults,
} from './items';
import {
	claimQuery,
	guardQuery,
	readKeysQuery,
	settleClaimsQuery,
	type ClaimRow,
	type GuardRow,
	type SettleRow,
} from './sql/idempotency';
import type { ClaimInput, ClaimResult, SettleInput, SettleResult } from './types';
import {
	inRange,
	optionalDate,
	optionalInRange,
	optionalText,
	serializePayload,
	storableMessage,
	validateKey,
	validateUuid,
} from './validate';

interface ClaimReturnRow {
	ord: number;
	claimed: boolean;
	prior_status: string | null;
	claims: number | null;
	claim_until: Date | null;
	expires_at: Date | null;
	existing_status: string | null;
	existing_fingerprint: string | null;
	existing_result: unknown;
	existing_claim_id: string | null;
	existing_claim_until: Date | null;
	existing_created_at: Date | null;
	existing_updated_at: Date | null;
	existing_claims: number | null;
	/** The key as the claim's snapshot shows it could have been taken over (see claimQuery). */
	existing_was_takeable?: boolean | null;
}

interface GuardVerdict {
	ord: number;
	applied: boolean;
	current_version: string | null;
	current_occurred_at: Date | null;
	current_state: string | null;
}

/**
 * Claims idempotency keys, one statement for the batch. A new key is claimed (route 'new'); an
 * existing one routes to duplicate, in progress or conflict. With a late-event guard the claim
 * and the guard run in one transaction, and a stale event takes nothing: its round is undone and
 * runs again without it, so a key it had taken over is as it was.
 *
 * Items that repeat the key or the guarded entity of an earlier item go in a later round (one
 * claim statement, and one guard statement, per round, in one transaction), so each item is
 * answered exactly as if the items had been sent one after another: a repeat is compared with
 * what the earlier item left (the stored key, its claim, the entity's newest version), not with
 * the earlier item. A batch without repeats is one round, as before.
 */
export async function claim(
	ctx: StoreContext,
	items: ClaimInput[],
	options: BatchOptions = {},
): Promise<ItemResults<ClaimResult>> {
	const guards = new Map<number, GuardRow>();
	const roundOf = new Map<number, number>();
	const lastRoundByKey = new Map<string, number>();
	const lastRoundByEntity = new Map<string, number>();
	const { rows, results } = validateItems<ClaimInput, ClaimRow, ClaimResult>(
		items,
		(item, ord) => {
			const scope = validateKey(item.scope, 'scope');
			const key = validateKey(item.key, 'key');
			const fp = optionalText(item.fingerprint, 'fingerprint', 255);
			const guard = item.guard ? guardRow(item.guard, ord, scope, key) : null;
			const row: ClaimRow = {
				ord,
				scope,
				key,
				fingerprint: fp,
				claim_id: uuidv7(),
				claim_ms: inRange(item.claimMs, 'claimMs', CLAIM),
				ttl_ms: inRange(item.ttlMs, 'ttlMs', KEY_TTL),
			};
			const keyId = JSON.stringify([scope, key]);
			const entityId = guard ? JSON.stringify([guard.scope, guard.entity_key]) : null;
			const round =
				Math.max(
					lastRoundByKey.get(keyId) ?? -1,
					entityId === null ? -1 : (lastRoundByEntity.get(entityId) ?? -1),
				) + 1;
			lastRoundByKey.set(keyId, round);
			if (entityId !== null) lastRoundByEntity.set(entityId, round);
			roundOf.set(ord, round);
			if (guard) guards.set(ord, guard);
			return row;
		},
		options,
	);
	if (rows.length === 0) return results;
	const rounds: ClaimRow[][] = [];
	for (const row of rows) (rounds[roundOf.get(row.ord)!] ??= []).push(row);
	const claimRound = async (db: Session, round: ClaimRow[]): Promise<ClaimReturnRow[]> => {
		const returned = await claimRows(ctx, db, round);
		const byOrd = new Map(round.map((row) => [row.ord, row]));
		for (const row of returned) results[row.ord] = claimResult(row, byOrd.get(row.ord)!);
		return returned;
	};
	if (guards.size === 0) {
		const work = async (db: Session) => {
			for (const round of rounds) await claimRound(db, round);
		};
		if (rounds.length > 1) await ctx.db.transaction(work);
		else await work(ctx.db);
		return results;
	}
	await ctx.db.transaction(async (tx) => {
		for (const round of rounds) {
			// A round whose guard finds stale events is undone (its savepoint), so a key a stale
			// event had taken over (a failed claim, an expired one still being worked on) is as it
			// was, and runs again without them. Each pass drops at least one item.
			let remaining = round;
			while (remaining.length > 0) {
				const stale = await tx
					.savepoint(async () => {
						const verdicts = await guardVerdicts(ctx, tx, await claimRound(tx, remaining), guards);
						const staleVerdicts = verdicts.filter((verdict) => !verdict.applied);
						if (staleVerdicts.length > 0) throw new UndoRound(staleVerdicts);
						return [];
					})
					.catch((error: unknown) => {
						if (error instanceof UndoRound) return error.stale;
						throw error;
					});
				if (stale.length === 0) break;
				markStale(stale, results);
				const staleOrds = new Set(stale.map((verdict) => verdict.ord));
				remaining = remaining.filter((row) => !staleOrds.has(row.ord));
			}
		}
	});
	return results;
}

/** The claim statement, then a read of keys that changed hands between its snapshot and now. */
async function claimRows(
	ctx: StoreContext,
	db: Session,
	rows: ClaimRow[],
): Promise<ClaimReturnRow[]> {
	return await runWithReread<ClaimRow, ClaimReturnRow>(
		db,
		{ key: `claim:${ctx.s}`, rows, build: (batch) => claimQuery(ctx.s, batch) },
		{
			unresolved: (returned) =>
				!returned.claimed &&
				(returned.existing_status === null || returned.existing_was_takeable === true),
			query: (missing) => {
				// What the snapshot showed is out of date; a key no longer found reads as vanished.
				for (const { returned } of missing) forgetExisting(returned);
				return readKeysQuery(
					ctx.s,
					missing.map(({ row }) => ({ ord: row.ord, scope: row.scope, key: row.key })),
				);
			},
			merge: (returned, found) => Object.assign(returned, found),
		},
	);
}

function forgetExisting(row: ClaimReturnRow): void {
	row.existing_status = null;
	row.existing_fingerprint = null;
	row.existing_result = null;
	row.existing_claim_id = null;
	row.existing_claim_until = null;
	row.existing_created_at = null;
	row.existing_updated_at = null;
	row.existing_claims = null;
}

/** Carries a round's stale verdicts out of its savepoint, which is rolled back. */
class UndoRound {
	constructor(readonly stale: GuardVerdict[]) {}
}

/** The late-event guard's verdicts for the items of a round that were claimed. */
async function guardVerdicts(
	ctx: StoreContext,
	db: Session,
	returned: ClaimReturnRow[],
	guards: Map<number, GuardRow>,
): Promise<GuardVerdict[]> {
	const guarded = returned.filter((row) => row.claimed && guards.has(row.ord));
	if (guarded.length === 0) return [];
	return await db.run<GuardVerdict>(
		guardQuery(
			ctx.s,
			guarded.map((row) => guards.get(row.ord)!),
		),
	);
}

/** A stale event's answer: Stale, with the entity's newest applied version; it holds no claim. */
function markStale(stale: GuardVerdict[], results: ItemResults<ClaimResult>): void {
	for (const verdict of stale) {
		const previous = results[verdict.ord] as ClaimResult;
		results[verdict.ord] = {
			...previous,
			route: 'stale',
			claimId: null,
			replay: false,
			current: {
				version: verdict.current_version,
				occurredAt: verdict.current_occurred_at,
				state: verdict.current_state,
			},
		};
	}
}

function guardRow(
	guard: NonNullable<ClaimInput['guard']>,
	ord: number,
	scope: string,
	key: string,
): GuardRow {
	const entityKey = validateKey(guard.entityKey, 'entityKey');
	const version =
		guard.version === undefined || guard.version === null || guard.version === ''
			? null
			: String(guard.version);
	if (version !== null && !/^-?\d+(\.\d+)?$/.test(version)) {
		throw new ValidationError(
			'version',
			`"${version.slice(0, 40)}" is not a number`,
			'Pass the entity version as a number (e.g. a sequence or revision number), or use Occurred At instead',
		);
	}
	const occurredAt = optionalDate(guard.occurredAt, 'occurredAt');
	const state = optionalText(guard.state, 'state', 255);
	let stateRank: number | null = null;
	if (state !== null && guard.stateOrder && guard.stateOrder.length > 0) {
		stateRank = guard.stateOrder.indexOf(state);
		if (stateRank < 0) {
			throw new ValidationError(
				'state',
				`"${state.slice(0, 40)}" is not in the state order (${guard.stateOrder.join(' → ')})`,
				'Add the state to the State Order, or fix the state field',
			);
		}
	}
	if (version === null && occurredAt === null && stateRank === null) {
		throw new ValidationError(
			'version',
			'the late-event guard needs a version, an occurred-at time or a state',
			'Map Version, Occurred At or State to a field of the event',
		);
	}
	return {
		ord,
		scope: validateKey(guard.scope ?? scope, 'guardScope'),
		entity_key: entityKey,
		version,
		occurred_at: occurredAt ? occurredAt.toISOString() : null,
		state,
		state_rank: stateRank,
		event_key: key,
	};
}

function claimResult(row: ClaimReturnRow, input: ClaimRow): ClaimResult {
	const base = {
		claimId: null,
		replay: false,
		claims: row.existing_claims,
		claimUntil: row.existing_claim_until,
		expiresAt: null,
		storedResult: null,
		existingStatus: row.existing_status,
		firstSeenAt: row.existing_created_at,
		current: null,
	};
	if (row.claimed) {
		return {
			...base,
			route: 'new',
			claimId: input.claim_id,
			replay: row.prior_status === 'failed' || row.prior_status === 'in_progress',
			claims: row.claims,
			claimUntil: row.claim_until,
			expiresAt: row.expires_at,
			existingStatus: row.prior_status,
		};
	}
	if (row.existing_status === null) {
		// The key vanished between the two statements (purged); the caller may simply retry.
		return { ...base, route: 'in_progress' };
	}
	if ((row.existing_fingerprint ?? null) !== (input.fingerprint ?? null))
		return { ...base, route: 'conflict' };
	if (row.existing_status === 'completed')
		return { ...base, route: 'duplicate', storedResult: row.existing_result };
	return { ...base, route: 'in_progress' };
}

/**
 * Settles claims: 'completed' stores the result (later items with the key are duplicates and
 * carry it), 'failed' lets a retry of the event claim the key again. Fenced by the claim id.
 */
export async function settle(
	ctx: StoreContext,
	items: SettleInput[],
	status: 'completed' | 'failed',
	options: BatchOptions = {},
): Promise<ItemResults<SettleResult>> {
	/** The rows sent, by item (`ord`). */
	const sent: SettleRow[] = [];
	const staleAnswers: number[] = [];
	const results = await writeRows<
		SettleInput,
		SettleRow,
		{
			ord: number;
			applied: boolean;
			expires_at: Date | null;
			current_status: string | null;
			current_claim_id: string | null;
		},
		SettleResult
	>(ctx.db, items, options, {
		toRow: (item, ord) => {
			const row: SettleRow = {
				ord,
				scope: validateKey(item.scope, 'scope'),
				key: validateKey(item.key, 'key'),
				claim_id: item.claimId ? validateUuid(item.claimId, 'claimId') : null,
				result:
					status === 'completed' && item.result !== undefined
						? serializePayload(item.result, 'result', ctx.payloadLimit)
						: null,
				error_message: storableMessage(item.errorMessage, 'errorMessage'),
				ttl_ms: optionalInRange(item.ttlMs, 'ttlMs', KEY_TTL),
			};
			sent[ord] = row;
			return row;
		},
		key: `settle:${ctx.s}:${status}`,
		build: (batch) => settleClaimsQuery(ctx.s, batch, status),
		// Two items of one key in one call go one after the other, each answered as if sent alone
		// after the other (the first settles the key, the second finds it settled).
		sameRowKey: (row) => JSON.stringify([row.scope, row.key]),
		charsOf: (row) => (row.result?.length ?? 0) + (row.error_message?.length ?? 0),
		toResult: (row) => {
			// The claim looks settleable in the statement's snapshot, yet its fenced UPDATE did not
			// apply: it waited for another transaction that settled or took over the key, and the
			// read of the key still sees it as before that commit.
			const claimId = sent[row.ord]?.claim_id ?? null;
			if (
				!row.applied &&
				row.current_status === 'in_progress' &&
				(claimId === null || row.current_claim_id === claimId)
			)
				staleAnswers.push(row.ord);
			return {
				applied: row.applied,
				expiresAt: row.expires_at,
				currentStatus: row.applied ? status : row.current_status,
			};
		},
	});
	// The writes have committed: a failed re-read keeps the statement's answers.
	if (staleAnswers.length > 0)
		await answerSettlesAsNow(ctx, results, staleAnswers, sent).catch(() => undefined);
	return results;
}

/** Reads the keys of `ords` again, and answers their items with the key's status now. */
async function answerSettlesAsNow(
	ctx: StoreContext,
	results: ItemResults<SettleResult>,
	ords: number[],
	sent: SettleRow[],
): Promise<void> {
	const now = await ctx.db.run<{ ord: number; existing_status: string | null }>(
		readKeysQuery(
			ctx.s,
			ords.map((ord) => ({ ord, scope: sent[ord].scope, key: sent[ord].key })),
		),
	);
	const statusByOrd = new Map(now.map((row) => [row.ord, row.existing_status]));
	for (const ord of ords) {
		const result = results[ord];
		// A key no longer there (purged meanwhile) has no status.
		if (result && !(result instanceof DurableJobsError))
			result.currentStatus = statusByOrd.get(ord) ?? null;
	}
}
