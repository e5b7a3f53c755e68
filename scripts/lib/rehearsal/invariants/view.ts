/**
 * The final state of a kill rehearsal, indexed for the invariants (invariants/*.ts). Each
 * invariant is a plain function over this view and what the kill loop recorded; it returns its
 * figures and the list of violations (empty = the guarantee held).
 */
import type { AttemptRow, CallView, CrmView, JobRow, Snapshot } from '../observations';

export interface FinalView {
	jobs: JobRow[];
	attempts: AttemptRow[];
	jobById: Map<string, JobRow>;
	attemptById: Map<string, AttemptRow>;
	/** Attempts of each job, in attempt order. */
	attemptsByJob: Map<string, AttemptRow[]>;
	/** AI requests by attempt id. */
	ai: Map<string, CallView[]>;
	/** CRM requests by Idempotency-Key (the job id). */
	crm: Map<string, CrmView[]>;
}

export function finalView(snap: Pick<Snapshot, 'jobs' | 'attempts' | 'ai' | 'crm'>): FinalView {
	const attemptsByJob = new Map<string, AttemptRow[]>();
	for (const attempt of snap.attempts) {
		const list = attemptsByJob.get(attempt.job_id) ?? [];
		list.push(attempt);
		attemptsByJob.set(attempt.job_id, list);
	}
	return {
		jobs: snap.jobs,
		attempts: snap.attempts,
		jobById: new Map(snap.jobs.map((job) => [job.id, job])),
		attemptById: new Map(snap.attempts.map((attempt) => [attempt.attempt_id, attempt])),
		attemptsByJob,
		ai: snap.ai,
		crm: snap.crm,
	};
}

/** CRM requests of one attempt (see `attributeCrmRequests`). */
export type CrmOf = (attemptId: string) => CrmView[];

export interface Checked {
	violations: string[];
}
