/** The kill rehearsal's configuration, what each kill recorded, and its result. */
import type { Log } from './constants';
import type { Window } from './windows';

export interface KillRehearsalConfig {
	kills: number;
	honourKeys: boolean;
	leaseSeconds: number;
	/** Jobs of the run kept queued or running (default 24). */
	inFlight?: number;
	/** Parallel receiver requests (default 4). */
	submitConcurrency?: number;
	aiLatencyMs?: number;
	crmDelayMs?: number;
	/** Random time n8n runs after a restart before the next kill is aimed (default 2–8 s). */
	minUpMs?: number;
	maxUpMs?: number;
	/** How long a kill waits for its target window before it kills anyway (default 20 s). */
	aimTimeoutMs?: number;
	drainTimeoutMs?: number;
	/** Prefix of this run's document ids (and keys); must be unique in the schema. */
	runId: string;
	/** Windows the kills aim at, in turn (default T1, T2, T3, T4). */
	targets?: Window[];
	seed?: number;
	log?: Log;
}

export interface KillRecord {
	n: number;
	target: Window;
	/** The target window was observed before the kill. */
	aimed: boolean;
	upMs: number;
	restartMs: number;
	windows: Record<Window, number>;
	/** T1 attempts by the state of their execution in n8n: new (queued), running, none. */
	t1Workers: Record<string, number>;
	recovering: number;
}

/**
 * Why an attempt created a side effect (a CRM request) without its job recording that
 * attempt's result: it was killed in T3/T4, it was killed in T1 and n8n ran it again at boot
 * after its lease had been taken over, or it outlived its lease while alive.
 */
export type OrphanCause = 'T3' | 'T4' | 'T1 re-run at boot' | 'slow';
export const CAUSES: OrphanCause[] = ['T3', 'T4', 'T1 re-run at boot', 'slow'];
/** Attempts still running after their lease was taken over: where the checkpoint can stop them. */
export type LateCause = 'T1 re-run at boot' | 'slow';
export const LATE_CAUSES: LateCause[] = ['T1 re-run at boot', 'slow'];

export interface WindowFigures {
	/** (kill, job) pairs in this window. */
	pairs: number;
	/** Distinct jobs ever caught in this window. */
	jobs: number;
	/** Kills that caught at least one job in this window. */
	kills: number;
	/** Killed attempts n8n ran again at boot (a queued Worker execution): finished while holding the lease / after losing it. */
	rerunHeld: number;
	rerunSuperseded: number;
	/** Of the superseded: came out of the checkpoint on Lease Lost, so no CRM request. */
	rerunStoppedAtCheckpoint: number;
	/** Killed attempts whose CRM request exists (made before the kill, or by the re-run). */
	withCrmRequest: number;
}

export interface KillRehearsalResult {
	config: Required<Omit<KillRehearsalConfig, 'log' | 'seed'>> & { seed: number };
	startedAt: Date;
	durationMs: number;
	drainMs: number;
	kills: KillRecord[];
	windows: Record<Window, WindowFigures>;
	t1Workers: Record<string, number>;
	jobs: {
		submitted: number;
		accepted: number;
		inDb: number;
		done: number;
		failed: number;
		failedByCode: Record<string, number>;
		other: number;
		maxAttempts: number;
		killedMoreThanOnce: number;
	};
	submissions: {
		unansweredTries: number;
		answered503: number;
		startingUp: number;
		lostAnswersRecovered: number;
	};
	crm: CrmFigures;
	report: ReportFigures;
	/** Attempts that ran on after their lease was taken over: stopped at the checkpoint (Lease Lost, no CRM request) / reached the CRM anyway, by cause. */
	lateAttempts: {
		stoppedAtCheckpoint: Record<LateCause, number>;
		withCrmRequest: Record<LateCause, number>;
		/** No CRM request, and no finished Worker execution passed the checkpoint node (died again before it, or never handed to a worker). */
		noCrmRequestNotAtCheckpoint: Record<LateCause, number>;
	};
	attempts: {
		total: number;
		killed: number;
		rerunAtBoot: number;
		slow: number;
		leaseExpired: number;
		staleApplied: number;
	};
	/** Jobs running with an expired lease seen at kill time (awaiting recovery), max age in ms. */
	maxExpiredLeaseAgeMs: number;
	stuck: number;
	lost: number;
	violations: string[];
}

export function byCause(): Record<OrphanCause, number> {
	return { T3: 0, T4: 0, 'T1 re-run at boot': 0, slow: 0 };
}

export interface KilledAttempt {
	kill: number;
	window: Window;
	jobId: string;
	snapshotAt: number;
	worker: string;
}

export interface CrmFigures {
	requests: number;
	created: number;
	replayed: number;
	jobsWithMoreThanOneRecord: number;
	extraRecords: number;
	/** Attempts whose CRM request has no recorded result, by cause. */
	orphans: Record<OrphanCause, number>;
	/** Honouring CRM: replays answered to a later attempt; ignoring CRM: extra records — by cause. */
	duplicatesByCause: Record<OrphanCause, number>;
	replaysByCause: Record<OrphanCause, number>;
}

/** The reconciliation report's rows with a checkpoint ("check the CRM") against the journals. */
export interface CheckListFigures {
	/** Rows with a checkpoint ("check the CRM", `check_external_system`): attempts / jobs. */
	withCheckpoint: number;
	jobsToCheck: number;
	/** Rows without one ("no CRM call made", `no_external_call`): attempts / jobs. */
	withoutCheckpoint: number;
	jobsWithoutCheckpoint: number;
	/** Rows with a checkpoint: the CRM journal has the attempt's request / it was killed between checkpoint and request. */
	checkedWithCrmRequest: number;
	checkedKilledBeforeRequest: number;
	checkedKilledBeforeRequestByWindow: Partial<Record<Window, number>>;
	/** lease_expired attempts whose request the CRM journal holds. */
	leaseExpiredWithCrmRequest: number;
	/** The rows with a checkpoint are exactly the lease_expired attempts that recorded one. */
	checkpointRowsExact: boolean;
	/** "Check the CRM" = the lease_expired attempts that reached the CRM plus killed-in-between attempts; no row without a checkpoint reached the CRM. */
	checkListMatchesCrmRequests: boolean;
}

export interface ReportFigures extends CheckListFigures {
	rows: number;
	jobs: number;
	leaseExpiredAttempts: number;
	/** The report lists exactly the attempts that ended lease_expired. */
	exact: boolean;
	/** Every attempt with a CRM request but no recorded result is listed with its checkpoint. */
	coversEveryOrphan: boolean;
	/** CRM records their job does not hold / of those created by an attempt under check_external_system. */
	unheldRecords: number;
	unheldRecordsListed: number;
}
