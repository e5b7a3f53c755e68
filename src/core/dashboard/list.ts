import type { StoreContext } from '../context';
import { ValidationError } from '../errors';
import { validateQueueName } from '../identifiers';
import {
	LIVE_STATUSES,
	TERMINAL_STATUSES,
	clockQuery,
	listJobsQuery,
	type ListJobsParams,
} from '../sql/dashboard';
import { integerInRange, optionalDate, optionalText } from '../validate';
import { jobSummary, runOnIndexes, type JobSummaryRow } from './shared';
import type { JobListPage } from './contract';

export const JOB_STATUSES = [...LIVE_STATUSES, ...TERMINAL_STATUSES] as const;
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 1000;
const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CURSOR = /^(\d{1,19})_(\d{1,19})$/;
/** Both halves of a cursor are PostgreSQL bigints. */
const MAX_BIGINT = 2n ** 63n - 1n;

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

interface ListRow extends JobSummaryRow {
	error_code: string | null;
	error_class: string | null;
	error_message: string | null;
	seq: string;
	created_us: string;
	as_of: string;
}

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
	if (!match || BigInt(match[1]) > MAX_BIGINT || BigInt(match[2]) > MAX_BIGINT) {
		throw new ValidationError(
			'cursor',
			`"${String(value).slice(0, 60)}" is not a cursor of this list`,
			'Pass the next_cursor of the previous page as it was returned, or leave it empty for the first page',
		);
	}
	return { createdUs: match[1], seq: match[2] };
}

/**
 * One page of jobs, newest first (by the time they were received), filtered by queue, status,
 * creation time and text (exact job id, idempotency key or correlation id). Pages are keyset
 * pages: pass `next_cursor` to get the next, older page; a job received after the first page was
 * read appears on no later page and shifts nothing (see ARCHITECTURE, "List order and pages").
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
			...jobSummary(row),
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
