import type { StoreContext } from './context';
import { DELAY, MAX_ATTEMPTS, PRIORITY } from './defaults';
import { DurableJobsError, IdempotencyConflictError, runAgainAfterDeadlock } from './errors';
import type { Session } from './executor';
import { validateQueueName } from './identifiers';
import { newJobId } from './ids';
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
	runAtKey,
	type EnqueueRow,
	type RunAtRow,
} from './sql/enqueue';
import { statusTokenSigner, storedTokenHash, tokenSecret } from './tokens';
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
	const sign = statusTokenSigner(secret);
	/** The status token of each item's new job id, by `ord`, derived once. */
	const tokens = new Array<string>(items.length);
	const { rows, results } = validateItems<EnqueueInput, EnqueueRow, EnqueueResult>(
		items,
		(item, ord) => {
			const row = enqueueRow(ctx, item, ord);
			// Ids and tokens only for valid items, after validation.
			row.id = newJobId();
			const token = sign(row.id);
			tokens[ord] = token;
			row.status_token_hash = storedTokenHash(token);
			return row;
		},
		options,
	);
	if (rows.length === 0) return results;

	if (!rows.some((row) => row.idempotency_key !== null)) {
		// Nothing can conflict: one INSERT, atomic on its own, so no transaction either.
		const returned = await ctx.db.runRows<RunAtRow, EnqueueRow>({
			key: `enqueue-without-keys:${ctx.s}`,
			rows,
			build: (batch) => enqueueWithoutKeysQuery(ctx.schema, ctx.s, batch),
			returns: 'shared',
			coalesce: true,
			charsOf: payloadChars,
		});
		const runAts = new Map<string, unknown>();
		for (const row of returned) runAts.set(row.key, row.run_at);
		for (const row of rows) {
			const runAt = runAts.get(runAtKey(row));
			results[row.ord] =
				runAt === undefined
					? unresolved()
					: {
							jobId: row.id,
							status: 'queued',
							runAt: ownCopy(runAt),
							deduplicated: false,
							conflict: false,
							statusToken: tokens[row.ord],
						};
		}
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
					statusToken: conflict ? null : row.id === input.id ? tokens[row.ord] : sign(row.id),
				};
			}
		}
	};

	// Two batches that claim the same keys in crossed orders wait for each other, and PostgreSQL
	// aborts one of them: nothing of it was written, and run again it finds the other's jobs.
	return await runAgainAfterDeadlock(async () => {
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
	});
}

/**
 * A returned run_at for one job: jobs that share a run_at share its row, and each job gets a
 * Date of its own (a value from a result parser the application registered stays as it is).
 */
function ownCopy(runAt: unknown): Date {
	return (
		runAt instanceof Date && Object.getPrototypeOf(runAt) === Date.prototype
			? new Date(runAt.getTime())
			: runAt
	) as Date;
}

const JOB_MAX_ATTEMPTS = { ...MAX_ATTEMPTS, default: MAX_ATTEMPTS.jobDefault } as const;

function enqueueRow(ctx: StoreContext, item: EnqueueInput, ord: number): EnqueueRow {
	const queue = validateQueueName(item.queue);
	const payload = serializePayload(item.payload, 'payload', ctx.payloadLimit);
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
		max_attempts: inRange(item.maxAttempts, 'maxAttempts', JOB_MAX_ATTEMPTS),
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
			build: (batch) => enqueueQuery(ctx.schema, ctx.s, batch),
			coalesce: true,
			charsOf: payloadChars,
		},
		rereadByKey(ctx.s, (row) => row.idempotency_key!),
	);
}

function payloadChars(row: EnqueueRow): number {
	return row.payload.length;
}

/**
 * runWithReread's second statement for an INSERT of jobs under (queue, idempotency key): a row
 * that came back without a job (its key committed after the statement's snapshot, or by the
 * same statement) is found by its key, and answers as deduplicated.
 */
export function rereadByKey<
	Row extends { ord: number; queue: string },
	Returned extends { id: string | null; deduplicated: boolean },
>(s: string, keyOf: (row: Row) => string) {
	return {
		unresolved: (returned: Returned) => returned.id === null,
		query: (missing: Array<{ returned: Returned; row: Row }>) =>
			findByKeysQuery(
				s,
				missing.map(({ row }) => ({ ord: row.ord, queue: row.queue, idempotency_key: keyOf(row) })),
			),
		merge: (returned: Returned, found: Returned) =>
			Object.assign(returned, found, { deduplicated: true }),
	};
}
