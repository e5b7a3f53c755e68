import {
	fetchUnknownOutcomes,
	runKillRehearsal,
	runOutageScenario,
	runSlowWorkerScenario,
	startRehearsalEnvironment,
	WINDOWS,
	type KillRehearsalResult,
	type RehearsalEnvironment,
} from '../../scripts/lib/rehearsal';
import { e2eLog } from './progress';
import { databaseUrl } from '../helpers/db';

/**
 * A short fault rehearsal (the full one is `npm run rehearsal`, figures in docs/RELIABILITY.md):
 * a real n8n 2.x with the packed package and the bundled workflows (lease shortened to 15 s on
 * the Dispatcher's Job Trigger, which the Worker's checkpoint renews by), SIGKILLed while jobs are in flight, the job
 * database's own PostgreSQL (a private embedded server, so n8n's database stays up) restarted
 * mid-run, and workers that outlive their lease past and before the checkpoint. Every check lives in scripts/lib/rehearsal.ts and comes back as a list of
 * violations; the tests assert that list is empty and pin the headline figures.
 */
const LEASE_SECONDS = 15;
let env: RehearsalEnvironment;
const log = (line: string) => e2eLog(`rehearsal: ${line}`);
/** Whole result objects: only with DEBUG_E2E=1. */
const debug = (line: string) => {
	if (process.env.DEBUG_E2E === '1') console.log(`[rehearsal] ${line}`);
};

beforeAll(async () => {
	env = await startRehearsalEnvironment({
		databaseUrl: databaseUrl(),
		schema: 'dj_e2e_fault_rehearsal',
		leaseSeconds: LEASE_SECONDS,
		log,
	});
});

afterAll(async () => {
	await env?.stop();
});

function expectCommonGuarantees(result: KillRehearsalResult): void {
	expect(result.violations).toEqual([]);
	// Nothing lost: every client got a 202 naming a stored job, and no job exists unanswered.
	expect(result.lost).toBe(0);
	expect(result.jobs.accepted).toBe(result.jobs.submitted);
	expect(result.jobs.inDb).toBe(result.jobs.submitted);
	// Nothing stuck: every job ended done or failed.
	expect(result.stuck).toBe(0);
	expect(result.jobs.done + result.jobs.failed).toBe(result.jobs.inDb);
	// No result from an attempt that had lost its lease.
	expect(result.attempts.staleApplied).toBe(0);
	// The kills really caught work in flight, including requests the CRM had received.
	expect(result.attempts.killed).toBeGreaterThan(0);
	expect(result.windows.T3.pairs + result.windows.T4.pairs).toBeGreaterThan(0);
	// The report lists exactly the attempts that ended without an outcome, and every attempt
	// that reached the CRM without its result being kept.
	expect(result.report.exact).toBe(true);
	expect(result.report.coversEveryOrphan).toBe(true);
	expect(result.report.rows).toBe(result.attempts.leaseExpired);
	// Its "check the CRM" rows (with the checkpoint) are exactly the attempts that reached the
	// CRM, plus only attempts killed between checkpoint and request; the others made no call.
	const { report } = result;
	expect(report.checkpointRowsExact).toBe(true);
	expect(report.checkListMatchesCrmRequests).toBe(true);
	expect(report.withCheckpoint + report.withoutCheckpoint).toBe(report.rows);
	expect(report.checkedWithCrmRequest).toBe(report.leaseExpiredWithCrmRequest);
	expect(report.checkedWithCrmRequest + report.checkedKilledBeforeRequest).toBe(
		report.withCheckpoint,
	);
	expect(report.withCheckpoint).toBeGreaterThan(0);
	// Every CRM record a job does not hold was made by an attempt the operator is told to check.
	expect(report.unheldRecordsListed).toBe(report.unheldRecords);
}

function summary(result: KillRehearsalResult): string {
	const { report } = result;
	return (
		`${result.kills.length} kills: ${WINDOWS.map((w) => `${w}=${result.windows[w].pairs}`).join(' ')}; ${result.jobs.inDb} jobs (${result.jobs.done} done, ${result.jobs.failed} failed); CRM ${result.crm.requests} requests, ${result.crm.created} records; ` +
		`report ${report.rows} attempts / ${report.jobs} jobs, with checkpoint ${report.withCheckpoint} (${report.jobsToCheck} jobs; CRM request ${report.checkedWithCrmRequest}, killed before it ${report.checkedKilledBeforeRequest}), without ${report.withoutCheckpoint}; ` +
		`late attempts ${JSON.stringify(result.lateAttempts)}; unheld records ${report.unheldRecords}/${report.unheldRecordsListed} listed`
	);
}

