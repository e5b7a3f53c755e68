/** Invariants about attempts: whose request is whose, what killed attempts did afterwards. */
import { ATTEMPT_HEADER, CRM_CHECKPOINT } from '../constants';
import type { KilledAttempt, KillRecord, OrphanCause, WindowFigures } from '../kill-types';
import type { CrmView } from '../observations';
import { WINDOWS, type Window } from '../windows';
import type { Checked, CrmOf, FinalView } from './view';

/**
 * Every CRM request of a job of the run names (in the attempt header) an attempt of that job;
 * returns the requests by attempt.
 */
export function attributeCrmRequests(
	view: FinalView,
): Checked & { crmByAttempt: Map<string, CrmView[]>; crmOf: CrmOf } {
	const violations: string[] = [];
	const crmByAttempt = new Map<string, CrmView[]>();
	for (const [key, entries] of view.crm) {
		if (!view.jobById.has(key)) continue;
		for (const entry of entries) {
			if (entry.attemptId === null) {
				violations.push(`CRM request for job ${key} without ${ATTEMPT_HEADER}`);
				continue;
			}
			const owner = view.attemptById.get(entry.attemptId);
			if (!owner || owner.job_id !== key)
				violations.push(
					`CRM request for job ${key} names attempt ${entry.attemptId} of another job`,
				);
			const list = crmByAttempt.get(entry.attemptId) ?? [];
			list.push(entry);
			crmByAttempt.set(entry.attemptId, list);
		}
	}
	return { crmByAttempt, crmOf: (attemptId) => crmByAttempt.get(attemptId) ?? [], violations };
}

function emptyFigures(): WindowFigures {
	return {
		pairs: 0,
		jobs: 0,
		kills: 0,
		rerunHeld: 0,
		rerunSuperseded: 0,
		rerunStoppedAtCheckpoint: 0,
		withCrmRequest: 0,
	};
}

/**
 * Killed attempts are dead for good (lease_expired, no request after the crash), or were run
 * again by n8n at boot, which only Worker executions queued in n8n but not started (T1, worker
 * `new`) may be: n8n 2.x runs those again. An attempt killed in T1/T2 has no CRM request from
 * before the crash. Also totals the per-window figures.
 */
export function checkKilledAttempts(input: {
	view: FinalView;
	kills: KillRecord[];
	caught: Map<string, Set<Window>>;
	killed: Map<string, KilledAttempt>;
	crmOf: CrmOf;
}): Checked & { rerun: Set<string>; staleApplied: number; windows: Record<Window, WindowFigures> } {
	const { view, kills, caught, killed, crmOf } = input;
	const violations: string[] = [];
	const rerun = new Set<string>();
	let staleApplied = 0;
	const windows = Object.fromEntries(WINDOWS.map((w) => [w, emptyFigures()])) as Record<
		Window,
		WindowFigures
	>;
	for (const kill of kills) {
		for (const w of WINDOWS) {
			windows[w].pairs += kill.windows[w];
			if (kill.windows[w] > 0) windows[w].kills++;
		}
	}
	for (const set of caught.values()) for (const w of set) windows[w].jobs++;
	for (const [attemptId, info] of killed) {
		const after = [...(view.ai.get(attemptId) ?? []), ...crmOf(attemptId)].some(
			(call) => call.at > info.snapshotAt,
		);
		const outcome = view.attemptById.get(attemptId)?.outcome ?? null;
		const ranAgain = after || outcome !== 'lease_expired';
		if (crmOf(attemptId).length > 0) windows[info.window].withCrmRequest++;
		if (!ranAgain) continue;
		rerun.add(attemptId);
		if (outcome === 'lease_expired') windows[info.window].rerunSuperseded++;
		else windows[info.window].rerunHeld++;
		if (info.window !== 'T1' || info.worker !== 'new') {
			staleApplied += outcome === 'lease_expired' ? 0 : 1;
			violations.push(
				`attempt ${attemptId} of job ${info.jobId}, killed in ${info.window} (worker ${info.worker}) at kill ${info.kill}, ran again after the crash (outcome ${outcome})`,
			);
		}
		if ((info.window === 'T1' || info.window === 'T2') && !after && crmOf(attemptId).length > 0) {
			violations.push(
				`attempt ${attemptId} killed in ${info.window} has a CRM request from before the crash — misclassified`,
			);
		}
	}
	return { rerun, staleApplied, windows, violations };
}

/**
 * The checkpoint against the journals: the Worker records it right before the CRM call, so
 * every attempt that reached the CRM has it, recorded before its request; and no attempt
 * recorded it without having called the AI first.
 */
export function checkCheckpointsBeforeCrm(view: FinalView, crmOf: CrmOf): Checked {
	const violations: string[] = [];
	for (const attempt of view.attempts) {
		const requests = crmOf(attempt.attempt_id);
		if (requests.length > 0) {
			const firstRequestAt = Math.min(...requests.map((request) => request.at));
			if (attempt.checkpoint !== CRM_CHECKPOINT)
				violations.push(
					`attempt ${attempt.attempt_id} of job ${attempt.job_id} reached the CRM but recorded checkpoint ${attempt.checkpoint}`,
				);
			// A second of slack: DATABASE_URL may point at a PostgreSQL on another clock.
			else if (attempt.checkpoint_at && attempt.checkpoint_at.getTime() > firstRequestAt + 1_000) {
				violations.push(
					`attempt ${attempt.attempt_id} recorded its checkpoint at ${attempt.checkpoint_at.toISOString()}, after its CRM request at ${new Date(firstRequestAt).toISOString()}`,
				);
			}
		}
		if (attempt.checkpoint !== null && (view.ai.get(attempt.attempt_id) ?? []).length === 0)
			violations.push(
				`attempt ${attempt.attempt_id} recorded checkpoint ${attempt.checkpoint} without an AI request`,
			);
	}
	return { violations };
}

/**
 * Why an attempt may have reached the CRM without its result being kept: killed in T3/T4 (and
 * not run again), run again at boot, or slower than its lease; null for none of these.
 */
export function orphanCause(
	killed: Map<string, KilledAttempt>,
	rerun: Set<string>,
	slow: Set<string>,
): (attemptId: string) => OrphanCause | null {
	return (attemptId) => {
		const info = killed.get(attemptId);
		if (info && (info.window === 'T3' || info.window === 'T4') && !rerun.has(attemptId))
			return info.window;
		if (info && rerun.has(attemptId)) return 'T1 re-run at boot';
		if (slow.has(attemptId)) return 'slow';
		return null;
	};
}
