import type pg from 'pg';

import { complete } from './complete';
import {
	cancelQueuedJobs,
	jobStory,
	listJobs,
	queueOverview,
	requeueFailedJobs,
	type DashboardActionResult,
	type JobListPage,
	type JobStory,
	type ListJobsInput,
	type QueueOverview,
} from './dashboard';
import type { CoalescingStats } from './coalescer';
import type { StoreContext } from './context';
import { DEFAULT_CALLBACK_QUEUE, DEFAULT_MAX_PAYLOAD_BYTES } from './defaults';
import { enqueue, type EnqueueOptions } from './enqueue';
import { Executor } from './executor';
import {
	DEFAULT_SCHEMA,
	quoteIdentifier,
	validateQueueName,
	validateSchemaName,
} from './identifiers';
import { claim, settle } from './idempotency';
import type { BatchOptions, ItemResults } from './items';
import { extendLease, lease, nextDueInMs, peekJob } from './lease';
import { writeOutbox, type OutboxOptions } from './outbox';
import {
	cancel,
	getJobs,
	getStatusMany,
	purge,
	requeue,
	stats,
	unknownOutcomes,
	type CancelledJob,
	type PurgeInput,
	type PurgeResult,
	type RequeueInput,
	type RequeuedJob,
} from './status';
import type {
	ClaimInput,
	ClaimResult,
	CompleteInput,
	CompleteResult,
	EnqueueInput,
	EnqueueResult,
	ExtendInput,
	ExtendResult,
	Job,
	JobStatusView,
	LeaseInput,
	LeasedJob,
	LeasedJobEssentials,
	OutboxEventInput,
	OutboxResult,
	QueueStats,
	SettleInput,
	SettleResult,
} from './types';

export type { ItemResults } from './items';

export interface StoreOptions {
	schema?: string;
	/** Largest accepted payload, in bytes of JSON. */
	maxPayloadBytes?: number;
	/**
	 * How a user raises maxPayloadBytes, named in the fix of a payload or result over it (a
	 * node's option, say), or null where the user cannot raise it. Default: this option itself.
	 */
	payloadLimitSetting?: string | null;
	/** Queue that receives job-finished events for jobs with a callback URL. */
	callbackQueue?: string;
	/**
	 * Send the frequent statements (enqueue, lease, heartbeat, complete, claim, settle, status,
	 * stats) as named prepared statements, parsed once per connection (default true). Turn it
	 * off behind a pooler that does not keep prepared statements across transactions, e.g.
	 * PgBouncer in transaction mode before 1.21 (or without max_prepared_statements).
	 */
	preparedStatements?: boolean;
	/**
	 * Merge concurrent enqueue,
	 * lease, extend-lease and complete calls over the same pool into one statement and one
	 * commit (default true). Off: every call sends its own statement.
	 */
	coalesceCalls?: boolean;
	/**
	 * Make every lease wait for its WAL flush before it answers (default false). By default a
	 * lease commits with synchronous_commit off for its own transaction: it answers without
	 * waiting for the disk, which roughly halves the flushes a worker waits for, since a
	 * completion must wait for its flush anyway. The trade: if the database server crashes
	 * (a server or OS crash, not a stop or restart), leases from its last fraction of a second
	 * (at most three times wal_writer_delay) can be forgotten. Those jobs are leased and run
	 * again, as after a worker crash, and the forgotten attempt's Job Complete gets Lease Lost,
	 * because its attempt id no longer exists. Enqueue, complete, extend lease (and its
	 * checkpoint), claims and outbox writes always wait for their flush.
	 */
	durableLeases?: boolean;
}

/**
 * The core's one entry point: every operation the package offers, each delegated to the
 * module of its concern (enqueue, lease, complete, idempotency, outbox, status). It has no n8n
 * dependency; the nodes are thin glue over it.
 */
export class JobStore {
	readonly schema: string;
	readonly maxPayloadBytes: number;
	readonly callbackQueue: string;
	readonly preparedStatements: boolean;
	private readonly ctx: StoreContext;

	constructor(
		readonly pool: pg.Pool,
		options: StoreOptions = {},
	) {
		this.schema = validateSchemaName(options.schema ?? DEFAULT_SCHEMA);
		this.maxPayloadBytes = options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
		this.callbackQueue = validateQueueName(
			options.callbackQueue ?? DEFAULT_CALLBACK_QUEUE,
			'callbackQueue',
		);
		this.preparedStatements = options.preparedStatements !== false;
		this.ctx = {
			db: new Executor(pool, this.preparedStatements, options.coalesceCalls !== false),
			schema: this.schema,
			s: quoteIdentifier(this.schema),
			payloadLimit: {
				bytes: this.maxPayloadBytes,
				raisedBy:
					options.payloadLimitSetting === undefined
						? `the store's maxPayloadBytes option (now ${this.maxPayloadBytes})`
						: options.payloadLimitSetting,
			},
			callbackQueue: this.callbackQueue,
			durableLeases: options.durableLeases === true,
		};
	}

	/**
	 * Inserts one job per item in one statement. An item whose idempotency key exists with the
	 * same payload fingerprint returns the existing job (deduplicated); with another payload it
	 * gets an IdempotencyConflictError and writes nothing. With `allOrNothing`, any bad item
	 * rolls the whole batch back and the first error is thrown.
	 */
	/**
	 * What the call coalescer of this store's pool has done (shared by every store over the
	 * pool); null when this store does not coalesce.
	 */
	coalescingStats(): CoalescingStats | null {
		return this.ctx.db.coalescingStats();
	}

	async enqueue(
		items: EnqueueInput[],
		options: EnqueueOptions = {},
	): Promise<ItemResults<EnqueueResult>> {
		return await enqueue(this.ctx, items, options);
	}

