/**
 * A worker slower than its lease: one job's CRM answer outlasts the lease (past the checkpoint),
 * and another job's AI answer does (before it: the checkpoint stops the attempt).
 */
import type { Environment } from '../environment';
import {
	CHECKPOINT_NODE,
	CRM_CHECKPOINT,
	EXTERNAL_CALL_MAY_HAVE_HAPPENED,
	EXTERNAL_CALL_NOT_MADE,
	sleep,
	type Log,
} from './constants';
import { nodeRoutesByAttempt } from './executions';
import {
	ATTEMPT_COLUMNS,
	attemptHeader,
	crmView,
	quoteSchema,
	type AttemptRow,
	type JobRow,
} from './observations';
import { fetchReconciliationReport, reportConsistency, type ReportRow } from './reconciliation';

export interface SlowCaseResult {
	jobId: string;
	/** Which answer reached the first attempt after its lease had expired: the AI's comes before the checkpoint, the CRM's after it. */
	lateService: 'AI' | 'CRM';
	lateAnswerMs: number;
	attempts: Array<{ attempt: number; outcome: string | null; checkpoint: string | null }>;
	/** Every CRM request of the job, in arrival order, with the attempt that sent it. */
	crmRequests: Array<{
		attempt: number | null;
		createdRecordId: string | null;
		answerDelayMs: number;
	}>;
	resultRecordId: string | null;
	resultName: string | null;
	/** The node where the first attempt stopped on its Lease Lost output, and that item. */
	stoppedAt: string;
	leaseLostOutput: Record<string, unknown> | null;
	jobUnchangedAfterStaleAttempt: boolean;
	/** The first attempt's row in the reconciliation report. */
	reportRow: ReportRow | null;
	/** The job id is among check_external_system.stable_keys. */
	inCheckExternalSystem: boolean;
	violations: string[];
}

export interface SlowWorkerResult {
	leaseSeconds: number;
	/** The first attempt passed the checkpoint, its CRM request is answered after the lease expired. */
	lateCrm: SlowCaseResult;
	/** The first attempt's AI answer arrives after the lease expired: it stops at the checkpoint. */
	lateAi: SlowCaseResult;
	violations: string[];
}

const STALE_FIELDS = { name: 'stale attempt', email: null, amount: -1 };