describe('SIGKILL of n8n while jobs are in flight (T0 queued … T4 CRM answered, before Job Complete)', () => {
	it('CRM honours Idempotency-Key: nothing lost or stuck, exactly one CRM record per job id, no stale result applied', async () => {
		const result = await runKillRehearsal(env, {
			kills: 3,
			targets: ['T1', 'T3', 'T4'],
			honourKeys: true,
			leaseSeconds: LEASE_SECONDS,
			runId: 'kh',
			seed: 11,
			minUpMs: 1_500,
			maxUpMs: 5_000,
			log,
		});
		log(summary(result));
		expectCommonGuarantees(result);
		expect(result.crm.jobsWithMoreThanOneRecord).toBe(0);
		expect(result.crm.created).toBeGreaterThanOrEqual(result.jobs.done);
		expect(result.crm.created).toBeLessThanOrEqual(result.jobs.inDb);
		// Attempts killed after the CRM got their request were repeated, and the CRM answered the
		// repeat with the record it already had.
		expect(result.crm.replayed).toBeGreaterThan(0);
	});

	it('CRM ignores the key: extra records come only from attempts that died after reaching the CRM, and the reconciliation report lists each of them under "check the CRM"', async () => {
		const result = await runKillRehearsal(env, {
			kills: 3,
			targets: ['T2', 'T3', 'T4'],
			honourKeys: false,
			leaseSeconds: LEASE_SECONDS,
			runId: 'kn',
			seed: 12,
			minUpMs: 1_500,
			maxUpMs: 5_000,
			log,
		});
		log(summary(result));
		expectCommonGuarantees(result);
		// Every extra record is attributed to a cause (violations would list any other source).
		const extra = Object.values(result.crm.duplicatesByCause).reduce((sum, n) => sum + n, 0);
		expect(extra).toBe(result.crm.extraRecords);
		expect(result.crm.extraRecords).toBeGreaterThan(0);
		// Every job with a duplicate is among the jobs to check, every extra record is one the job
		// does not hold; attempts killed before the checkpoint (T1/T2) are listed without one.
		expect(result.report.jobsToCheck).toBeGreaterThanOrEqual(result.crm.jobsWithMoreThanOneRecord);
		expect(result.report.unheldRecords).toBeGreaterThanOrEqual(result.crm.extraRecords);
	});
});

describe('job database restarted mid-run (real PostgreSQL restart, n8n and its own database keep running)', () => {
	it('receiver answers 503, nodes fail with a connection error naming PostgreSQL, pools recover without a restart, every job ends terminal with one CRM record', async () => {
		const result = await runOutageScenario(env, {
			runId: 'outage',
			cutMs: 8_000,
			jobs: 10,
			leaseSeconds: LEASE_SECONDS,
			log,
		});
		debug(JSON.stringify({ ...result, receiverAnswers: result.receiverAnswers.length }));
		expect(result.violations).toEqual([]);
		expect(result.kind).toBe('restart');
		expect(result.downMs).toBeGreaterThanOrEqual(8_000);
		expect(result.receiverAnswers.length).toBeGreaterThan(0);
		for (const answer of result.receiverAnswers) {
			expect(answer.status).toBe(503);
			// The anonymous caller gets no internal detail; the execution data names PostgreSQL.
			expect(answer.detail).toMatch(/cannot be reached/);
		}
		expect(result.failedExecutions['DjDispatcher0001']).toBeGreaterThan(0);
		expect(result.errorMessages.length).toBeGreaterThan(0);
		for (const message of result.errorMessages) expect(message).toMatch(/PostgreSQL/);
		expect(result.pidAfter).toBe(result.pidBefore);
		expect(result.recoveryMs).toBeGreaterThanOrEqual(0);
		expect(result.done + result.failed).toBe(result.jobs);
		expect(result.crmRecordsPerDoneJob.every((n) => n === 1)).toBe(true);
		// After the outage the report still answers.
		expect(Array.isArray(await fetchUnknownOutcomes(env))).toBe(true);
	});
});

describe('a worker slower than its lease', () => {
	it("past the checkpoint (late CRM answer): the job is leased again, the slow attempt's Job Complete lands on Lease Lost and changes nothing, the new attempt's result stands, the report says check the CRM; before it (late AI answer): the slow attempt stops at the checkpoint on Lease Lost and never calls the CRM", async () => {
		const result = await runSlowWorkerScenario(env, {
			runId: 'slow',
			leaseSeconds: LEASE_SECONDS,
			log,
		});
		debug(JSON.stringify(result));
		expect(result.violations).toEqual([]);

		const { lateCrm, lateAi } = result;
		expect(lateCrm.attempts).toEqual([
			{ attempt: 1, outcome: 'lease_expired', checkpoint: 'crm_request' },
			{ attempt: 2, outcome: 'succeeded', checkpoint: 'crm_request' },
		]);
		expect(lateCrm.stoppedAt).toBe('Finish job');
		expect(lateCrm.leaseLostOutput).toMatchObject({
			lease_lost: true,
			reason: 'job_done',
			current_status: 'done',
		});
		expect(lateCrm.jobUnchangedAfterStaleAttempt).toBe(true);
		// The CRM ignored the key, so both attempts created a record; the job holds the new one's.
		expect(lateCrm.crmRequests.map((request) => request.attempt)).toEqual([1, 2]);
		expect(lateCrm.crmRequests[0].answerDelayMs).toBe(lateCrm.lateAnswerMs);
		expect(lateCrm.resultRecordId).toBe(lateCrm.crmRequests[1].createdRecordId);
		expect(lateCrm.resultName).not.toBe('stale attempt');
		expect(lateCrm.reportRow).toMatchObject({
			checkpoint: 'crm_request',
			external_call: 'may have happened',
		});
		expect(lateCrm.inCheckExternalSystem).toBe(true);

		expect(lateAi.attempts).toEqual([
			{ attempt: 1, outcome: 'lease_expired', checkpoint: null },
			{ attempt: 2, outcome: 'succeeded', checkpoint: 'crm_request' },
		]);
		expect(lateAi.stoppedAt).toBe('Checkpoint: CRM request');
		expect(lateAi.leaseLostOutput).toMatchObject({ lease_lost: true });
		expect(lateAi.jobUnchangedAfterStaleAttempt).toBe(true);
		// Only the new attempt called the CRM.
		expect(lateAi.crmRequests.map((request) => request.attempt)).toEqual([2]);
		expect(lateAi.resultRecordId).toBe(lateAi.crmRequests[0].createdRecordId);
		expect(lateAi.resultName).not.toBe('stale attempt');
		expect(lateAi.reportRow).toMatchObject({ checkpoint: null, external_call: 'not made' });
		expect(lateAi.inCheckExternalSystem).toBe(false);
	});
});
