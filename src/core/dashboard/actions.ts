import type { StoreContext } from '../context';
import { ValidationError } from '../errors';
import { announceFinished } from '../finishNotices';
import { cancelQueuedQuery } from '../sql/dashboard';
import { requeueQuery, statusesQuery } from '../sql/status';
import { integerInRange, optionalText, validateUuid } from '../validate';
import type { DashboardActionResult } from './contract';

/** Most ids one requeue or cancel accepts. */
export const MAX_ACTION_JOBS = 1000;
/** An ISO 8601 timestamp with a time zone, e.g. an `as_of` the dashboard's reads returned. */
const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})$/;

function actionJobIds(value: unknown): string[] {
	const list = Array.isArray(value)
		? value
		: typeof value === 'string'
			? value
					.split(',')
					.map((entry) => entry.trim())
					.filter(Boolean)
			: null;
	if (!list || list.length === 0) {
		throw new ValidationError(
			'job_ids',
			'no job ids given',
			'Pass job_ids: an array of the job ids to act on (at most 1000)',
		);
	}
	if (list.length > MAX_ACTION_JOBS) {
		throw new ValidationError(
			'job_ids',
			`${list.length} ids given; the limit is ${MAX_ACTION_JOBS}`,
			`Act on at most ${MAX_ACTION_JOBS} jobs per call`,
		);
	}
	return [...new Set(list.map((id, index) => validateUuid(id, `job_ids[${index}]`)))];
}

function asOfTimestamp(value: unknown): string {
	const text = typeof value === 'string' ? value.trim() : '';
	if (!ISO_TIMESTAMP.test(text) || Number.isNaN(new Date(text).getTime())) {
		throw new ValidationError(
			'as_of',
			text === '' ? 'is missing' : `"${text.slice(0, 40)}" is not an ISO timestamp`,
			'Pass the as_of of the list or story the jobs were selected from: a job that failed again after it is not requeued by a repeated request',
		);
	}
	return text;
}

/**
 * Requeues the given jobs that are failed and failed before `asOf` (the moment the operator saw
 * them), with `additionalAttempts` more attempts. Repeating the request changes nothing more:
 * a requeued job is no longer failed, and one that failed again did so after `asOf`.
 */
export async function requeueFailedJobs(
	ctx: StoreContext,
	input: { jobIds: unknown; asOf: unknown; additionalAttempts?: number },
): Promise<DashboardActionResult> {
	const ids = actionJobIds(input.jobIds);
	const asOf = asOfTimestamp(input.asOf);
	const additionalAttempts = integerInRange(
		input.additionalAttempts,
		'additionalAttempts',
		1,
		1000,
		3,
	);
	const requeued = await ctx.db.run<{ id: string; requeued: boolean }>(
		requeueQuery(ctx.s, {
			jobIds: ids,
			queue: null,
			errorCode: null,
			errorClass: null,
			failedAfter: null,
			failedBefore: asOf,
			includeCancelled: false,
			limit: ids.length,
			additionalAttempts,
		}),
	);
	const changed = new Set(requeued.filter((row) => row.requeued).map((row) => row.id));
	const current = await ctx.db.run<{ id: string; status: string | null }>(
		statusesQuery(ctx.s, ids),
	);
	const statusById = new Map(current.map((row) => [row.id, row.status]));
	return actionResult(
		'requeue',
		ids,
		(id) => changed.has(id),
		(id) => statusById.get(id) ?? null,
	);
}

/** Cancels the given jobs that are still queued; running and finished jobs are left as they are. */
export async function cancelQueuedJobs(
	ctx: StoreContext,
	input: { jobIds: unknown; reason?: string | null },
): Promise<DashboardActionResult> {
	const ids = actionJobIds(input.jobIds);
	const reason = optionalText(input.reason, 'reason', 1000) ?? 'Cancelled from the jobs dashboard';
	const cancelled = await ctx.db.run<{ id: string; status: string; queue: string }>(
		cancelQueuedQuery(ctx.s, ids, reason),
	);
	// A cancelled job frees the jobs behind it of its ordering key.
	announceFinished(
		ctx,
		cancelled.map((row) => row.queue),
	);
	const changedIds = new Set(cancelled.map((row) => row.id));
	const statusById = new Map<string, string | null>(cancelled.map((row) => [row.id, row.status]));
	const unchanged = ids.filter((id) => !statusById.has(id));
	if (unchanged.length > 0) {
		const current = await ctx.db.run<{ id: string; status: string | null }>(
			statusesQuery(ctx.s, unchanged),
		);
		for (const row of current) statusById.set(row.id, row.status);
	}
	return actionResult(
		'cancel',
		ids,
		(id) => changedIds.has(id),
		(id) => statusById.get(id) ?? null,
	);
}

function actionResult(
	action: DashboardActionResult['action'],
	ids: string[],
	changed: (id: string) => boolean,
	status: (id: string) => string | null,
): DashboardActionResult {
	const jobs = ids.map((id) => ({ job_id: id, changed: changed(id), status: status(id) }));
	return {
		action,
		requested: ids.length,
		changed: jobs.filter((job) => job.changed).length,
		jobs,
	};
}
