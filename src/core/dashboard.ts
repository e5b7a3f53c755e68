/**
 * The jobs dashboard: what the page shows (queues, a list of jobs, one job's story) and the two
 * writes it offers (requeue failed jobs, cancel queued jobs). Every answer is plain JSON data
 * (timestamps as ISO strings); JobStore exposes these through methods that only delegate here.
 */
import type { StoreContext } from './context';
import { ValidationError } from './errors';
import { validateQueueName } from './identifiers';
import {
	indexPlanSettingsQuery,
	LIVE_STATUSES,
	TERMINAL_STATUSES,
	cancelQueuedQuery,
	clockQuery,
	finishedPerMinuteQuery,
	jobStoryQuery,
	listJobsQuery,
	statusesQuery,
	type ListJobsParams,
} from './sql/dashboard';
import { requeueQuery } from './sql/status';
import { stats as queueStats } from './status';
import type { SqlQuery } from './sql/types';
import { integerInRange, optionalDate, optionalText, validateUuid } from './validate';

/** A list or chart statement, planned to read only the indexes it was written for. */
async function runOnIndexes<R>(ctx: StoreContext, query: SqlQuery): Promise<R[]> {
	return await ctx.db.transaction(async (tx) => {
		await tx.run(indexPlanSettingsQuery());
		return await tx.run<R>(query);
	});
}

export const JOB_STATUSES = [...LIVE_STATUSES, ...TERMINAL_STATUSES] as const;
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 1000;
/** Most ids one requeue or cancel accepts. */
export const MAX_ACTION_JOBS = 1000;
export const CHART_MINUTES = 60;
const DEFAULT_PREVIEW_CHARS = 2000;
const MAX_STORY_ATTEMPTS = 200;
const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CURSOR = /^(\d{1,19})_(\d{1,19})$/;
/** An ISO 8601 timestamp with a time zone, e.g. an `as_of` this module returned. */
const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})$/;

// ---------------------------------------------------------------------------------------- types

export interface QueueSummary {
	queue: string;
	/** Waiting jobs: ready (due now) + scheduled (run_at in the future, e.g. a retry's backoff). */
	queued: number;
	ready: number;
	scheduled: number;
	/** Queued jobs that already used an attempt (waiting for their retry). */
	retrying: number;
	running: number;
	/** Running jobs whose lease has expired: their worker died or outlived the lease. */
	running_expired: number;
	done: number;
	/** Dead letters. */
	failed: number;
	cancelled: number;
	/** Age of the oldest job that is due and waiting for a worker. */
	oldest_ready_age_seconds: number | null;
	oldest_queued_age_seconds: number | null;
}

export interface ChartPoint {
	/** Start of the minute (ISO). */
	minute: string;
	done: number;
	failed: number;
}

export interface QueueOverview {
	as_of: string;
	queues: QueueSummary[];
	chart: {
		/** The window: the current minute and the 59 before it. */
		from_minute: string;
		to_minute: string;
		/** Points are complete from here on (earlier minutes were not asked for). */
		since: string;
		/** Minutes with at least one finished or failed job; every other minute is 0. */
		series: Array<{ queue: string; points: ChartPoint[] }>;
	};
}

export interface ListJobsInput {
	queue?: string | null;
	/** One status, a comma-separated list, an array, or empty / "all" for every status. */
	status?: string | string[] | null;
	/** Created at or after (inclusive). */
	from?: Date | string | null;
	/** Created before (exclusive). */
	to?: Date | string | null;
	/** Exact job id, idempotency key or correlation id. */
	text?: string | null;
	/** `next_cursor` of the previous page. */
	cursor?: string | null;
	limit?: number | string | null;
}

export interface JobListEntry {
	job_id: string;
	queue: string;
	status: string;
	priority: number;
	attempts: number;
	max_attempts: number;
	created_at: string;
	updated_at: string;
	run_at: string;
	started_at: string | null;
	finished_at: string | null;
	lease_until: string | null;
	/** A running job whose lease has run out. */
	lease_expired: boolean;
	idempotency_key: string | null;
	correlation_id: string | null;
	error_code: string | null;
	error_class: string | null;
	/** The first 300 characters. */
	error_message: string | null;
}

