import { v7 as uuidv7 } from 'uuid';

import type { StoreContext } from './context';
import { DELAY, MAX_ATTEMPTS, PRIORITY } from './defaults';
import { DurableJobsError, IdempotencyConflictError } from './errors';
import type { Session } from './executor';
import { validateQueueName } from './identifiers';
import {
	runWithReread,
	throwFirst,
	validateItems,
	type BatchOptions,
	type ItemResults,
} from './items';
import {
	enqueueQuery,
	enqueueWithoutKeysQuery,
	findByKeysQuery,
	type EnqueueRow,
} from './sql/enqueue';
import { statusToken, storedTokenHash, tokenSecret } from './tokens';
import type { EnqueueInput, EnqueueResult, Job } from './types';
import {
	fingerprint,
	inRange,
	optionalDate,
	optionalKey,
	optionalText,
	optionalUrl,
	serializePayload,
} from './validate';

export interface EnqueueOptions extends BatchOptions {
	/** A key reused with another payload: an error (default), or the job stored under the key. */
	onConflict?: 'error' | 'existing';
}

interface EnqueueReturnRow {
	ord: number;
	id: string | null;
	status: Job['status'];
	run_at: Date;
	deduplicated: boolean;
	existing_fingerprint: string | null;
}

function unresolved(): DurableJobsError {
	return new DurableJobsError(
		'enqueue_unresolved',
		'The job could not be stored or found; retry the request',
		{ httpStatus: 503 },
	);
}

/**
 * Inserts one job per item in one statement. An item whose idempotency key exists with the
 * same payload fingerprint returns the existing job (deduplicated); with another payload it
 * gets an IdempotencyConflictError and writes nothing. With `allOrNothing`, any bad item
 * rolls the whole batch back and the first error is thrown.
 */
export async function enqueue(
	ctx: StoreContext,
	items: EnqueueInput[],
	options: EnqueueOptions = {},
): Promise<ItemResults<EnqueueResult>> {
	const secret = items.length > 0 ? await tokenSecret(ctx.db, ctx.schema) : Buffer.alloc(0);
	/** The status token of each new job id, derived once. */
	const tokens = new Map<string, string>();
	const { rows, results } = validateItems<EnqueueInput, EnqueueRow, EnqueueResult>(
		items,
		(item, ord) => {
			const row = enqueueRow(ctx, item, ord);
			// Ids and tokens only for valid items, after validation.
			row.id = uuidv7();
			const token = statusToken(secret, row.id);
			tokens.set(row.id, token);
			row.status_token_hash = storedTokenHash(token);
			return row;
		},
		options,
	);
	if (rows.length === 0) return results;

	if (!rows.some((row) => row.idempotency_key !== null)) {
		// Nothing can conflict: one INSERT, atomic on its own, so no transaction either.
		const byId = new Map(rows.map((row) => [row.id, row]));
		const inserted = await ctx.db.runRows<
			{ id: string; status: Job['status']; run_at: Date },
			EnqueueRow
		>({
			key: `enqueue-without-keys:${ctx.s}`,
			rows,
			build: (batch) => enqueueWithoutKeysQuery(ctx.s, batch),
			returns: 'id',
			coalesce: true,
		});
		for (const row of inserted) {
			results[byId.get(row.id)!.ord] = {
				jobId: row.id,
				status: row.status,
				runAt: row.run_at,
				deduplicated: false,
				conflict: false,
				statusToken: tokens.get(row.id)!,
			};
		}
		for (const row of rows) results[row.ord] ??= unresolved();
		return results;
	}

	const resolve = async (db: Session) => {
		const returned = await resolveKeys(ctx, db, rows);
		const byOrd = new Map(rows.map((row) => [row.ord, row]));
		for (const row of returned) {
			const input = byOrd.get(row.ord)!;
			const conflict = row.deduplicated && row.existing_fingerprint !== input.payload_fingerprint;
			if (row.id === null) {
				results[row.ord] = unresolved();
			} else if (conflict && options.onConflict !== 'existing') {
				results[row.ord] = new IdempotencyConflictError(input.idempotency_key ?? '', row.id);
			} else {
				results[row.ord] = {
					jobId: row.id,
					status: row.status,
					runAt: row.run_at,
					deduplicated: row.deduplicated,
					conflict,
					statusToken: conflict ? null : (tokens.get(row.id) ?? statusToken(secret, row.id)),
				};
			}
		}
	};

	if (options.allOrNothing) {
		// The INSERT must be undone when an item turns out to conflict, so the batch runs in a
		// transaction; the commit happens only when every item succeeded.
		await ctx.db.transaction(async (tx) => {
			await resolve(tx);
			throwFirst(results);
		});
	} else {
		await resolve(ctx.db);
	}
	return results;
}

function enqueueRow(ctx: StoreContext, item: EnqueueInput, ord: number): EnqueueRow {
	const queue = validateQueueName(item.queue);
	const payload = serializePayload(item.payload, 'payload', ctx.maxPayloadBytes);
	const runAt = optionalDate(item.runAt, 'runAt');
	const idempotencyKey = optionalKey(item.idempotencyKey, 'idempotencyKey');
	return {
		ord,
		id: '',
		queue,
		payload,
		idempotency_key: idempotencyKey,
		// Only compared when a key is reused, so jobs without a key do not need one.
		payload_fingerprint: idempotencyKey === null ? null : fingerprint(item.payload),
		priority: inRange(item.priority, 'priority', PRIORITY),
		run_at: runAt ? runAt.toISOString() : null,
		delay_ms: inRange(item.delayMs, 'delayMs', DELAY),
		max_attempts: inRange(item.maxAttempts, 'maxAttempts', {
			...MAX_ATTEMPTS,
			default: MAX_ATTEMPTS.jobDefault,
		}),
		ordering_key: optionalKey(item.orderingKey, 'orderingKey'),
		callback_url: optionalUrl(item.callbackUrl, 'callbackUrl'),
		correlation_id: optionalText(item.correlationId, 'correlationId', 255),
		status_token_hash: null,
	};
}

/**
 * The INSERT with keys, then, for keys committed concurrently (invisible to its snapshot), a
 * second statement that finds their winners.
 */
async function resolveKeys(
	ctx: StoreContext,
	db: Session,
	rows: EnqueueRow[],
): Promise<EnqueueReturnRow[]> {
	return await runWithReread<EnqueueRow, EnqueueReturnRow>(
		db,
		{
			key: `enqueue:${ctx.s}`,
			rows,
			build: (batch) => enqueueQuery(ctx.s, batch),
			coalesce: true,
		},
		{
			unresolved: (returned) => returned.id === null,
			query: (missing) =>
				findByKeysQuery(
					ctx.s,
					missing.map(({ row }) => ({
						ord: row.ord,
						queue: row.queue,
						idempotency_key: row.idempotency_key!,
					})),
				),
			merge: (returned, found) => Object.assign(returned, found, { deduplicated: true }),
		},
	);
}
