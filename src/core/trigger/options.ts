import {
	CONCURRENCY_LIMIT,
	COUNT_LIMITS,
	LEASE,
	TRIGGER_BACKSTOP,
	TRIGGER_POLL_INTERVAL,
} from '../defaults';
import { ValidationError } from '../errors';
import { validateQueueName, validateSchemaName } from '../identifiers';
import type { ConnectionConfig } from '../pool';
import type { JobStore } from '../store';
import type { LeasedJob, LeasedJobEssentials } from '../types';
import { integerInRange, optionalBoolean } from '../validate';
import type { TriggerLogger } from './listener';

export const DEFAULT_MAX_IN_FLIGHT = 10;
export const DEFAULT_BACKSTOP_MS = TRIGGER_BACKSTOP.default;
const DEFAULT_LEASE_MS = 300_000;

/** Every option but the shape of the leased jobs and the `emit` that receives them. */
export interface JobTriggerCommonOptions {
	/**
	 * The store, or how to open it: opened on first use and again after a failure, so a
	 * database that is down when the trigger starts is waited for.
	 */
	store: JobStore | (() => Promise<JobStore>);
	/** Schema of the store (names the NOTIFY channel before the store is open). */
	schema: string;
	queue: string;
	/** Most jobs emitted and not yet finished at any time (default 10). */
	maxInFlight?: number;
	leaseMs?: number;
	/** Per-queue limit across all instances (the advisory-lock limit of Job Lease); null = none. */
	concurrencyLimit?: number | null;
	/** Jobs per emission: 1 = one execution per job (default); N = up to N jobs per execution. */
	batchSize?: number;
	/** Slow sweep for expired leases and lost notices (default 30 s). */
	backstopMs?: number;
	/**
	 * Poll every this many ms instead of LISTENing (PgBouncer in transaction mode cannot
	 * LISTEN). Null/0 = LISTEN on `connection`.
	 */
	pollIntervalMs?: number | null;
	/** Connection for the LISTEN connection (required unless polling). */
	connection?: ConnectionConfig;
	/** Application name of the LISTEN connection, e.g. with the n8n process id. */
	applicationName?: string;
	/** Recorded on every attempt this trigger leases. */
	workflowId?: string | null;
	/** Stop after this many emissions (a test run leases one job); default unlimited. */
	maxEmissions?: number;
	/** Keep-alive and reconnect timing of the LISTEN connection (defaults are for production). */
	listener?: {
		keepAliveMs?: number;
		keepAliveTimeoutMs?: number;
		reconnectInitialMs?: number;
		reconnectMaxMs?: number;
	};
	logger?: TriggerLogger;
}

/**
 * Starts the execution(s) for these jobs. The returned promise settles when the execution has
 * finished (successfully or not): only then does its slot count as free again.
 */
export type EmitJobs<TJob> = (jobs: TJob[]) => Promise<unknown>;

/**
 * The trigger's options. `includeMetadata` (default true) decides what `emit` receives: LeasedJob
 * with the metadata, LeasedJobEssentials without it, and either when the flag is only known at
 * run time (a node's parameter), so an `emit` that reads metadata cannot be given jobs without it.
 */
export type JobTriggerOptions = JobTriggerCommonOptions &
	(
		| { includeMetadata?: true; emit: EmitJobs<LeasedJob> }
		| { includeMetadata: false; emit: EmitJobs<LeasedJobEssentials> }
		| { includeMetadata?: boolean; emit: EmitJobs<LeasedJob | LeasedJobEssentials> }
	);

/** The options' numbers and names, checked and with their defaults filled in. */
export interface TriggerSettings {
	schema: string;
	queue: string;
	maxInFlight: number;
	batchSize: number;
	leaseMs: number;
	concurrencyLimit: number | null;
	backstopMs: number;
	/** Null: LISTEN instead of polling. */
	pollIntervalMs: number | null;
	includeMetadata: boolean;
}

/** Checks the options before anything starts; a bad one throws a ValidationError naming it. */
export function triggerSettings(options: JobTriggerOptions): TriggerSettings {
	const settings: TriggerSettings = {
		schema: validateSchemaName(options.schema),
		queue: validateQueueName(options.queue),
		maxInFlight: integerInRange(
			options.maxInFlight,
			'maxJobsInFlight',
			COUNT_LIMITS.inFlight.min,
			COUNT_LIMITS.inFlight.max,
			DEFAULT_MAX_IN_FLIGHT,
		),
		batchSize: integerInRange(
			options.batchSize,
			'batchSize',
			COUNT_LIMITS.triggerBatch.min,
			COUNT_LIMITS.triggerBatch.max,
			1,
		),
		leaseMs: integerInRange(options.leaseMs, 'leaseMs', LEASE.min, LEASE.max, DEFAULT_LEASE_MS),
		concurrencyLimit:
			options.concurrencyLimit === null || options.concurrencyLimit === undefined
				? null
				: integerInRange(
						options.concurrencyLimit,
						'concurrencyLimit',
						CONCURRENCY_LIMIT.min,
						CONCURRENCY_LIMIT.max,
						CONCURRENCY_LIMIT.min,
					),
		backstopMs: integerInRange(
			options.backstopMs,
			'backstopMs',
			TRIGGER_BACKSTOP.min,
			TRIGGER_BACKSTOP.max,
			DEFAULT_BACKSTOP_MS,
		),
		pollIntervalMs:
			options.pollIntervalMs === null ||
			options.pollIntervalMs === undefined ||
			options.pollIntervalMs === 0
				? null
				: integerInRange(
						options.pollIntervalMs,
						'pollIntervalMs',
						TRIGGER_POLL_INTERVAL.min,
						TRIGGER_POLL_INTERVAL.max,
						5_000,
					),
		includeMetadata: optionalBoolean(options.includeMetadata, 'includeMetadata', true),
	};
	if (settings.pollIntervalMs === null && !options.connection) {
		throw new ValidationError(
			'connection',
			'a LISTEN connection is needed unless the trigger polls',
			'Pass the connection settings, or set a poll interval',
		);
	}
	return settings;
}
