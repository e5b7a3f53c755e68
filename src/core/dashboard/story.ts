import type { StoreContext } from '../context';
import { jobStoryQuery } from '../sql/dashboard';
import { integerInRange, validateUuid } from '../validate';
import { iso, jobSummary, type JobSummary, type JobSummaryRow } from './shared';

const DEFAULT_PREVIEW_CHARS = 2000;
const MAX_STORY_ATTEMPTS = 200;

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
	job: JobSummary & {
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
			...jobSummary(row as unknown as JobSummaryRow),
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