async function runSlowCase(
	env: Environment,
	options: {
		docId: string;
		lateService: 'AI' | 'CRM';
		lateAnswerMs: number;
		leaseSeconds: number;
		log: Log;
	},
): Promise<SlowCaseResult> {
	const { docId, lateService, lateAnswerMs, log } = options;
	const violations: string[] = [];
	const s = quoteSchema(env.schema);
	// The first attempt's fields name "stale attempt", so a result taken from it would show.
	env.standins.ai.script(docId, [
		{
			status: 200,
			delayMs: lateService === 'AI' ? lateAnswerMs : 0,
			body: { fields: STALE_FIELDS, model: 'stand-in', source_document_id: docId },
		},
	]);
	if (lateService === 'CRM') env.standins.crm.answerDelays(docId, [lateAnswerMs]);
	const submittedAt = new Date();
	const accepted = await env.request('jobs', {
		method: 'POST',
		body: {
			document: { id: docId, text: 'name: Fresh Attempt, email fresh@example.com, amount: 7' },
		},
		headers: { 'Idempotency-Key': `key-${docId}` },
	});
	if (accepted.status !== 202)
		throw new Error(`receiver answered ${accepted.status}: ${accepted.text}`);
	const jobId = (accepted.body as { job_id: string }).job_id;
	log(
		`slow job ${jobId}: the ${lateService} answers attempt 1 after ${lateAnswerMs / 1000} s, lease ${options.leaseSeconds} s`,
	);

	const readJob = async () =>
		(
			await env.jobsDb.query<{
				status: string;
				attempts: number;
				attempt_id: string;
				result: JobRow['result'];
				finished_at: Date | null;
				updated_at: Date;
			}>(
				`SELECT status, attempts, attempt_id, result, finished_at, updated_at FROM ${s}.jobs WHERE id = $1`,
				[jobId],
			)
		).rows[0];
	const readJobAttempts = async () =>
		(
			await env.jobsDb.query<AttemptRow>(
				`SELECT ${ATTEMPT_COLUMNS} FROM ${s}.job_attempts a WHERE a.job_id = $1 ORDER BY a.attempt`,
				[jobId],
			)
		).rows;

	const deadline = Date.now() + lateAnswerMs + 90_000;
	let job = await readJob();
	while (job.status !== 'done' && job.status !== 'failed' && Date.now() < deadline) {
		await sleep(250);
		job = await readJob();
	}
	const afterNewAttempt = { job: await readJob(), attempts: await readJobAttempts() };
	log(
		`slow job: ${afterNewAttempt.job.status} after attempt ${afterNewAttempt.job.attempts}; waiting for the slow attempt to stop`,
	);
	// The slow attempt gets its late answer now and runs on until a fenced node stops it: Finish
	// job after a late CRM answer, the checkpoint after a late AI answer.
	const firstAttemptId = afterNewAttempt.attempts[0]?.attempt_id;
	const stoppedAt = lateService === 'CRM' ? 'Finish job' : CHECKPOINT_NODE;
	let leaseLostOutput: Record<string, unknown> | null = null;
	while (firstAttemptId && Date.now() < deadline && leaseLostOutput === null) {
		const route = (await nodeRoutesByAttempt(env, stoppedAt, [firstAttemptId], submittedAt)).get(
			firstAttemptId,
		);
		if (route && route.first.length > 0)
			violations.push(
				`the slow attempt came out of ${stoppedAt} on its first output (${lateService === 'CRM' ? 'completion applied' : 'lease extended'})`,
			);
		leaseLostOutput = route?.leaseLost[0] ?? null;
		if (leaseLostOutput === null) await sleep(1_000);
	}
	// Anything the slow attempt would still do (a CRM request after a lost checkpoint) arrives now.
	await sleep(lateService === 'AI' ? 3_000 : 1_000);
	const after = { job: await readJob(), attempts: await readJobAttempts() };
	const unchanged = JSON.stringify(after) === JSON.stringify(afterNewAttempt);
	const attemptNumber = new Map(
		after.attempts.map((attempt) => [attempt.attempt_id, attempt.attempt]),
	);
	const crmRequests = crmView(env).get(jobId) ?? [];
	const report = await fetchReconciliationReport(env);
	const reportRow =
		report.unknown_outcomes.find((row) => row.attempt_id === firstAttemptId) ?? null;
	const inCheckExternalSystem = report.check_external_system.stable_keys.includes(jobId);

	if (after.job.status !== 'done') violations.push(`slow job ended ${after.job.status}`);
	if (
		after.attempts.length !== 2 ||
		after.attempts[0].outcome !== 'lease_expired' ||
		after.attempts[1].outcome !== 'succeeded'
	) {
		violations.push(
			`slow job attempts: ${after.attempts.map((attempt) => `${attempt.attempt}:${attempt.outcome}`).join(', ')} (expected 1:lease_expired, 2:succeeded)`,
		);
	}
	if (!leaseLostOutput)
		violations.push(`the slow attempt did not come out of ${stoppedAt} on Lease Lost`);
	else if (leaseLostOutput.lease_lost !== true || leaseLostOutput.attempt_id !== firstAttemptId)
		violations.push(`unexpected Lease Lost item ${JSON.stringify(leaseLostOutput)}`);
	if (!unchanged) violations.push('the job or its attempts changed after the slow attempt stopped');
	for (const request of crmRequests)
		if (request.attemptId === null || !attemptNumber.has(request.attemptId))
			violations.push(`CRM request for the slow job names attempt ${request.attemptId}`);
	const staleRequests = crmRequests.filter((request) => request.attemptId === firstAttemptId);
	const freshRequests = crmRequests.filter(
		(request) => request.attemptId === after.attempts[1]?.attempt_id,
	);
	if (freshRequests.length !== 1 || freshRequests[0].createdRecordId === null)
		violations.push(
			`the new attempt sent ${freshRequests.length} CRM requests (expected one that creates a record)`,
		);
	const freshRecord = freshRequests[0]?.createdRecordId ?? null;
	if (after.job.result?.crm_record_id !== freshRecord)
		violations.push(
			`result names ${after.job.result?.crm_record_id}, the new attempt created ${freshRecord}`,
		);
	if (after.job.result?.fields?.name === STALE_FIELDS.name)
		violations.push("the result holds the slow attempt's AI fields");
	if (after.attempts[1]?.checkpoint !== CRM_CHECKPOINT)
		violations.push(`the new attempt recorded checkpoint ${after.attempts[1]?.checkpoint}`);
	if (!reportRow) violations.push('the slow attempt is not in the unknown-outcomes report');
	violations.push(
		...reportConsistency(report).map((problem) => `reconciliation report: ${problem}`),
	);
	if (lateService === 'CRM') {
		// Past the checkpoint: the record exists, and the report says to check the CRM.
		if (staleRequests.length !== 1 || staleRequests[0].createdRecordId === null)
			violations.push(
				`the slow attempt sent ${staleRequests.length} CRM requests (expected one that creates a record; the CRM ignores keys)`,
			);
		else if (staleRequests[0].answerDelayMs !== lateAnswerMs)
			violations.push(
				`the CRM answered the slow attempt after ${staleRequests[0].answerDelayMs} ms, not ${lateAnswerMs} ms`,
			);
		if (leaseLostOutput && leaseLostOutput.current_status !== 'done')
			violations.push(
				`the slow attempt's Job Complete found the job ${String(leaseLostOutput.current_status)}, not done`,
			);
		if (after.attempts[0]?.checkpoint !== CRM_CHECKPOINT)
			violations.push(
				`the slow attempt recorded checkpoint ${after.attempts[0]?.checkpoint}, expected ${CRM_CHECKPOINT}`,
			);
		if (
			reportRow &&
			(reportRow.checkpoint !== CRM_CHECKPOINT ||
				reportRow.external_call !== EXTERNAL_CALL_MAY_HAVE_HAPPENED)
		)
			violations.push(
				`report row of the slow attempt: checkpoint ${reportRow.checkpoint}, external_call "${reportRow.external_call}"`,
			);
		if (!inCheckExternalSystem) violations.push('the slow job is not under check_external_system');
	} else {
		// Before the checkpoint: the checkpoint stops it, no CRM request, nothing to check.
		if (staleRequests.length !== 0)
			violations.push(
				`the slow attempt sent ${staleRequests.length} CRM requests after its checkpoint came out on Lease Lost`,
			);
		if (crmRequests.filter((request) => request.createdRecordId !== null).length !== 1)
			violations.push(
				`the slow job has ${crmRequests.filter((request) => request.createdRecordId !== null).length} CRM records, expected 1`,
			);
		if (
			env.standins.ai.calls.filter((call) => attemptHeader(call.headers) === firstAttemptId)
				.length !== 1
		)
			violations.push("the slow attempt's AI request is not in the journal");
		if (after.attempts[0]?.checkpoint !== null)
			violations.push(
				`the slow attempt recorded checkpoint ${after.attempts[0]?.checkpoint} although its lease was lost`,
			);
		if (
			reportRow &&
			(reportRow.checkpoint !== null || reportRow.external_call !== EXTERNAL_CALL_NOT_MADE)
		)
			violations.push(
				`report row of the slow attempt: checkpoint ${reportRow.checkpoint}, external_call "${reportRow.external_call}"`,
			);
		if (inCheckExternalSystem)
			violations.push(
				'the slow job is under check_external_system although no attempt reached the CRM without its result being kept',
			);
	}
	return {
		jobId,
		lateService,
		lateAnswerMs,
		attempts: after.attempts.map((attempt) => ({
			attempt: attempt.attempt,
			outcome: attempt.outcome,
			checkpoint: attempt.checkpoint,
		})),
		crmRequests: crmRequests.map((request) => ({
			attempt: request.attemptId === null ? null : (attemptNumber.get(request.attemptId) ?? null),
			createdRecordId: request.createdRecordId,
			answerDelayMs: request.answerDelayMs,
		})),
		resultRecordId: after.job.result?.crm_record_id ?? null,
		resultName: after.job.result?.fields?.name ?? null,
		stoppedAt,
		leaseLostOutput,
		jobUnchangedAfterStaleAttempt: unchanged,
		reportRow,
		inCheckExternalSystem,
		violations,
	};
}

