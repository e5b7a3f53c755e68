import type { StoreContext } from '../context';
import { jobStoryQuery } from '../sql/dashboard';
import { integerInRange, validateUuid } from '../validate';
import { iso, jobSummary, type JobSummaryRow } from './shared';
import type { AttemptStory, JobStory, TextPreview } from './contract';

const DEFAULT_PREVIEW_CHARS = 2000;
const MAX_STORY_ATTEMPTS = 200;

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