export interface JobListPage {
	/** When the page was read; pass it to a requeue of jobs selected from this page. */
	as_of: string;
	jobs: JobListEntry[];
	/** Cursor of the next (older) page, or null on the last page. */
	next_cursor: string | null;
	filter: {
		queue: string | null;
		statuses: string[];
		from: string | null;
		to: string | null;
		text: string | null;
		limit: number;
	};
}

export interface AttemptStory {
	attempt_id: string;
	attempt: number;
	started_at: string;
	lease_until: string | null;
	finished_at: string | null;
	/** succeeded, failed, retry, released, lease_expired, cancelled; `running` for the live attempt; null when unknown. */
	outcome: string | null;
	error_code: string | null;
	error_message: string | null;
	checkpoint: string | null;
	checkpoint_at: string | null;
	/** The n8n workflow and execution that leased the job (Job Lease records them). */
	workflow_id: string | null;
	execution_id: string | null;
	/** Path of that execution in the n8n editor, or null without both ids. */
	execution_path: string | null;
}

export interface TextPreview {
	/** The JSON text, cut to `preview_chars`. */
	preview: string;
	chars: number;
	truncated: boolean;
}

export interface JobStory {
	as_of: string;
	job: {
		job_id: string;
		queue: string;
		status: string;
		priority: number;
		attempts: number;
		max_attempts: number;
		created_at: string;
		updated_at: string;
		run_at: string;
		started_at: string | null;
		finished_at: string | null;
		lease_until: string | null;
		lease_expired: boolean;
		idempotency_key: string | null;
		correlation_id: string | null;
		callback_url: string | null;
		ordering_key: string | null;
		payload: TextPreview;
		/** Done jobs only. */
		result: TextPreview | null;
		/** Failed and cancelled jobs; for a queued retry, the last attempt's error. */
		error: {
			code: string | null;
			message: string | null;
			class: string | null;
			node: string | null;
			workflow_id: string | null;
			execution_id: string | null;
			execution_path: string | null;
		} | null;
	};
	attempts: AttemptStory[];
	/** All attempts of the job; `attempts` holds the newest 200. */
	attempts_total: number;
	callback_events: Array<{
		job_id: string;
		event_id: string;
		event_type: string | null;
		destination: string | null;
		status: string;
		attempts: number;
		max_attempts: number;
		created_at: string;
		run_at: string;
		finished_at: string | null;
		error_code: string | null;
		error_message: string | null;
		deliveries: AttemptStory[];
	}>;
}

export interface DashboardActionResult {
	action: 'requeue' | 'cancel';
	requested: number;
	changed: number;
	/** Every requested id: whether this call changed it, and its status now (null: no such job). */
	jobs: Array<{ job_id: string; changed: boolean; status: string | null }>;
}

// ---------------------------------------------------------------------------------------- queues

/**
 * Counts per queue (Queue Stats, which never reads finished rows) and the jobs finished and
 * failed per minute. `chartSince` limits the chart to the minutes from then on: a page that
 * refreshes asks only for the last minutes, so a refresh costs what the last minutes finished,
 * not the whole hour.
 */
