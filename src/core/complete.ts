import type { StoreContext } from './context';
import { BACKOFF_BASE, BACKOFF_MAX, DELAY } from './defaults';
import { DurableJobsError, ValidationError } from './errors';
import { announceFinished } from './finishNotices';
import { jobAttemptKey, writeRows, type BatchOptions, type ItemResults } from './items';
import { completeQuery, type CompleteRow } from './sql/complete';
import { statusesQuery } from './sql/status';
import {
	COMPLETE_OUTCOMES,
	ERROR_CLASSES,
	type CompleteInput,
	type CompleteResult,
	type Job,
} from './types';
import {
	inRange,
	optionalInRange,
	optionalText,
	serializePayload,
	storableMessage,
	validateUuid,
} from './validate';

interface CompleteReturnRow {
	ord: number;
	applied: boolean;
	status: Job['status'] | null;
	/** The job's queue when applied. */
	queue: string | null;
	attempts: number | null;
	max_attempts: number | null;
	run_at: Date | null;
	error_code: string | null;
	error_class: Job['error_class'];
	callback_event_id: string | null;
	current_status: Job['status'] | null;
	current_attempt_id: string | null;
	job_exists: boolean;
}

/**
 * Finishes, retries, fails or releases leased jobs in one statement, each fenced by its
 * attempt: an item whose attempt no longer owns the job comes back not applied, with the reason.
 */
export async function complete(
	ctx: StoreContext,
	items: CompleteInput[],
	options: BatchOptions = {},
): Promise<ItemResults<CompleteResult>> {
	const finishedQueues = new Set<string | null>();
	/** The rows sent, by item (`ord`). */
	const sent: CompleteRow[] = [];
	const staleAnswers: number[] = [];
	const results = await writeRows<CompleteInput, CompleteRow, CompleteReturnRow, CompleteResult>(
		ctx.db,
		items,
		options,
		{
			toRow: (item, ord) => {
				const row = completeRow(ctx, item, ord);
				sent[ord] = row;
				return row;
			},
			key: `complete:${ctx.s}:${ctx.callbackQueue}`,
			build: (batch) => completeQuery(ctx.schema, ctx.s, batch, ctx.callbackQueue),
			coalesce: true,
			sameRowKey: jobAttemptKey,
			charsOf: (row) => (row.result?.length ?? 0) + (row.error_message?.length ?? 0),
			toResult: (row) => {
				if (row.applied && (row.status === 'done' || row.status === 'failed'))
					finishedQueues.add(row.queue);
				if (answeredFromStaleSnapshot(row, sent[row.ord])) staleAnswers.push(row.ord);
				return {
					applied: row.applied,
					status: row.applied ? row.status : row.current_status,
					attempts: row.attempts,
					maxAttempts: row.max_attempts,
					runAt: row.run_at,
					errorCode: row.error_code,
					errorClass: row.error_class,
					callbackEventId: row.callback_event_id,
					leaseLostReason: row.applied ? null : leaseLostReason(row),
				};
			},
		},
	);
	// A retry or release queues its job again, and that update notifies at commit.
	announceFinished(ctx, finishedQueues);
	// The writes have committed: a failed re-read keeps the statement's answers, never fails them.
	if (staleAnswers.length > 0)
		await answerAsNow(ctx, results, staleAnswers, sent).catch(() => undefined);
	return results;
}

/**
 * Whether an item's Lease Lost answer was read from the statement's snapshot while another
 * transaction changed the job. The statement's UPDATE waits for a transaction that holds the
 * job's row and checks the fence on the row that transaction committed, but the answer's read
 * of the job (READ COMMITTED) still sees the row as it was when the statement began: a second
 * completion of one attempt, from another process, found the job still running that attempt,
 * which it no longer was (`attempt_superseded` instead of `job_done`).
 */
