/** Invariants about jobs: none lost, every one terminal, one outcome per attempt. */
import type { Submission } from '../submitter';
import type { KilledAttempt } from '../kill-types';
import type { Checked, FinalView } from './view';

/** None lost: every key got a 202, every 202 names a stored job, every stored job has a key. */
export function checkNoJobLost(
	submissions: Submission[],
	view: FinalView,
): Checked & { lost: number; acceptedIds: Set<string> } {
	const violations: string[] = [];
	let lost = 0;
	const acceptedIds = new Set<string>();
	for (const submission of submissions) {
		if (submission.jobId === null) {
			lost++;
			violations.push(`submission ${submission.key} never got a 202`);
			continue;
		}
		acceptedIds.add(submission.jobId);
		if (!view.jobById.has(submission.jobId)) {
			lost++;
			violations.push(`job ${submission.jobId} (202 for ${submission.key}) is not in the database`);
		}
		if (submission.otherAnswers.length > 0)
			violations.push(
				`submission ${submission.key} got unexpected answers ${submission.otherAnswers.join(', ')}`,
			);
	}
	for (const job of view.jobs)
		if (!acceptedIds.has(job.id))
			violations.push(`job ${job.id} (${job.doc_id}) exists but no client got its id`);
	return { lost, acceptedIds, violations };
}

/** Every job ended done or failed; none is stuck queued or running. */
export function checkEveryJobTerminal(view: FinalView): Checked & {
	stuck: number;
	done: number;
	failed: number;
	other: number;
	failedByCode: Record<string, number>;
} {
	const violations: string[] = [];
	const failedByCode: Record<string, number> = {};
	let stuck = 0;
	let done = 0;
	let failed = 0;
	let other = 0;
	for (const job of view.jobs) {
		if (job.status === 'done') done++;
		else if (job.status === 'failed') {
			failed++;
			failedByCode[job.error_code ?? 'none'] = (failedByCode[job.error_code ?? 'none'] ?? 0) + 1;
		} else {
			other++;
			if (job.status === 'running' || job.status === 'queued') stuck++;
			violations.push(`job ${job.id} ended ${job.status}, not done or failed`);
		}
	}
	return { stuck, done, failed, other, failedByCode, violations };
}

/**
 * Attempt history: one outcome per attempt, and only the attempt holding the lease (the last
 * one) wrote a result that fits the job's status. Attempts that ended lease_expired without
 * having been killed outlived their lease while alive ("slow").
 */
export function checkAttemptHistory(
	view: FinalView,
	killed: Map<string, KilledAttempt>,
): Checked & { leaseExpired: number; slow: Set<string>; staleApplied: number } {
	const violations: string[] = [];
	let leaseExpired = 0;
	let staleApplied = 0;
	const slow = new Set<string>();
	for (const job of view.jobs) {
		const attempts = view.attemptsByJob.get(job.id) ?? [];
		if (attempts.length !== job.attempts)
			violations.push(
				`job ${job.id}: ${attempts.length} attempt rows for attempts = ${job.attempts}`,
			);
		attempts.forEach((attempt, index) => {
			if (attempt.outcome === 'lease_expired') {
				leaseExpired++;
				if (!killed.has(attempt.attempt_id)) slow.add(attempt.attempt_id);
			}
			if (attempt.outcome === null)
				violations.push(`job ${job.id} attempt ${attempt.attempt} has no outcome`);
			const last = index === attempts.length - 1;
			if (!last && !['lease_expired', 'retry', 'released'].includes(attempt.outcome ?? '')) {
				staleApplied++;
				violations.push(
					`job ${job.id}: attempt ${attempt.attempt} of ${attempts.length} recorded ${attempt.outcome}, an outcome only the current attempt may write`,
				);
			}
			if (last) {
				const fits =
					job.status === 'done'
						? attempt.outcome === 'succeeded'
						: job.status === 'failed'
							? ['failed', 'retry', 'lease_expired'].includes(attempt.outcome ?? '')
							: false;
				if (!fits)
					violations.push(
						`job ${job.id} is ${job.status} but its last attempt recorded ${attempt.outcome}`,
					);
			}
		});
	}
	return { leaseExpired, slow, staleApplied, violations };
}
