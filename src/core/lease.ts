import { v7 as uuidv7 } from 'uuid';

import type { StoreContext } from './context';
import { CONCURRENCY_LIMIT, LEASE, LEASE_LIMIT } from './defaults';
import { driverError, isDeadlock } from './errors';
import { validateQueueName } from './identifiers';
import { jobAttemptKey, writeRows, type BatchOptions, type ItemResults } from './items';
import {
	extendLeaseQuery,
	leaseQuery,
	leaseQueuedQuery,
	queueLockQuery,
	runningCountQuery,
	type ExtendRow,
	type LeaseSlot,
} from './sql/lease';
import { nextDueQuery, peekQuery } from './sql/trigger';
import type {
	ExtendInput,
	ExtendResult,
	Job,
	LeaseInput,
	LeasedJob,
	LeasedJobEssentials,
} from './types';
import {
	inRange,
	optionalBoolean,
	optionalInRange,
	optionalText,
	validateCheckpoint,
	validateUuid,
} from './validate';

/** How many times a lease runs when the unique index finds its ordering key taken. */
const ORDERING_KEY_RUNS = 5;

/**
 * The unique index refused a second running job of an ordering key, or two such leases in
 * crossed order deadlocked on each other's index entries. Either statement wrote nothing.
 */
function orderingKeyTaken(error: unknown): boolean {
	const pgError = driverError(error) as { code?: unknown; constraint?: unknown } | null;
	return (
		(pgError?.code === '23505' && pgError.constraint === 'jobs_ordering_running') ||
		isDeadlock(error)
	);
}

/** Second key of the per-queue advisory lock taken when a concurrency limit is enforced. */
const QUEUE_LOCK_NAMESPACE = 0x44_4a_51; // "DJQ"

type LeaseReturnRow = Omit<LeasedJob, 'recovered'> & {
	ord: number;
	expired: boolean;
	/** leaseQueuedQuery only: nothing was leased, because a lease of the queue has expired. */
	rerun?: boolean;
};

/**
 * Claims up to `limit` due jobs of one queue (or jobs whose lease expired) in one statement.
 * Without metadata (`includeMetadata: false`) the jobs are LeasedJobEssentials.
 */
export async function lease(
	ctx: StoreContext,
	input: LeaseInput,
): Promise<Array<LeasedJob | LeasedJobEssentials>> {
	const queue = validateQueueName(input.queue);
	const limit = inRange(input.limit, 'limit', LEASE_LIMIT);
	const leaseMs = inRange(input.leaseMs, 'leaseMs', LEASE);
	const concurrencyLimit = optionalInRange(
		(input.concurrencyLimit as unknown) === '' ? null : input.concurrencyLimit,
		'concurrencyLimit',
		CONCURRENCY_LIMIT,
	);
	const workflowId = optionalText(input.workflowId, 'workflowId', 255);
	const executionId = optionalText(input.executionId, 'executionId', 255);
	const metadata = optionalBoolean(input.includeMetadata, 'includeMetadata', true);
	const statementOptions = {
		waitForFlush: ctx.durableLeases,
		metadata,
		callbackQueue: ctx.callbackQueue,
	};
	const slots = (count: number): LeaseSlot[] =>
		Array.from({ length: count }, (_, ord) => ({
			ord,
			attempt_id: uuidv7(),
			lease_ms: leaseMs,
			workflow_id: workflowId,
			execution_id: executionId,
		}));
	async function leaseOnce(): Promise<LeaseReturnRow[]> {
		return concurrencyLimit === null
			? await leaseAnyNumber()
			: await leaseUnderLimit(concurrencyLimit);
	}
	async function leaseAnyNumber(): Promise<LeaseReturnRow[]> {
		const callSlots = slots(limit);
		// Leases of one queue from concurrent calls share a statement (everything else a call
		// sends is in its slots), if their stores write the failure events of jobs whose last
		// attempt expired into one callback queue. Queue names may hold any separator.
		const run = (kind: string, query: typeof leaseQuery) =>
			ctx.db.runRows<LeaseReturnRow, LeaseSlot>({
				key: JSON.stringify([
					kind,
					ctx.s,
					queue,
					ctx.callbackQueue,
					ctx.durableLeases ? 'durable' : 'flush-later',
					metadata ? 'metadata' : 'essentials',
				]),
				rows: callSlots,
				build: (batch) => query(ctx.schema, ctx.s, queue, batch, statementOptions),
				coalesce: true,
			});
		// The usual statement takes queued jobs only; when a lease of the queue has expired it
		// takes nothing and says so, and the full statement recovers that job.
		const queued = await run('lease-queued', leaseQueuedQuery);
		return queued.some((row) => row.rerun) ? await run('lease', leaseQuery) : queued;
	}
	async function leaseUnderLimit(maxRunning: number): Promise<LeaseReturnRow[]> {
		// The running count must be read after every other leaser of this queue has committed,
		// so the lock is taken in its own statement: a statement's snapshot is fixed when it
		// starts, and a lock taken inside the lease statement would count with stale data.
		return await ctx.db.transaction(async (tx) => {
			await tx.run(queueLockQuery(QUEUE_LOCK_NAMESPACE, queue));
			const [{ running, expired, exhausted }] = await tx.run<{
				running: number;
				expired: number;
				exhausted: number;
			}>(runningCountQuery(ctx.s, queue));
			// Jobs whose lease expired keep their slots; taking one over uses its own slot.
			const queuedSlots = Math.max(0, Math.min(limit, maxRunning - running));
			const count = Math.min(limit, queuedSlots + expired);
			// With no slot to fill, the lease still runs to fail the jobs that expired on their
			// last attempt: nothing else does, and until then they hold their slots.
			if (count <= 0 && exhausted === 0) return [];
			return await tx.run<LeaseReturnRow>(
				leaseQuery(ctx.schema, ctx.s, queue, slots(Math.max(count, 1)), {
					...statementOptions,
					queuedSlots,
				}),
			);
		});
	}
	let rows: LeaseReturnRow[] = [];
	for (let run = 1; ; run++) {
		try {
			rows = await leaseOnce();
			break;
		} catch (error) {
			// Two leases whose snapshots crossed took two jobs of one ordering key; the unique
			// index refused the second, nothing of it was written, and a new snapshot sees the
			// first. Each run is a new race, so a few are plenty.
			if (!orderingKeyTaken(error) || run === ORDERING_KEY_RUNS) throw error;
		}
	}
	if (!metadata) {
		return rows.map((row) => ({
			id: row.id,
			queue,
			payload: row.payload,
			attempts: row.attempts,
			max_attempts: row.max_attempts,
			attempt_id: row.attempt_id,
			recovered: row.expired,
		}));
	}
	return rows.map((row) => ({
		id: row.id,
		queue: row.queue,
		payload: row.payload,
		idempotency_key: row.idempotency_key,
		priority: row.priority,
		attempts: row.attempts,
		max_attempts: row.max_attempts,
		attempt_id: row.attempt_id,
		lease_until: row.lease_until,
		ordering_key: row.ordering_key,
		correlation_id: row.correlation_id,
		created_at: row.created_at,
		recovered: row.expired,
	}));
}

