/**
 * Fault rehearsal: the failure story of the package played against the real parts. Shared by
 * `test/e2e/fault-rehearsal.test.ts` (a short rehearsal) and `npm run rehearsal` (the full one,
 * which writes its figures to docs/RELIABILITY.md). The parts, by job, in rehearsal/:
 *
 *   environment.ts    real n8n with the bundled workflows, short lease, attempt ids on requests,
 *                     the job database on a private embedded PostgreSQL (or behind a TCP proxy)
 *   submitter.ts      keeps jobs in flight through the real receiver webhook
 *   windows.ts        the T0–T4 window model: classify a job at a kill, aim a kill at a window
 *                       T0  queued, not leased
 *                       T1  leased, worker not started: no request of this attempt reached the AI
 *                       T2  worker running before the CRM call (AI request sent)
 *                       T3  the CRM got the request and stored the record, its answer is delayed
 *                       T4  the CRM answered, Job Complete not committed
 *                       R   the attempt died at an earlier kill, its lease not yet taken over
 *   kill-loop.ts      `runKillRehearsal`: SIGKILL n8n `kills` times, restart after each, drain
 *   invariants/*.ts   one named function per guarantee, checked on the final state
 *                     (final-state.ts assembles them into the result)
 *   reconciliation.ts the unknown-outcomes report and its own arithmetic
 *   outage.ts         `runOutageScenario`: the job database restarted (or cut) mid-run
 *   slow-worker.ts    `runSlowWorkerScenario`: late CRM answer (past the checkpoint), late AI
 *                     answer (before it)
 *   report.ts         the figures as Markdown sections of docs/RELIABILITY.md
 *
 * Every check comes back as a list of violations (empty = every guarantee held).
 */
export {
	ATTEMPT_HEADER,
	CHECKPOINT_NODE,
	CRM_CHECKPOINT,
	DISPATCHER_ID,
	RECEIVER_ID,
	WORKER_ID,
} from './rehearsal/constants';
export {
	startRehearsalEnvironment,
	type OutageKind,
	type RehearsalEnvironment,
	type RehearsalEnvironmentOptions,
} from './rehearsal/environment';
export type { NodeRoutes } from './rehearsal/executions';
export { runKillRehearsal } from './rehearsal/kill-loop';
export type {
	KillRecord,
	KillRehearsalConfig,
	KillRehearsalResult,
	LateCause,
	OrphanCause,
	WindowFigures,
} from './rehearsal/kill-types';
export { runOutageScenario, type OutageResult } from './rehearsal/outage';
export {
	fetchReconciliationReport,
	fetchUnknownOutcomes,
	reportConsistency,
	type ReconciliationReport,
	type ReportRow,
} from './rehearsal/reconciliation';
export {
	machineDescription,
	renderKillSection,
	renderOutageSection,
	renderSlowWorkerSection,
	updateReliabilityDoc,
	type RunInfo,
} from './rehearsal/report';
export {
	runSlowWorkerScenario,
	type SlowCaseResult,
	type SlowWorkerResult,
} from './rehearsal/slow-worker';
export { seededRandom, WINDOW_LABELS, WINDOWS, type Window } from './rehearsal/windows';
