import type { StoreContext } from './context';
import { announceFinished } from './finishNotices';
import {
	DEFAULT_CANCEL_REASON,
	PURGE_LIMIT,
	PURGE_OLDER_THAN,
	REQUEUE_ADDITIONAL_ATTEMPTS,
	REQUEUE_LIMIT,
	TERMINAL_STATUSES,
	UNKNOWN_OUTCOMES_LIMIT,
} from './defaults';
import { ValidationError } from './errors';
import { validateQueueName } from './identifiers';
import {
	attemptsQuery,
	cancelQuery,
	jobsByIdQuery,
	purgeIdempotencyQuery,
	purgeJobsQuery,
	requeueQuery,
	statsQuery,
	statusViewsQuery,
	tokenHashesQuery,
	unknownOutcomeQuery,
	type RequeueSelection,
} from './sql/status';
import { lookupId, tokenMatches } from './tokens';
import type { Attempt, Job, JobStatusView, QueueStats } from './types';
import { inRange, optionalDate, optionalText, validateUuid } from './validate';

/**
 * Batch form of the status lookup: two statements for any number of lookups. Each entry is the
 * view or null, and null means the same thing for unknown ids, malformed ids and wrong tokens.
 */
export async function getStatusMany(
	ctx: StoreContext,
	lookups: Array<{ jobId: unknown; token: unknown }>,
): Promise<Array<JobStatusView | null>> {
	const ids = lookups.map((lookup) => lookupId(lookup.jobId));
	const hashes = await ctx.db.run<{ id: string; status_token_hash: Buffer | null }>(
		tokenHashesQuery(ctx.s, [...new Set(ids)]),
	);
	const hashById = new Map(hashes.map((row) => [row.id, row.status_token_hash]));
	const matchedIds = lookups.map((lookup, index) =>
		tokenMatches(hashById.get(ids[index]), lookup.token) ? ids[index] : null,
	);
	const wanted = [...new Set(matchedIds.filter((id): id is string => id !== null))];
	if (wanted.length === 0) return matchedIds.map(() => null);
	const rows = await ctx.db.run<Job & { attempt_rows: Array<Record<string, unknown>> }>(
		statusViewsQuery(ctx.s, wanted),
	);
	const views = new Map(
		rows.map(({ attempt_rows: attemptRows, ...job }) => [
			job.id,
			{ job, attempts: attemptRows.map(attemptFromJson) },
		]),
	);
	return matchedIds.map((id) => (id === null ? null : (views.get(id) ?? null)));
}

/** Operator view by id (no token): for Job Status in admin workflows. */
export async function getJobs(ctx: StoreContext, jobIds: string[]): Promise<JobStatusView[]> {
	const ids = validateIds(jobIds);
	if (ids.length === 0) return [];
	const jobs = await ctx.db.run<Job>(jobsByIdQuery(ctx.s, ids));
	const attempts = await ctx.db.run<Attempt>(attemptsQuery(ctx.s, ids));
	return jobs.map((job) => ({
		job,
		attempts: attempts.filter((attempt) => attempt.job_id === job.id),
	}));
}

export async function stats(ctx: StoreContext, queue?: string | null): Promise<QueueStats[]> {
	const name = queue ? validateQueueName(queue) : null;
	const rows = await ctx.db.run<Record<string, string | number | null>>(statsQuery(ctx.s, name));
	const count = (value: unknown) => (value === null || value === undefined ? 0 : Number(value));
	const age = (value: unknown) =>
		value === null || value === undefined ? null : Math.max(0, Number(value));
	return rows.map((row) => ({
		queue: String(row.queue),
		queued: count(row.queued),
		ready: count(row.ready),
		retrying: count(row.retrying),
		running: count(row.running),
		running_expired: count(row.running_expired),
		oldest_ready_age_seconds: age(row.oldest_ready_age_seconds),
		oldest_queued_age_seconds: age(row.oldest_queued_age_seconds),
		done: count(row.done),
		failed: count(row.failed),
		cancelled: count(row.cancelled),
		dead_letter: count(row.failed),
	}));
}

export interface RequeueInput {
	jobIds?: string[] | null;
	queue?: string | null;
	errorCode?: string | null;
	errorClass?: string | null;
	failedAfter?: Date | string | null;
	failedBefore?: Date | string | null;
	includeCancelled?: boolean;
	confirm?: boolean;
	/** How many jobs a filter may replay (default 100); by ids, every named job is considered. */
	limit?: number;
	additionalAttempts?: number;
}

/**
 * A job a requeue replayed (`requeued`), or, asked for by id, one it did not: its current
 * status (not failed, or locked by a requeue running at the same time), or nulls for an id no
 * job has.
 */
export type RequeuedJob = {
	id: string;
	queue: string | null;
	status: string | null;
	attempts: number | null;
	max_attempts: number | null;
	requeued: boolean;
};

/**
 * Replays dead-lettered jobs. A selection must name job ids, or a queue together with
 * `confirm: true`; it is capped by `limit`, so nothing is requeued "all by accident".
 */
