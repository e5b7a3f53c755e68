/**
 * The Job Trigger's engine, without n8n: JobTriggerEngine (engine.ts) leases and emits,
 * WakeUps (wakeups.ts) decides when it looks, NotificationListener (listener.ts) keeps the
 * LISTEN connection, options.ts checks the settings.
 */
export { JobTriggerEngine, peekJob, release, type JobTriggerStats } from './engine';
export {
	DEFAULT_BACKSTOP_MS,
	DEFAULT_MAX_IN_FLIGHT,
	type EmitJobs,
	type JobTriggerCommonOptions,
	type JobTriggerOptions,
} from './options';
export type { WakeReason } from './wakeups';
export { NotificationListener, type ListenerOptions, type TriggerLogger } from './listener';
