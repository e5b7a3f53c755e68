/** Invariants about the reconciliation report against what really happened. */
import { CRM_CHECKPOINT } from '../constants';
import type { CheckListFigures, KilledAttempt } from '../kill-types';
import { reportConsistency, type ReconciliationReport, type ReportRow } from '../reconciliation';
import type { Window } from '../windows';
import type { Checked, CrmOf, FinalView } from './view';

/**
 * The report lists exactly the attempts that ended without a recorded outcome (lease_expired),
 * each keyed by its job id, and only attempts that were in flight at a kill or slower than
 * their lease; its own totals add up.
 */
export function checkReportListsUnknownOutcomes(input: {
	report: ReconciliationReport;
	view: FinalView;
	killed: Map<string, KilledAttempt>;
	slow: Set<string>;
}): Checked & {
	reportRows: Map<string, ReportRow>;
	reportJobs: Set<string>;
	leaseExpiredAttempts: number;
	exact: boolean;
} {
	const { report, view, killed, slow } = input;
	const violations = reportConsistency(report).map(
		(problem) => `reconciliation report: ${problem}`,
	);
	const reportRows = new Map<string, ReportRow>();
	const reportJobs = new Set<string>();
	for (const row of report.unknown_outcomes) {
		if (!view.jobById.has(row.job_id)) continue;
		reportRows.set(row.attempt_id, row);
		reportJobs.add(row.job_id);
		if (row.stable_key !== row.job_id)
			violations.push(`report row for ${row.job_id} has stable_key ${row.stable_key}`);
		if (row.outcome !== 'lease_expired')
			violations.push(`report row for ${row.job_id} has outcome ${row.outcome}`);
	}
	const leaseExpiredIds = new Set(
		view.attempts
			.filter((attempt) => attempt.outcome === 'lease_expired')
			.map((attempt) => attempt.attempt_id),
	);
	let exact = reportRows.size === leaseExpiredIds.size;
	for (const attemptId of leaseExpiredIds) {
		if (!reportRows.has(attemptId)) {
			exact = false;
			violations.push(
				`attempt ${attemptId} ended lease_expired but is missing from the unknown-outcomes report`,
			);
		}
	}
	for (const attemptId of reportRows.keys()) {
		if (!leaseExpiredIds.has(attemptId)) exact = false;
		if (!killed.has(attemptId) && !slow.has(attemptId))
			violations.push(
				`the unknown-outcomes report lists attempt ${attemptId}, which was neither in flight at a kill nor slower than its lease`,
			);
	}
	for (const [attemptId, info] of killed) {
		if (view.attemptById.get(attemptId)?.outcome === 'lease_expired' && !reportRows.has(attemptId))
			violations.push(`attempt ${attemptId} killed in ${info.window} is not in the report`);
	}
	return {
		reportRows,
		reportJobs,
		leaseExpiredAttempts: leaseExpiredIds.size,
		exact,
		violations,
	};
}

/**
 * "Check the CRM" (rows with a checkpoint) is exactly the lease_expired attempts that reached
 * the checkpoint: those that reached the CRM, plus only attempts killed between checkpoint and
 * request; no row without a checkpoint reached the CRM.
 */