/**
 * Two jobs whose first attempt outlives its lease, one after the other. Late CRM answer: the
 * attempt passed the checkpoint, so its record exists; its Job Complete lands on Lease Lost and
 * the report says to check the CRM. Late AI answer: the attempt reaches the checkpoint after its
 * lease was taken over, lands on Lease Lost there and never calls the CRM.
 */
export async function runSlowWorkerScenario(
	env: Environment,
	options: { leaseSeconds: number; runId: string; log?: Log },
): Promise<SlowWorkerResult> {
	const log = options.log ?? (() => undefined);
	// A CRM that does not honour keys makes a stale attempt's side effect visible: if its
	// completion were applied, the job's result would name its record.
	env.standins.crm.honourKeys = false;
	env.standins.crm.delayMs = 0;
	env.standins.ai.latencyMs = 0;
	try {
		const lateCrm = await runSlowCase(env, {
			docId: `${options.runId}-slow-crm`,
			lateService: 'CRM',
			lateAnswerMs: (options.leaseSeconds + 12) * 1000,
			leaseSeconds: options.leaseSeconds,
			log,
		});
		const lateAi = await runSlowCase(env, {
			docId: `${options.runId}-slow-ai`,
			lateService: 'AI',
			lateAnswerMs: (options.leaseSeconds + 10) * 1000,
			leaseSeconds: options.leaseSeconds,
			log,
		});
		return {
			leaseSeconds: options.leaseSeconds,
			lateCrm,
			lateAi,
			violations: [
				...lateCrm.violations.map((v) => `late CRM answer: ${v}`),
				...lateAi.violations.map((v) => `late AI answer: ${v}`),
			],
		};
	} finally {
		env.standins.crm.honourKeys = true;
	}
}