export async function queueOverview(
	ctx: StoreContext,
	options: { chartSince?: Date | string | null } = {},
): Promise<QueueOverview> {
	const since = optionalDate(options.chartSince, 'chart_since');
	const [stats, [clock]] = await Promise.all([
		queueStats(ctx, null),
		ctx.db.run<{ as_of: string; minute: string }>(clockQuery()),
	]);
	const toMinute = Number(clock.minute);
	const fromMinute = toMinute - (CHART_MINUTES - 1) * 60;
	const sinceSeconds =
		since === null ? fromMinute : Math.max(fromMinute, Math.floor(since.getTime() / 60_000) * 60);
	const rows = await runOnIndexes<{ queue: string; minute: string; done: number; failed: number }>(
		ctx,
		finishedPerMinuteQuery(ctx.s, new Date(sinceSeconds * 1000).toISOString()),
	);
	const series = new Map<string, ChartPoint[]>();
	for (const row of rows) {
		if (Number(row.minute) > toMinute) continue;
		const points = series.get(row.queue) ?? [];
		points.push({ minute: minuteIso(Number(row.minute)), done: row.done, failed: row.failed });
		series.set(row.queue, points);
	}
	const queues = stats.map((entry) => ({
		queue: entry.queue,
		queued: entry.queued,
		ready: entry.ready,
		scheduled: Math.max(0, entry.queued - entry.ready),
		retrying: entry.retrying,
		running: entry.running,
		running_expired: entry.running_expired,
		done: entry.done,
		failed: entry.failed,
		cancelled: entry.cancelled,
		oldest_ready_age_seconds: entry.oldest_ready_age_seconds,
		oldest_queued_age_seconds: entry.oldest_queued_age_seconds,
	}));
	for (const queue of series.keys())
		if (!queues.some((entry) => entry.queue === queue)) series.delete(queue);
	return {
		as_of: clock.as_of,
		queues,
		chart: {
			from_minute: minuteIso(fromMinute),
			to_minute: minuteIso(toMinute),
			since: minuteIso(sinceSeconds),
			series: [...series].map(([queue, points]) => ({ queue, points })),
		},
	};
}

function minuteIso(epochSeconds: number): string {
	return new Date(epochSeconds * 1000).toISOString();
}

// ---------------------------------------------------------------------------------------- list

function parseStatuses(value: ListJobsInput['status']): string[] {
	const given = (Array.isArray(value) ? value : String(value ?? '').split(','))
		.map((entry) => String(entry).trim().toLowerCase())
		.filter((entry) => entry !== '' && entry !== 'all');
	if (given.length === 0) return [...JOB_STATUSES];
	for (const status of given) {
		if (!(JOB_STATUSES as readonly string[]).includes(status)) {
			throw new ValidationError(
				'status',
				`"${status.slice(0, 40)}" is not a job status`,
				`Use one of: ${JOB_STATUSES.join(', ')} (or leave it empty for all)`,
			);
		}
	}
	return JOB_STATUSES.filter((status) => given.includes(status));
}

function parseCursor(value: unknown): ListJobsParams['cursor'] {
	if (value === undefined || value === null || value === '') return null;
	const match = CURSOR.exec(String(value));
	if (!match) {
		throw new ValidationError(
			'cursor',
			`"${String(value).slice(0, 60)}" is not a cursor of this list`,
			'Pass the next_cursor of the previous page as it was returned, or leave it empty for the first page',
		);
	}
	return { createdUs: match[1], seq: match[2] };
}

function iso(value: Date | string | null | undefined): string | null {
	if (value === null || value === undefined) return null;
	return value instanceof Date ? value.toISOString() : new Date(value).toISOString();
}

interface ListRow {
	id: string;
	queue: string;
	status: string;
	priority: number;
	attempts: number;
	max_attempts: number;
	created_at: Date;
	updated_at: Date;
	run_at: Date;
	started_at: Date | null;
	finished_at: Date | null;
	lease_until: Date | null;
	lease_expired: boolean | null;
	idempotency_key: string | null;
	correlation_id: string | null;
	error_code: string | null;
	error_class: string | null;
	error_message: string | null;
	seq: string;
	created_us: string;
	as_of: string;
}

/**
 * One page of jobs, newest first (by the time they were received), filtered by queue, status,
 * creation time and text (exact job id, idempotency key or correlation id). Pages are keyset
 * pages: pass `next_cursor` to get the next, older page; a job received while paging appears on
 * no later page and shifts nothing.
 */
