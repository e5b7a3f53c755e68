/** Invariants about attempts that ran on after their lease was taken over. */
import { CHECKPOINT_NODE } from '../constants';
import type { NodeRoutes } from '../executions';
import type { KilledAttempt, LateCause } from '../kill-types';
import type { AttemptRow } from '../observations';
import type { Window } from '../windows';
import type { Checked, CrmOf, FinalView } from './view';

/** Attempts that lost their lease while still running: re-run at boot after being superseded, or slow. */
export function lateAttemptsOf(
	view: FinalView,
	rerun: Set<string>,
	slow: Set<string>,
): AttemptRow[] {
	return view.attempts.filter(
		(attempt) =>
			attempt.outcome === 'lease_expired' &&
			(rerun.has(attempt.attempt_id) || slow.has(attempt.attempt_id)),
	);
}

const byLateCause = (): Record<LateCause, number> => ({ 'T1 re-run at boot': 0, slow: 0 });

/**
 * A late attempt stops at the checkpoint (its item comes out on Lease Lost, no checkpoint is
 * recorded and the CRM never gets its request) unless it passed the checkpoint in time; one
 * that came out on Extended recorded the checkpoint. `routes` are from n8n's execution data.
 */
export function checkLateAttempts(input: {
	late: AttemptRow[];
	routes: Map<string, NodeRoutes>;
	rerun: Set<string>;
	killed: Map<string, KilledAttempt>;
	crmOf: CrmOf;
}): Checked & {
	stoppedAtCheckpoint: Record<LateCause, number>;
	withCrmRequest: Record<LateCause, number>;
	noCrmRequestNotAtCheckpoint: Record<LateCause, number>;
	/** Re-run attempts stopped at the checkpoint, by the window they were killed in. */
	rerunStoppedByWindow: Partial<Record<Window, number>>;
} {
	const violations: string[] = [];
	const stoppedAtCheckpoint = byLateCause();
	const withCrmRequest = byLateCause();
	const noCrmRequestNotAtCheckpoint = byLateCause();
	const rerunStoppedByWindow: Partial<Record<Window, number>> = {};
	for (const attempt of input.late) {
		const cause: LateCause = input.rerun.has(attempt.attempt_id) ? 'T1 re-run at boot' : 'slow';
		const route = input.routes.get(attempt.attempt_id);
		const requested = input.crmOf(attempt.attempt_id).length > 0;
		if (requested) withCrmRequest[cause]++;
		if (route && route.leaseLost.length > 0) {
			if (requested)
				violations.push(
					`attempt ${attempt.attempt_id} came out of ${CHECKPOINT_NODE} on Lease Lost, yet the CRM got its request`,
				);
			if (attempt.checkpoint !== null)
				violations.push(
					`attempt ${attempt.attempt_id} came out of ${CHECKPOINT_NODE} on Lease Lost, yet recorded checkpoint ${attempt.checkpoint}`,
				);
			stoppedAtCheckpoint[cause]++;
			const info = cause === 'T1 re-run at boot' ? input.killed.get(attempt.attempt_id) : undefined;
			if (info) rerunStoppedByWindow[info.window] = (rerunStoppedByWindow[info.window] ?? 0) + 1;
		}
		if (route && route.first.length > 0 && attempt.checkpoint === null)
			violations.push(
				`attempt ${attempt.attempt_id} came out of ${CHECKPOINT_NODE} on Extended, but no checkpoint is recorded`,
			);
		if (!route && !requested) noCrmRequestNotAtCheckpoint[cause]++;
	}
	return {
		stoppedAtCheckpoint,
		withCrmRequest,
		noCrmRequestNotAtCheckpoint,
		rerunStoppedByWindow,
		violations,
	};
}