	/** Claims up to `limit` due jobs of one queue; see LeaseInput.includeMetadata. */
	lease(input: LeaseInput & { includeMetadata?: true }): Promise<LeasedJob[]>;
	lease(input: LeaseInput & { includeMetadata: false }): Promise<LeasedJobEssentials[]>;
	lease(input: LeaseInput): Promise<LeasedJobEssentials[]>;
	async lease(input: LeaseInput): Promise<LeasedJobEssentials[]> {
		return await lease(this.ctx, input);
	}

	/** Milliseconds until the earliest queued job of `queue` is due (Job Trigger's timer); null if none waits. */
	async nextDueInMs(queue: string): Promise<number | null> {
		return await nextDueInMs(this.ctx, queue);
	}

	/** The job a lease would take next, read-only (Job Trigger's test run); null if none. */
	async peekJob(queue: string): Promise<(Job & { due: boolean }) | null> {
		return await peekJob(this.ctx, queue);
	}

	/**
	 * Heartbeat: moves lease_until forward, fenced by (job_id, attempt_id, running). A checkpoint
	 * is recorded on the attempt (see migration 0006), only for items whose lease was extended.
	 */
	async extendLease(
		items: ExtendInput[],
		options: BatchOptions = {},
	): Promise<ItemResults<ExtendResult>> {
		return await extendLease(this.ctx, items, options);
	}

	async complete(
		items: CompleteInput[],
		options: BatchOptions = {},
	): Promise<ItemResults<CompleteResult>> {
		return await complete(this.ctx, items, options);
	}

	async claim(items: ClaimInput[], options: BatchOptions = {}): Promise<ItemResults<ClaimResult>> {
		return await claim(this.ctx, items, options);
	}

	async completeClaims(
		items: SettleInput[],
		options: BatchOptions = {},
	): Promise<ItemResults<SettleResult>> {
		return await settle(this.ctx, items, 'completed', options);
	}

	async failClaims(
		items: SettleInput[],
		options: BatchOptions = {},
	): Promise<ItemResults<SettleResult>> {
		return await settle(this.ctx, items, 'failed', options);
	}

	/**
	 * Writes events to the outbox, in one transaction. An item's companion SQL (the business
	 * write) runs with that item's parameters, followed by its event, in a savepoint; the events
	 * of items without SQL go in one statement. A repeated event (same id and payload) answers
	 * `deduplicated: true` and its SQL is undone; the same id with another payload fails with
	 * `event_id_reused`. With `allOrNothing`, any failure rolls everything back and is thrown;
	 * otherwise only the failing item is undone.
	 */
	async writeOutbox(
		items: OutboxEventInput[],
		options: OutboxOptions = {},
	): Promise<ItemResults<OutboxResult>> {
		return await writeOutbox(this.ctx, items, options);
	}

	/**
	 * A job by id and status token. Unknown ids, malformed ids and wrong tokens all answer null
	 * after the same work (one lookup, one constant-time hash compare).
	 */
	async getStatus(jobId: string, token: string): Promise<JobStatusView | null> {
		const [view] = await getStatusMany(this.ctx, [{ jobId, token }]);
		return view;
	}

	/**
	 * Batch form of getStatus: two statements for any number of lookups. Each entry is the view
	 * or null, and null means the same thing for unknown ids, malformed ids and wrong tokens.
	 */
	async getStatusMany(
		lookups: Array<{ jobId: unknown; token: unknown }>,
	): Promise<Array<JobStatusView | null>> {
		return await getStatusMany(this.ctx, lookups);
	}

	/** Operator view by id (no token): for Job Status in admin workflows. */
	async getJobs(jobIds: string[]): Promise<JobStatusView[]> {
		return await getJobs(this.ctx, jobIds);
	}

	async stats(queue?: string | null): Promise<QueueStats[]> {
		return await stats(this.ctx, queue);
	}

	/**
	 * Replays dead-lettered jobs. A selection must name job ids, or a queue together with
	 * `confirm: true`; it is capped by `limit`, so nothing is requeued "all by accident".
	 */
	async requeue(selection: RequeueInput): Promise<RequeuedJob[]> {
		return await requeue(this.ctx, selection);
	}

	async cancel(jobIds: string[], reason?: string | null): Promise<CancelledJob[]> {
		return await cancel(this.ctx, jobIds, reason);
	}

	async purge(options: PurgeInput): Promise<PurgeResult> {
		return await purge(this.ctx, options);
	}

	/** Jobs whose attempt ended with no recorded outcome: check the external system before replaying. */
	async unknownOutcomes(
		queue?: string | null,
		limit = 100,
	): Promise<Array<Record<string, unknown>>> {
		return await unknownOutcomes(this.ctx, queue, limit);
	}

	// The jobs dashboard (src/core/dashboard/).

	async queueOverview(options: { chartSince?: Date | string | null } = {}): Promise<QueueOverview> {
		return await queueOverview(this.ctx, options);
	}

	async listJobs(input: ListJobsInput = {}): Promise<JobListPage> {
		return await listJobs(this.ctx, input);
	}

	async jobStory(
		jobId: unknown,
		options: { previewChars?: number } = {},
	): Promise<JobStory | null> {
		return await jobStory(this.ctx, jobId, options);
	}

	async requeueFailedJobs(input: {
		jobIds: unknown;
		asOf: unknown;
		additionalAttempts?: number;
	}): Promise<DashboardActionResult> {
		return await requeueFailedJobs(this.ctx, input);
	}

	async cancelQueuedJobs(input: {
		jobIds: unknown;
		reason?: string | null;
	}): Promise<DashboardActionResult> {
		return await cancelQueuedJobs(this.ctx, input);
	}
}