function answeredFromStaleSnapshot(row: CompleteReturnRow, sent: CompleteRow | undefined): boolean {
	return (
		!row.applied &&
		row.current_status === 'running' &&
		sent !== undefined &&
		row.current_attempt_id === sent.attempt_id
	);
}

/** Reads the jobs of `ords` again, and answers their items with what they are now. */
async function answerAsNow(
	ctx: StoreContext,
	results: ItemResults<CompleteResult>,
	ords: number[],
	sent: CompleteRow[],
): Promise<void> {
	const jobIds = [...new Set(ords.map((ord) => sent[ord].job_id))];
	const statusById = new Map(
		(
			await ctx.db.run<{ id: string; status: Job['status'] | null }>(statusesQuery(ctx.s, jobIds))
		).map((job) => [job.id, job.status]),
	);
	for (const ord of ords) {
		const result = results[ord];
		if (!result || result instanceof DurableJobsError) continue;
		const status = statusById.get(sent[ord].job_id) ?? null;
		result.status = status;
		result.leaseLostReason = leaseLostReason({
			job_exists: status !== null,
			current_status: status,
		});
	}
}

function completeRow(ctx: StoreContext, item: CompleteInput, ord: number): CompleteRow {
	if (!COMPLETE_OUTCOMES.includes(item.outcome)) {
		throw new ValidationError(
			'outcome',
			`"${String(item.outcome).slice(0, 40)}" is not an outcome`,
			`Use one of: ${COMPLETE_OUTCOMES.join(', ')}`,
		);
	}
	if (item.errorClass && !ERROR_CLASSES.includes(item.errorClass)) {
		throw new ValidationError(
			'errorClass',
			`"${String(item.errorClass).slice(0, 40)}" is not a class`,
			`Use one of: ${ERROR_CLASSES.join(', ')}`,
		);
	}
	let result: string | null = null;
	if (item.outcome === 'succeeded' && item.result !== undefined) {
		result = serializePayload(item.result, 'result', ctx.payloadLimit);
	}
	const row: CompleteRow = {
		ord,
		job_id: validateUuid(item.jobId, 'jobId'),
		attempt_id: validateUuid(item.attemptId, 'attemptId'),
		outcome: item.outcome,
		result,
		error_code: optionalText(item.errorCode, 'errorCode', 100),
		error_message: storableMessage(item.errorMessage, 'errorMessage'),
		error_class: item.errorClass ?? null,
		error_node: optionalText(item.errorNode, 'errorNode', 255),
		error_workflow: optionalText(item.errorWorkflow, 'errorWorkflow', 255),
		error_execution: optionalText(item.errorExecution, 'errorExecution', 255),
		delay_ms: optionalInRange(item.delayMs, 'delayMs', DELAY),
		backoff_base_ms: null,
		backoff_max_ms: null,
		jitter: null,
	};
	// Validated for every outcome (a bad value is an error whichever the outcome), sent only
	// with a retry, the one outcome whose statement branch reads them.
	const backoffBaseMs = inRange(item.backoffBaseMs, 'backoffBaseMs', BACKOFF_BASE);
	const backoffMaxMs = inRange(item.backoffMaxMs, 'backoffMaxMs', BACKOFF_MAX);
	const minDelayMs = optionalInRange(item.minDelayMs, 'minDelayMs', DELAY);
	if (row.outcome === 'retry') {
		row.backoff_base_ms = backoffBaseMs;
		row.backoff_max_ms = backoffMaxMs;
		// The equal jitter of the backoff, drawn here so the statement has no random().
		if (row.delay_ms === null) {
			row.jitter = Math.random();
			if (minDelayMs !== null) row.min_delay_ms = minDelayMs;
		}
	}
	return row;
}

function leaseLostReason(row: Pick<CompleteReturnRow, 'job_exists' | 'current_status'>): string {
	if (!row.job_exists) return 'not_found';
	if (row.current_status === 'running') return 'attempt_superseded';
	return `job_${row.current_status ?? 'unknown'}`;
}
