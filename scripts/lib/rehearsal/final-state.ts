/**
 * After the last kill and the drain: the run's final state checked invariant by invariant
 * (invariants/*.ts), and the figures of the kill rehearsal's result.
 */
import type { Environment } from '../environment';
import { CHECKPOINT_NODE } from './constants';
import { nodeRoutesByAttempt } from './executions';
import {
	attributeCrmRequests,
	checkCheckpointsBeforeCrm,
	checkKilledAttempts,
	orphanCause,
} from './invariants/attempts';
import { checkCrmSideEffects, checkUnheldRecordsListed } from './invariants/crm';
import { checkAttemptHistory, checkEveryJobTerminal, checkNoJobLost } from './invariants/jobs';
import { checkLateAttempts, lateAttemptsOf } from './invariants/late';
import {
	checkCheckList,
	checkOrphansListed,
	checkReportListsUnknownOutcomes,
} from './invariants/report';
import { finalView } from './invariants/view';
import type { KilledAttempt, KillRecord, KillRehearsalResult } from './kill-types';
import type { Snapshot } from './observations';
import type { ReconciliationReport } from './reconciliation';
import type { Submission } from './submitter';
import type { Window } from './windows';

export interface KillRunRecord {
	startedAt: Date;
	submissions: Submission[];
	kills: KillRecord[];
	/** Attempts in flight at a kill, with the first kill that caught them. */
	killed: Map<string, KilledAttempt>;
	/** Latest kill snapshot at which each attempt was in flight. */
	lastInFlightAt: Map<string, number>;
	/** Windows each job was caught in. */
	caught: Map<string, Set<Window>>;
	honourKeys: boolean;
}

type FinalFigures = Omit<
	KillRehearsalResult,
	'config' | 'startedAt' | 'durationMs' | 'drainMs' | 'kills' | 't1Workers' | 'maxExpiredLeaseAgeMs'
>;

export async function checkFinalState(
	env: Environment,
	run: KillRunRecord,
	final: Snapshot,
	report: ReconciliationReport,
): Promise<FinalFigures> {
	const view = finalView(final);
	const { killed } = run;

	const noneLost = checkNoJobLost(run.submissions, view);
	const terminal = checkEveryJobTerminal(view);
	const { crmOf, ...attribution } = attributeCrmRequests(view);
	const killedAttempts = checkKilledAttempts({
		view,
		kills: run.kills,
		caught: run.caught,
		killed,
		crmOf,
	});
	const { rerun, windows } = killedAttempts;
	const history = checkAttemptHistory(view, killed);
	const { slow } = history;
	const crm = checkCrmSideEffects({
		view,
		crmOf,
		causeOf: orphanCause(killed, rerun, slow),
		honourKeys: run.honourKeys,
	});
	const listed = checkReportListsUnknownOutcomes({ report, view, killed, slow });
	const { reportRows } = listed;
	const checkpoints = checkCheckpointsBeforeCrm(view, crmOf);
	const checkList = checkCheckList({
		reportRows,
		view,
		crmOf,
		killed,
		lastInFlightAt: run.lastInFlightAt,
	});
	const orphans = checkOrphansListed(crm.orphanAttempts, reportRows);
	const unheld = checkUnheldRecordsListed({
		view,
		reportRows,
		keysToCheck: new Set(report.check_external_system.stable_keys),
	});
	const late = lateAttemptsOf(view, rerun, slow);
	const routes = await nodeRoutesByAttempt(
		env,
		CHECKPOINT_NODE,
		late.map((attempt) => attempt.attempt_id),
		run.startedAt,
	);
	const lateChecked = checkLateAttempts({ late, routes, rerun, killed, crmOf });
	for (const [window, count] of Object.entries(lateChecked.rerunStoppedByWindow))
		windows[window as Window].rerunStoppedAtCheckpoint += count ?? 0;

	const killCounts = new Map<string, number>();
	for (const info of killed.values())
		killCounts.set(info.jobId, (killCounts.get(info.jobId) ?? 0) + 1);
	const { submissions } = run;
	return {
		windows,
		jobs: {
			submitted: submissions.length,
			accepted: noneLost.acceptedIds.size,
			inDb: view.jobs.length,
			done: terminal.done,
			failed: terminal.failed,
			failedByCode: terminal.failedByCode,
			other: terminal.other,
			maxAttempts: Math.max(0, ...view.jobs.map((job) => job.attempts)),
			killedMoreThanOnce: [...killCounts.values()].filter((count) => count > 1).length,
		},
		submissions: {
			unansweredTries: submissions.reduce((sum, submission) => sum + submission.unanswered, 0),
			answered503: submissions.reduce((sum, submission) => sum + submission.answered503, 0),
			startingUp: submissions.reduce((sum, submission) => sum + submission.startingUp, 0),
			lostAnswersRecovered: submissions.filter((submission) => submission.recoveredLostAnswer)
				.length,
		},
		crm: {
			requests: crm.requests,
			created: crm.created,
			replayed: crm.replayed,
			jobsWithMoreThanOneRecord: crm.jobsWithMoreThanOneRecord,
			extraRecords: crm.extraRecords,
			orphans: crm.orphans,
			duplicatesByCause: crm.duplicatesByCause,
			replaysByCause: crm.replaysByCause,
		},
		report: {
			rows: reportRows.size,
			jobs: listed.reportJobs.size,
			leaseExpiredAttempts: listed.leaseExpiredAttempts,
			exact: listed.exact,
			withCheckpoint: checkList.withCheckpoint,
			jobsToCheck: checkList.jobsToCheck,
			withoutCheckpoint: checkList.withoutCheckpoint,
			jobsWithoutCheckpoint: checkList.jobsWithoutCheckpoint,
			checkedWithCrmRequest: checkList.checkedWithCrmRequest,
			checkedKilledBeforeRequest: checkList.checkedKilledBeforeRequest,
			checkedKilledBeforeRequestByWindow: checkList.checkedKilledBeforeRequestByWindow,
			leaseExpiredWithCrmRequest: checkList.leaseExpiredWithCrmRequest,
			checkpointRowsExact: checkList.checkpointRowsExact,
			checkListMatchesCrmRequests: checkList.checkListMatchesCrmRequests,
			coversEveryOrphan: orphans.coversEveryOrphan,
			unheldRecords: unheld.unheldRecords,
			unheldRecordsListed: unheld.unheldRecordsListed,
		},
		lateAttempts: {
			stoppedAtCheckpoint: lateChecked.stoppedAtCheckpoint,
			withCrmRequest: lateChecked.withCrmRequest,
			noCrmRequestNotAtCheckpoint: lateChecked.noCrmRequestNotAtCheckpoint,
		},
		attempts: {
			total: view.attempts.length,
			killed: killed.size,
			rerunAtBoot: rerun.size,
			slow: slow.size,
			leaseExpired: history.leaseExpired,
			staleApplied: killedAttempts.staleApplied + history.staleApplied + crm.staleApplied,
		},
		stuck: terminal.stuck,
		lost: noneLost.lost,
		violations: [
			noneLost,
			terminal,
			attribution,
			killedAttempts,
			history,
			crm,
			listed,
			checkpoints,
			checkList,
			orphans,
			unheld,
			lateChecked,
		].flatMap((checked) => checked.violations),
	};
}