/**
 * Heartbeat: moves lease_until forward, fenced by (job_id, attempt_id, running). A checkpoint
 * is recorded on the attempt (see migration 0006), only for items whose lease was extended.
 */
export async function extendLease(
	ctx: StoreContext,
	items: ExtendInput[],
	options: BatchOptions = {},
): Promise<ItemResults<ExtendResult>> {
	return await writeRows<
		ExtendInput,
		ExtendRow,
		{
			ord: number;
			extended: boolean;
			lease_until: Date | null;
			current_status: Job['status'] | null;
		},
		ExtendResult
	>(ctx.db, items, options, {
		toRow: (item, ord) => ({
			ord,
			job_id: validateUuid(item.jobId, 'jobId'),
			attempt_id: validateUuid(item.attemptId, 'attemptId'),
			lease_ms: inRange(item.leaseMs, 'leaseMs', LEASE),
			checkpoint: validateCheckpoint(item.checkpoint),
			workflow_id: optionalText(item.workflowId, 'workflowId', 255),
			execution_id: optionalText(item.executionId, 'executionId', 255),
		}),
		key: `extend:${ctx.s}`,
		build: (batch) => extendLeaseQuery(ctx.schema, ctx.s, batch),
		coalesce: true,
		sameRowKey: jobAttemptKey,
		toResult: (row) => ({
			extended: row.extended,
			leaseUntil: row.lease_until,
			currentStatus: row.extended ? 'running' : row.current_status,
		}),
	});
}

/** Milliseconds until the earliest queued job of `queue` that is not due yet; null if none. */
export async function nextDueInMs(ctx: StoreContext, queue: string): Promise<number | null> {
	const rows = await ctx.db.run<{ due_in_ms: string | null }>(
		nextDueQuery(ctx.s, validateQueueName(queue)),
	);
	const dueInMs = rows[0]?.due_in_ms;
	return dueInMs === null || dueInMs === undefined ? null : Number(dueInMs);
}

/** The job a lease would take next (or the queued job due soonest), read-only; null if none. */
export async function peekJob(
	ctx: StoreContext,
	queue: string,
): Promise<(Job & { due: boolean }) | null> {
	const rows = await ctx.db.run<Job & { due: boolean }>(peekQuery(ctx.s, validateQueueName(queue)));
	return rows[0] ?? null;
}