export async function requeue(ctx: StoreContext, selection: RequeueInput): Promise<RequeuedJob[]> {
	const jobIds =
		selection.jobIds && selection.jobIds.length > 0
			? [...new Set(validateIds(selection.jobIds))]
			: null;
	if (!jobIds) {
		if (!selection.queue) {
			throw new ValidationError(
				'jobIds',
				'requeue needs job ids or a queue filter',
				'Pass the ids of the failed jobs to replay, or select by queue (and error code/class) with Confirm turned on',
			);
		}
		if (selection.confirm !== true) {
			throw new ValidationError(
				'confirm',
				'requeue by filter must be confirmed',
				'Turn on "Confirm Requeue by Filter" to replay every failed job the filter matches (up to the limit)',
			);
		}
	}
	const query: RequeueSelection = {
		jobIds,
		queue: selection.queue ? validateQueueName(selection.queue) : null,
		errorCode: optionalText(selection.errorCode, 'errorCode', 100),
		errorClass: optionalText(selection.errorClass, 'errorClass', 40),
		failedAfter: optionalDate(selection.failedAfter, 'failedAfter')?.toISOString() ?? null,
		failedBefore: optionalDate(selection.failedBefore, 'failedBefore')?.toISOString() ?? null,
		includeCancelled: selection.includeCancelled === true,
		limit: jobIds ? jobIds.length : inRange(selection.limit, 'limit', REQUEUE_LIMIT),
		additionalAttempts: inRange(
			selection.additionalAttempts,
			'additionalAttempts',
			REQUEUE_ADDITIONAL_ATTEMPTS,
		),
	};
	return await ctx.db.run<RequeuedJob>(requeueQuery(ctx.s, query));
}

export type CancelledJob = {
	id: string;
	cancelled: boolean;
	status: string | null;
};

/** Cancels queued or running jobs; a running job's worker then gets Lease Lost. */
export async function cancel(
	ctx: StoreContext,
	jobIds: string[],
	reason?: string | null,
): Promise<CancelledJob[]> {
	const ids = validateIds(jobIds);
	if (ids.length === 0) return [];
	const rows = await ctx.db.run<CancelledJob & { queue: string | null }>(
		cancelQuery(ctx.s, ids, optionalText(reason, 'reason', 1000) ?? DEFAULT_CANCEL_REASON),
	);
	// A cancelled job frees its ordering key and, if it ran, its slot of a concurrency limit.
	announceFinished(
		ctx,
		rows.map((row) => row.queue),
	);
	return rows.map(({ id, cancelled, status }) => ({ id, cancelled, status }));
}

export interface PurgeInput {
	queue?: string | null;
	olderThanMs: number;
	/** The terminal statuses to purge: all three when left out; an empty list is refused. */
	statuses?: string[];
	limit?: number;
	includeIdempotencyKeys?: boolean;
}

export type PurgeResult = {
	deleted: number;
	done: number;
	failed: number;
	cancelled: number;
	idempotencyKeys: number;
};

/** Deletes finished jobs older than the retention, and (by default) expired idempotency keys. */
export async function purge(ctx: StoreContext, options: PurgeInput): Promise<PurgeResult> {
	const olderThanMs = inRange(options.olderThanMs, 'olderThanMs', PURGE_OLDER_THAN);
	if (options.statuses != null && options.statuses.length === 0) {
		// An empty choice is not "all": failed jobs are dead letters, kept unless asked for.
		throw new ValidationError(
			'statuses',
			'names no status, so nothing would be purged',
			'Choose at least one of done, failed and cancelled, or leave statuses out for all three',
		);
	}
	const statuses = options.statuses ?? [...TERMINAL_STATUSES];
	for (const status of statuses) {
		if (!(TERMINAL_STATUSES as readonly string[]).includes(status)) {
			throw new ValidationError(
				'statuses',
				`"${status}" is not a terminal status`,
				'Purge only done, failed or cancelled jobs',
			);
		}
	}
	const limit = inRange(options.limit, 'limit', PURGE_LIMIT);
	const [counts] = await ctx.db.run<Omit<PurgeResult, 'idempotencyKeys'>>(
		purgeJobsQuery(
			ctx.s,
			options.queue ? validateQueueName(options.queue) : null,
			olderThanMs,
			statuses,
			limit,
		),
	);
	let idempotencyKeys = 0;
	if (options.includeIdempotencyKeys !== false) {
		idempotencyKeys = (await ctx.db.result(purgeIdempotencyQuery(ctx.s, limit))).rowCount ?? 0;
	}
	return { ...counts, idempotencyKeys };
}

/** Jobs whose attempt ended with no recorded outcome: check the external system before replaying. */
export async function unknownOutcomes(
	ctx: StoreContext,
	queue?: string | null,
	limit: number = UNKNOWN_OUTCOMES_LIMIT.default,
): Promise<Array<Record<string, unknown>>> {
	return await ctx.db.run(
		unknownOutcomeQuery(
			ctx.s,
			queue ? validateQueueName(queue) : null,
			inRange(limit, 'limit', UNKNOWN_OUTCOMES_LIMIT),
		),
	);
}

function validateIds(jobIds: string[]): string[] {
	return jobIds.map((id, index) => validateUuid(id, `jobIds[${index}]`));
}

function attemptFromJson(row: Record<string, unknown>): Attempt {
	const date = (value: unknown) =>
		value === null || value === undefined ? null : new Date(String(value));
	return {
		attempt_id: String(row.attempt_id),
		job_id: String(row.job_id),
		attempt: Number(row.attempt),
		workflow_id: (row.workflow_id as string | null) ?? null,
		execution_id: (row.execution_id as string | null) ?? null,
		started_at: new Date(String(row.started_at)),
		lease_until: date(row.lease_until),
		finished_at: date(row.finished_at),
		outcome: (row.outcome as string | null) ?? null,
		error_code: (row.error_code as string | null) ?? null,
		error_message: (row.error_message as string | null) ?? null,
	};
}