export async function listJobs(ctx: StoreContext, input: ListJobsInput): Promise<JobListPage> {
	const queue =
		input.queue === undefined || input.queue === null || input.queue === ''
			? null
			: validateQueueName(input.queue);
	const statuses = parseStatuses(input.status);
	const from = optionalDate(input.from, 'from');
	const to = optionalDate(input.to, 'to');
	const rawText = typeof input.text === 'string' ? input.text.trim() : input.text;
	const text = optionalText(rawText === '' ? null : rawText, 'text', 255);
	const limit = integerInRange(
		input.limit === '' || input.limit === null ? undefined : input.limit,
		'limit',
		1,
		MAX_PAGE_SIZE,
		DEFAULT_PAGE_SIZE,
	);
	const cursor = parseCursor(input.cursor);
	const rows = await runOnIndexes<ListRow>(
		ctx,
		listJobsQuery(ctx.s, {
			queue,
			statuses,
			from: from?.toISOString() ?? null,
			to: to?.toISOString() ?? null,
			text,
			textIsUuid: text !== null && UUID_TEXT.test(text),
			cursor,
			limit,
		}),
	);
	const page = rows.slice(0, limit);
	const last = page[page.length - 1];
	const asOf = rows[0]?.as_of ?? (await ctx.db.run<{ as_of: string }>(clockQuery()))[0].as_of;
	return {
		as_of: asOf,
		jobs: page.map((row) => ({
			job_id: row.id,
			queue: row.queue,
			status: row.status,
			priority: row.priority,
			attempts: row.attempts,
			max_attempts: row.max_attempts,
			created_at: iso(row.created_at)!,
			updated_at: iso(row.updated_at)!,
			run_at: iso(row.run_at)!,
			started_at: iso(row.started_at),
			finished_at: iso(row.finished_at),
			lease_until: iso(row.lease_until),
			lease_expired: row.status === 'running' && row.lease_expired === true,
			idempotency_key: row.idempotency_key,
			correlation_id: row.correlation_id,
			error_code: row.error_code,
			error_class: row.error_class,
			error_message: row.error_message,
		})),
		next_cursor: rows.length > limit && last ? `${last.created_us}_${last.seq}` : null,
		filter: {
			queue,
			statuses,
			from: from?.toISOString() ?? null,
			to: to?.toISOString() ?? null,
			text,
			limit,
		},
	};
}

// ---------------------------------------------------------------------------------------- story

/** The path of an execution in the n8n editor, from ids recorded by the nodes. */
export function executionPath(
	workflowId: string | null | undefined,
	executionId: string | null | undefined,
): string | null {
	if (!workflowId || !executionId) return null;
	return `/workflow/${encodeURIComponent(workflowId)}/executions/${encodeURIComponent(executionId)}`;
}

function attemptStory(row: Record<string, unknown>, live: boolean): AttemptStory {
	const text = (value: unknown) => (value === null || value === undefined ? null : String(value));
	const outcome = text(row.outcome);
	return {
		attempt_id: String(row.attempt_id),
		attempt: Number(row.attempt),
		started_at: iso(text(row.started_at))!,
		lease_until: iso(text(row.lease_until)),
		finished_at: iso(text(row.finished_at)),
		outcome: outcome ?? (live ? 'running' : null),
		error_code: text(row.error_code),
		error_message: text(row.error_message),
		checkpoint: text(row.checkpoint),
		checkpoint_at: iso(text(row.checkpoint_at)),
		workflow_id: text(row.workflow_id),
		execution_id: text(row.execution_id),
		execution_path: executionPath(text(row.workflow_id), text(row.execution_id)),
	};
}

function preview(text: string | null, chars: number | null, limit: number): TextPreview | null {
	if (text === null || chars === null) return null;
	return { preview: text, chars, truncated: chars > limit };
}

/**
 * The whole story of one job: when and how it was received, every attempt (with checkpoint,
 * outcome, error and the n8n execution that leased it), its result or error, and the
 * job-finished callback events with their deliveries. The payload and result are JSON text cut
 * to `previewChars`. Null when there is no such job.
 */
