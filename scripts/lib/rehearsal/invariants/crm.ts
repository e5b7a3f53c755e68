/** Invariants about the side effect: CRM records and where each one came from. */
import { CRM_CHECKPOINT } from '../constants';
import { byCause, type CrmFigures, type OrphanCause } from '../kill-types';
import type { ReportRow } from '../reconciliation';
import type { Checked, CrmOf, FinalView } from './view';

/**
 * CRM side effects. Each attempt sends at most one CRM request; a done job's result names the
 * record its last attempt (the one holding the lease) got; every other attempt that reached the
 * CRM (an "orphan": its record may exist without anyone having recorded it) has a cause; with
 * a CRM that honours keys every job has at most one record (exactly one when done), with one
 * that ignores them every request created a record.
 */
export function checkCrmSideEffects(input: {
	view: FinalView;
	crmOf: CrmOf;
	causeOf: (attemptId: string) => OrphanCause | null;
	honourKeys: boolean;
}): Checked & CrmFigures & { orphanAttempts: Set<string>; staleApplied: number } {
	const { view, crmOf, causeOf, honourKeys } = input;
	const violations: string[] = [];
	const figures: CrmFigures = {
		requests: 0,
		created: 0,
		replayed: 0,
		jobsWithMoreThanOneRecord: 0,
		extraRecords: 0,
		orphans: byCause(),
		duplicatesByCause: byCause(),
		replaysByCause: byCause(),
	};
	const orphanAttempts = new Set<string>();
	let staleApplied = 0;
	for (const job of view.jobs) {
		const attempts = view.attemptsByJob.get(job.id) ?? [];
		const entries = view.crm.get(job.id) ?? [];
		figures.requests += entries.length;
		const records = entries.filter((entry) => entry.createdRecordId !== null);
		figures.created += records.length;
		figures.replayed += entries.filter((entry) => entry.replayed).length;
		for (const attempt of attempts)
			if (crmOf(attempt.attempt_id).length > 1)
				violations.push(
					`job ${job.id}: attempt ${attempt.attempt} sent ${crmOf(attempt.attempt_id).length} CRM requests`,
				);
		const lastAttempt = attempts[attempts.length - 1];
		const applied = job.status === 'done' ? lastAttempt?.attempt_id : undefined;
		// The applied result comes from the attempt that held the lease: the last one.
		if (applied) {
			const answer = crmOf(applied)[0];
			if (!answer)
				violations.push(`job ${job.id} is done but its last attempt sent no CRM request`);
			else if (job.result?.crm_record_id !== answer.recordId) {
				staleApplied++;
				violations.push(
					`job ${job.id}: result names CRM record ${job.result?.crm_record_id}, but the attempt holding the lease got ${answer.recordId}`,
				);
			}
		}
		const requesters = attempts.filter((attempt) => crmOf(attempt.attempt_id).length > 0);
		for (const attempt of requesters) {
			if (attempt.attempt_id === applied) continue;
			orphanAttempts.add(attempt.attempt_id);
			const cause = causeOf(attempt.attempt_id);
			if (cause === null) {
				violations.push(
					`job ${job.id}: attempt ${attempt.attempt} (${attempt.outcome}) reached the CRM without its result being kept, and was neither killed in T3/T4, re-run at boot, nor slow`,
				);
				continue;
			}
			figures.orphans[cause]++;
			// The record a job keeps is its applied attempt's (or, for a job that failed, the first
			// one); every other record is a duplicate.
			const keeper = applied ?? requesters[0]?.attempt_id;
			if (
				!honourKeys &&
				attempt.attempt_id !== keeper &&
				crmOf(attempt.attempt_id).some((entry) => entry.createdRecordId !== null)
			)
				figures.duplicatesByCause[cause]++;
		}
		if (records.length > 1) {
			figures.jobsWithMoreThanOneRecord++;
			figures.extraRecords += records.length - 1;
			if (honourKeys)
				violations.push(
					`job ${job.id}: ${records.length} CRM records although the CRM honours the key`,
				);
		}
		if (honourKeys) {
			if (job.status === 'done' && records.length !== 1)
				violations.push(`job ${job.id} is done with ${records.length} CRM records`);
			if (entries.some((entry) => entry.replayed)) {
				const first = requesters[0];
				const cause = first ? causeOf(first.attempt_id) : null;
				if (cause)
					figures.replaysByCause[cause] += entries.filter((entry) => entry.replayed).length;
			}
		} else if (records.length !== entries.length) {
			violations.push(
				`job ${job.id}: the CRM created ${records.length} records for ${entries.length} requests`,
			);
		}
	}
	return { ...figures, orphanAttempts, staleApplied, violations };
}

/**
 * Every CRM record its job does not hold (a duplicate, or any record of a dead-lettered job)
 * was created by an attempt the operator is told to check.
 */
export function checkUnheldRecordsListed(input: {
	view: FinalView;
	reportRows: Map<string, ReportRow>;
	keysToCheck: Set<string>;
}): Checked & { unheldRecords: number; unheldRecordsListed: number } {
	const violations: string[] = [];
	let unheldRecords = 0;
	let unheldRecordsListed = 0;
	for (const job of input.view.jobs) {
		const held = job.status === 'done' ? (job.result?.crm_record_id ?? null) : null;
		for (const entry of input.view.crm.get(job.id) ?? []) {
			if (entry.createdRecordId === null || entry.createdRecordId === held) continue;
			unheldRecords++;
			const row = entry.attemptId === null ? undefined : input.reportRows.get(entry.attemptId);
			if (row?.checkpoint === CRM_CHECKPOINT && input.keysToCheck.has(job.id))
				unheldRecordsListed++;
			else
				violations.push(
					`CRM record ${entry.createdRecordId} of job ${job.id} (attempt ${entry.attemptId}) is not held by the job and its attempt is not under check_external_system`,
				);
		}
	}
	return { unheldRecords, unheldRecordsListed, violations };
}
