/** Defaults and accepted ranges of the core's inputs, in one place. Durations are milliseconds. */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/**
 * The package's command (its `bin`), run from the folder the package is installed in: installed
 * from n8n's UI, that folder has no link for `npx n8n-nodes-durable-jobs` to find.
 */
export const INSTALLED_CLI = 'node node_modules/n8n-nodes-durable-jobs/dist/src/cli.js';

/** The server part of migrateCommandLine's URL where the server is not known. */
const UNKNOWN_SERVER_URL = 'postgres://USER:PASSWORD@HOST:PORT/DATABASE';

/**
 * The one command line that applies the migrations of `schema` by hand, run where n8n runs, in
 * the folder the package is installed in. `environment` goes before DATABASE_URL (a CA file).
 */
export function migrateCommandLine(
	schema: string,
	databaseUrl: string = UNKNOWN_SERVER_URL,
	environment = '',
): string {
	return `cd ~/.n8n/nodes && ${environment}DATABASE_URL=${databaseUrl} ${INSTALLED_CLI} migrate --schema ${schema}`;
}

/**
 * How to apply the migrations of `schema` by hand, where the server is not known: the
 * credential's Test shows the command with its own server and database (migrateCommand).
 */
export function migrateByHand(schema: string): string {
	return `${migrateCommandLine(schema)} (as a role that may create the tables, where n8n runs)`;
}

/** Largest accepted payload or result, in bytes of JSON. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;
/** Queue that receives job-finished events for jobs with a callback URL. */
export const DEFAULT_CALLBACK_QUEUE = 'callbacks';

export const MAX_ATTEMPTS = { min: 1, max: 1000, jobDefault: 5, outboxDefault: 10 } as const;
export const PRIORITY = { min: -1000, max: 1000, default: 0 } as const;
/** A delay before a job is due: enqueue's Delay, a retry's explicit delay, a release's wait. */
export const DELAY = { min: 0, max: 365 * DAY, default: 0 } as const;

export const LEASE = { min: SECOND, max: DAY, default: MINUTE } as const;
/** Job Trigger: how often it looks for jobs no notice announced, and its poll interval. */
export const TRIGGER_BACKSTOP = { min: SECOND, max: DAY, default: 30 * SECOND } as const;
export const TRIGGER_POLL_INTERVAL = { min: 100, max: DAY } as const;
export const LEASE_LIMIT = { min: 1, max: 10_000, default: 1 } as const;
export const CONCURRENCY_LIMIT = { min: 1, max: 100_000 } as const;

export const BACKOFF_BASE = { min: 0, max: DAY, default: 5 * SECOND } as const;
export const BACKOFF_MAX = { min: 0, max: 30 * DAY, default: HOUR } as const;

/** How long a claim holds an idempotency key before another claimer may take it over. */
export const CLAIM = { min: SECOND, max: 7 * DAY, default: 5 * MINUTE } as const;
/** How long an idempotency key is remembered. */
export const KEY_TTL = { min: SECOND, max: 3650 * DAY, default: DAY } as const;

export const DEFAULT_OUTBOX_QUEUE = 'outbox';

export const REQUEUE_LIMIT = { min: 1, max: 10_000, default: 100 } as const;
export const REQUEUE_ADDITIONAL_ATTEMPTS = { min: 1, max: 1000, default: 3 } as const;
export const DEFAULT_CANCEL_REASON = 'Cancelled by an operator';
export const PURGE_OLDER_THAN = { min: 0, max: 3650 * DAY, default: 7 * DAY } as const;
export const PURGE_LIMIT = { min: 1, max: 100_000, default: 10_000 } as const;
export const TERMINAL_STATUSES = ['done', 'failed', 'cancelled'] as const;
export const UNKNOWN_OUTCOMES_LIMIT = { min: 1, max: 10_000, default: 100 } as const;

/** The accepted ranges of the counts the nodes take (Max Jobs, Limit, Concurrency Limit …). */
export const COUNT_LIMITS = {
	lease: LEASE_LIMIT,
	concurrency: CONCURRENCY_LIMIT,
	inFlight: { min: 1, max: 10_000 },
	triggerBatch: { min: 1, max: 10_000 },
	requeue: REQUEUE_LIMIT,
	additionalAttempts: REQUEUE_ADDITIONAL_ATTEMPTS,
	unknownOutcomes: UNKNOWN_OUTCOMES_LIMIT,
} as const;

/** The accepted ranges of the durations the nodes take in seconds, hours or days (ms). */
export const DURATION_LIMITS_MS = {
	delay: DELAY,
	lease: LEASE,
	triggerBackstop: TRIGGER_BACKSTOP,
	triggerPollInterval: TRIGGER_POLL_INTERVAL,
	backoffBase: BACKOFF_BASE,
	backoffMax: BACKOFF_MAX,
	claim: CLAIM,
	keyTtl: KEY_TTL,
	purgeOlderThan: PURGE_OLDER_THAN,
} as const;