export async function jobStory(
	ctx: StoreContext,
	jobId: unknown,
	options: { previewChars?: number } = {},
): Promise<JobStory | null> {
	const id = validateUuid(jobId, 'jobId');
	const previewChars = integerInRange(
		options.previewChars,
		'previewChars',
		100,
		1_000_000,
		DEFAULT_PREVIEW_CHARS,
	);
	const [row] = await ctx.db.run<Record<string, unknown>>(
		jobStoryQuery(ctx.s, id, ctx.callbackQueue, previewChars, MAX_STORY_ATTEMPTS),
	);
	if (!row) return null;
	const status = String(row.status);
	const attempts = (row.attempt_rows as Array<Record<string, unknown>>).map((attempt) =>
		attemptStory(attempt, status === 'running' && attempt.attempt_id === row.attempt_id),
	);
	const hasError = status === 'failed' || status === 'cancelled' || row.error_code !== null;
	return {
		as_of: String(row.as_of),
		job: {
			job_id: String(row.id),
			queue: String(row.queue),
			status,
			priority: Number(row.priority),
			attempts: Number(row.attempts),
			max_attempts: Number(row.max_attempts),
			created_at: iso(row.created_at as Date)!,
			updated_at: iso(row.updated_at as Date)!,
			run_at: iso(row.run_at as Date)!,
			started_at: iso(row.started_at as Date | null),
			finished_at: iso(row.finished_at as Date | null),
			lease_until: iso(row.lease_until as Date | null),
			lease_expired: status === 'running' && row.lease_expired === true,
			idempotency_key: row.idempotency_key as string | null,
			correlation_id: row.correlation_id as string | null,
			callback_url: row.callback_url as string | null,
			ordering_key: row.ordering_key as string | null,
			payload: preview(
				row.payload_preview as string,
				row.payload_chars as number,
				previewChars,
			) ?? { preview: 'null', chars: 4, truncated: false },
			result:
				status === 'done'
					? preview(
							row.result_preview as string | null,
							row.result_chars as number | null,
							previewChars,
						)
					: null,
			error: hasError
				? {
						code: row.error_code as string | null,
						message: row.error_message as string | null,
						class: row.error_class as string | null,
						node: row.error_node as string | null,
						workflow_id: row.error_workflow as string | null,
						execution_id: row.error_execution as string | null,
						execution_path: executionPath(
							row.error_workflow as string | null,
							row.error_execution as string | null,
						),
					}
				: null,
		},
		attempts,
		attempts_total: Number(row.attempts_total),
		callback_events: (row.callback_rows as Array<Record<string, unknown>>).map((event) => ({
			job_id: String(event.job_id),
			event_id: String(event.event_id),
			event_type: (event.event_type as string | null) ?? null,
			destination: (event.destination as string | null) ?? null,
			status: String(event.status),
			attempts: Number(event.attempts),
			max_attempts: Number(event.max_attempts),
			created_at: iso(event.created_at as string)!,
			run_at: iso(event.run_at as string)!,
			finished_at: iso(event.finished_at as string | null),
			error_code: (event.error_code as string | null) ?? null,
			error_message: (event.error_message as string | null) ?? null,
			deliveries: (event.deliveries as Array<Record<string, unknown>>).map((delivery) =>
				attemptStory(delivery, false),
			),
		})),
	};
}

// ---------------------------------------------------------------------------------------- writes

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
	const requeued = await ctx.db.run<{ id: string }>(
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
	const changed = new Set(requeued.map((row) => row.id));
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
	const rows = await ctx.db.run<{ id: string; changed: boolean; status: string | null }>(
		cancelQueuedQuery(ctx.s, ids, reason),
	);
	const byId = new Map(rows.map((row) => [row.id, row]));
	return actionResult(
		'cancel',
		ids,
		(id) => byId.get(id)?.changed === true,
		(id) => byId.get(id)?.status ?? null,
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