export function checkCheckList(input: {
	reportRows: Map<string, ReportRow>;
	view: FinalView;
	crmOf: CrmOf;
	killed: Map<string, KilledAttempt>;
	/** Latest kill snapshot at which each attempt was in flight. */
	lastInFlightAt: Map<string, number>;
}): Checked & CheckListFigures {
	const { reportRows, view, crmOf, killed, lastInFlightAt } = input;
	const violations: string[] = [];
	const checkpointRows = [...reportRows.values()].filter((row) => row.checkpoint !== null);
	const uncheckedRows = [...reportRows.values()].filter((row) => row.checkpoint === null);
	const leaseExpiredAtCheckpoint = new Set(
		view.attempts
			.filter((attempt) => attempt.outcome === 'lease_expired' && attempt.checkpoint !== null)
			.map((attempt) => attempt.attempt_id),
	);
	let checkpointRowsExact = checkpointRows.length === leaseExpiredAtCheckpoint.size;
	for (const row of checkpointRows) {
		const recorded = view.attemptById.get(row.attempt_id)?.checkpoint ?? null;
		if (!leaseExpiredAtCheckpoint.has(row.attempt_id) || recorded !== row.checkpoint) {
			checkpointRowsExact = false;
			violations.push(
				`report row of attempt ${row.attempt_id} has checkpoint ${row.checkpoint}, the attempt recorded ${recorded}`,
			);
		}
	}
	for (const row of uncheckedRows) {
		if (leaseExpiredAtCheckpoint.has(row.attempt_id)) {
			checkpointRowsExact = false;
			violations.push(
				`report row of attempt ${row.attempt_id} has no checkpoint, the attempt recorded ${view.attemptById.get(row.attempt_id)?.checkpoint}`,
			);
		}
	}
	let checkListMatchesCrmRequests = true;
	let checkedWithCrmRequest = 0;
	let checkedKilledBeforeRequest = 0;
	const byWindow: Partial<Record<Window, number>> = {};
	for (const row of checkpointRows) {
		if (row.checkpoint !== CRM_CHECKPOINT)
			violations.push(
				`report row of attempt ${row.attempt_id} has checkpoint ${row.checkpoint}, expected ${CRM_CHECKPOINT}`,
			);
		if (crmOf(row.attempt_id).length > 0) {
			checkedWithCrmRequest++;
			continue;
		}
		const info = killed.get(row.attempt_id);
		const checkpointAt = view.attemptById.get(row.attempt_id)?.checkpoint_at?.getTime() ?? Infinity;
		// The kill must have come after the checkpoint (a second of slack for another clock).
		if (info && checkpointAt <= (lastInFlightAt.get(row.attempt_id) ?? 0) + 1_000) {
			checkedKilledBeforeRequest++;
			byWindow[info.window] = (byWindow[info.window] ?? 0) + 1;
		} else {
			checkListMatchesCrmRequests = false;
			violations.push(
				`report row of attempt ${row.attempt_id} (job ${row.job_id}) says check the CRM, but the CRM never got its request and the attempt was not killed after its checkpoint`,
			);
		}
	}
	const leaseExpiredWithCrmRequest = view.attempts.filter(
		(attempt) => attempt.outcome === 'lease_expired' && crmOf(attempt.attempt_id).length > 0,
	);
	for (const attempt of leaseExpiredWithCrmRequest) {
		const row = reportRows.get(attempt.attempt_id);
		if (row?.checkpoint === CRM_CHECKPOINT) continue;
		checkListMatchesCrmRequests = false;
		violations.push(
			`attempt ${attempt.attempt_id} (job ${attempt.job_id}) reached the CRM and ended lease_expired, but the report ${row ? `lists it with checkpoint ${row.checkpoint}` : 'does not list it'}`,
		);
	}
	for (const row of uncheckedRows) {
		if (crmOf(row.attempt_id).length === 0) continue;
		checkListMatchesCrmRequests = false;
		violations.push(
			`report row of attempt ${row.attempt_id} (job ${row.job_id}) says no CRM call was made, but the CRM got its request`,
		);
	}
	return {
		withCheckpoint: checkpointRows.length,
		jobsToCheck: new Set(checkpointRows.map((row) => row.job_id)).size,
		withoutCheckpoint: uncheckedRows.length,
		jobsWithoutCheckpoint: new Set(uncheckedRows.map((row) => row.job_id)).size,
		checkedWithCrmRequest,
		checkedKilledBeforeRequest,
		checkedKilledBeforeRequestByWindow: byWindow,
		leaseExpiredWithCrmRequest: leaseExpiredWithCrmRequest.length,
		checkpointRowsExact,
		checkListMatchesCrmRequests,
		violations,
	};
}

/** Every attempt with a CRM request but no kept result is listed with the CRM checkpoint. */
export function checkOrphansListed(
	orphanAttempts: Set<string>,
	reportRows: Map<string, ReportRow>,
): Checked & { coversEveryOrphan: boolean } {
	const violations: string[] = [];
	for (const attemptId of orphanAttempts) {
		if (reportRows.get(attemptId)?.checkpoint !== CRM_CHECKPOINT)
			violations.push(
				`attempt ${attemptId} reached the CRM without a kept result but is not in the unknown-outcomes report with checkpoint ${CRM_CHECKPOINT}`,
			);
	}
	return { coversEveryOrphan: violations.length === 0, violations };
}
