import { migrateByHand } from './defaults';

/**
 * Errors the core raises. Every one carries a stable `code`, and bad input names the `field`
 * and the `fix`, so the n8n glue can turn it into a NodeOperationError without parsing text.
 */
export class DurableJobsError extends Error {
	readonly code: string;
	readonly field?: string;
	readonly fix?: string;
	/** HTTP status a receiver should answer with when this error reaches it. */
	readonly httpStatus: number;
	/** Position of the offending item in the batch, when a batch call threw for one item. */
	itemPosition?: number;

	constructor(
		code: string,
		message: string,
		options: { field?: string; fix?: string; httpStatus?: number; cause?: unknown } = {},
	) {
		super(message, options.cause === undefined ? undefined : { cause: options.cause });
		this.name = 'DurableJobsError';
		this.code = code;
		this.field = options.field;
		this.fix = options.fix;
		this.httpStatus = options.httpStatus ?? 500;
	}
}

export class ValidationError extends DurableJobsError {
	constructor(field: string, message: string, fix: string, httpStatus = 400) {
		super(httpStatus === 413 ? 'payload_too_large' : 'invalid_input', `${field}: ${message}`, {
			field,
			fix,
			httpStatus,
		});
		this.name = 'ValidationError';
	}
}

export class IdempotencyConflictError extends DurableJobsError {
	readonly existingJobId: string;
	constructor(key: string, existingJobId: string) {
		super(
			'idempotency_key_reused',
			`Idempotency key "${truncate(key, 80)}" was already used with a different payload`,
			{
				field: 'idempotencyKey',
				fix: 'Send the original payload again, or use a new idempotency key for a different request',
				httpStatus: 422,
			},
		);
		this.name = 'IdempotencyConflictError';
		this.existingJobId = existingJobId;
	}
}

/** An outbox event id already stored with another payload: two different events, one id. */
export class EventIdReusedError extends DurableJobsError {
	readonly existingJobId: string;
	constructor(eventId: string, existingJobId: string) {
		super(
			'event_id_reused',
			`Event id "${truncate(eventId, 80)}" is already in the outbox with a different payload`,
			{
				field: 'eventId',
				fix: 'Give each distinct event its own id (for an entity that changes, include what changed or when, e.g. its version or updated_at); a repeat of the same event must carry the same payload',
				httpStatus: 422,
			},
		);
		this.name = 'EventIdReusedError';
		this.existingJobId = existingJobId;
	}
}

export class DatabaseUnavailableError extends DurableJobsError {
	constructor(message: string, fix: string, cause?: unknown) {
		super('database_unavailable', message, { fix, httpStatus: 503, cause });
		this.name = 'DatabaseUnavailableError';
	}
}

export class MigrationsMissingError extends DurableJobsError {
	constructor(
		schema: string,
		missing: string[],
		/** Why they are missing and what to do, when it is not that Auto-Migrate is off. */
		explanation: { message?: string; fix?: string; cause?: unknown } = {},
	) {
		super(
			'migrations_missing',
			explanation.message ?? `Schema "${schema}" is missing migrations: ${missing.join(', ')}`,
			{
				field: 'autoMigrate',
				fix:
					explanation.fix ??
					`Turn on "Auto-Migrate" in the credential, or apply them by hand: ${migrateByHand(schema)}`,
				httpStatus: 503,
				cause: explanation.cause,
			},
		);
		this.name = 'MigrationsMissingError';
	}
}

/**
 * A migration stopped, applying nothing, because it has to wait: for running jobs (0016,
 * SQLSTATE DJ016), or for a lock another transaction kept longer than the migration's lock
 * timeout. It can be tried again later.
 */
export class MigrationWaitsError extends MigrationsMissingError {
	readonly migrationId: number;
	readonly migration: string;
	/** What it waits for, e.g. "Migration 0016 waits: 2 jobs of queue … are running at once". */
	readonly reason: string;
	/** What to do about it, when the migration says. */
	readonly hint: string | undefined;
	/** The migrations the same run applied before this one. */
	readonly applied: readonly string[];

	constructor(
		schema: string,
		migration: { id: number; name: string },
		reason: string,
		details: { hint?: string; applied: readonly string[]; cause?: unknown },
	) {
		super(schema, [migration.name], {
			message: `${reason} (schema "${schema}")`,
			fix: `${details.hint ? `${details.hint.replace(/\.?$/, '.')} ` : ''}Or apply it by hand once that is over: ${migrateByHand(schema)}`,
			cause: details.cause,
		});
		this.name = 'MigrationWaitsError';
		this.migrationId = migration.id;
		this.migration = migration.name;
		this.reason = reason;
		this.hint = details.hint;
		this.applied = details.applied;
	}
}

/**
 * Migrating failed because the role may not change the schema (SQLSTATE 42501: not the owner
 * of its tables, or no CREATE on the database for a new schema). Nothing of the migration it
 * tried was applied.
 */
export class MigrationNotPermittedError extends MigrationsMissingError {
	/** PostgreSQL's words, e.g. "must be owner of table jobs". */
	readonly refusal: string;

	constructor(schema: string, missing: string[], refusal: string, cause: unknown) {
		super(schema, missing, {
			message: `Schema "${schema}" is missing ${missing.length === 1 ? 'migration' : 'migrations'} ${missing.join(', ')}, and the role it connects as may not apply ${missing.length === 1 ? 'it' : 'them'} (PostgreSQL: ${refusal})`,
			fix: `Apply them as the owner of schema "${schema}" and its tables (or, for a new schema, a role with CREATE on the database): ${migrateByHand(schema)}; or make the credential's role the owner of the schema and its tables`,
			cause,
		});
		this.name = 'MigrationNotPermittedError';
		this.refusal = refusal;
	}
}

/**
 * The schema's `migrations` table is not this package's (another application's, such as n8n's
 * own, which has one in its schema), or records a migration under another name than this
 * package's file: its tables cannot be trusted to be the package's.
 */
export class MigrationHistoryError extends DurableJobsError {
	readonly schema: string;
	constructor(schema: string, what: string) {
		super(
			'migration_history_mismatch',
			`Schema "${schema}" is not a Durable Jobs schema: ${what}`,
			{
				field: 'schema',
				fix: 'Choose another Schema in the Durable Jobs Postgres credential (the default, durable_jobs, or another name no application uses): this one belongs to another application (n8n keeps a "migrations" table of its own in the schema of its database), or its migration history was edited',
				httpStatus: 503,
			},
		);
		this.name = 'MigrationHistoryError';
		this.schema = schema;
	}
}

export function truncate(text: string, max: number): string {
	return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/** SQLSTATE classes and node socket codes that mean "the database cannot be reached right now". */
const UNAVAILABLE_SQLSTATES = new Set([
	'57P01',
	'57P02',
	'57P03',
	'53300',
	'08000',
	'08001',
	'08003',
	'08004',
	'08006',
]);
const UNAVAILABLE_SOCKET_CODES = new Set([
	'ECONNREFUSED',
	'ECONNRESET',
	'ETIMEDOUT',
	'EHOSTUNREACH',
	'ENETUNREACH',
	'EPIPE',
	'EAI_AGAIN',
]);

interface PgLikeError {
	code?: string;
	message?: string;
}

function unreachable(code: string, message: string): boolean {
	return (
		UNAVAILABLE_SOCKET_CODES.has(code) ||
		UNAVAILABLE_SQLSTATES.has(code) ||
		/timeout exceeded when trying to connect|Connection terminated/i.test(message)
	);
}

/**
 * Whether connecting failed because the server asks for a password and none was given. `pg`
 * says so itself, before the server answers, in words about SCRAM
 * ("SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string", or "a non-empty
 * string" for an empty one), and without an SQLSTATE.
 */
export function isMissingPasswordError(error: unknown): boolean {
	const message = (error as PgLikeError | null)?.message;
	return (
		typeof message === 'string' && /client password must be a (non-empty )?string/.test(message)
	);
}

/** SQLSTATE a migration raises when it has to wait for running jobs (0016). */
export const MIGRATION_WAITS_STATE = 'DJ016';

/** The driver error itself, or the one an error made from it wraps as its cause. */
export function driverError(error: unknown): unknown {
	return (error as { cause?: unknown } | null)?.cause ?? error;
}

/** The SQLSTATE of a driver error, or of the driver error another error wraps. */
export function sqlState(error: unknown): string | undefined {
	const code = (driverError(error) as { code?: unknown } | null)?.code;
	return typeof code === 'string' ? code : undefined;
}

/**
 * Whether opening a store or migrating failed only because a migration waits (for a lock
 * another transaction holds, or for running jobs): a later try may pass, as after an outage.
 * The driver's own error (SQLSTATE DJ016) counts too, before it is made a MigrationWaitsError.
 */
export function isMigrationWaitError(error: unknown): boolean {
	return (
		error instanceof MigrationWaitsError ||
		(error instanceof MigrationsMissingError && error.cause instanceof MigrationWaitsError) ||
		sqlState(error) === MIGRATION_WAITS_STATE
	);
}

/** Codes of faults in the setup that no retry outlives until someone changes it. */
const SETUP_FAULT_CODES = new Set([
	'permission_denied',
	'migration_history_mismatch',
	'schema_incomplete',
]);

/**
 * Whether an error is a fault in the setup (credentials, privileges, the schema) that a retry of
 * the same request cannot get past, as opposed to an outage, a timeout or a conflict it can:
 * a receiver answers these with 500 instead of 503 with Retry-After, so that clients do not
 * retry a misconfiguration forever. Anything not known to be a setup fault counts as one a retry
 * may outlive (an unresolvable host name is one: a restarting container's name comes back).
 */
export function isSetupFault(error: DurableJobsError): boolean {
	if (SETUP_FAULT_CODES.has(error.code)) return true;
	if (error.code === 'migrations_missing') return !isMigrationWaitError(error);
	if (error.code === 'database_unavailable') {
		const problem = connectionProblem(error);
		return (
			problem === 'login_rejected' ||
			problem === 'password_missing' ||
			problem === 'database_missing'
		);
	}
	return false;
}

/**
 * Whether an error (a driver error, or the DurableJobsError made from one) means that the
 * database cannot be reached right now, which is worth waiting out, as opposed to a database
 * that answers and refuses (wrong password, unknown database, missing privileges).
 */
export function isUnreachableError(error: unknown): boolean {
	const cause = error instanceof DurableJobsError ? error.cause : error;
	if (typeof cause !== 'object' || cause === null) return false;
	const pgError = cause as PgLikeError;
	return unreachable(pgError.code ?? '', pgError.message ?? '');
}

/** Why connecting failed, in terms that do not depend on where the settings came from. */
export type ConnectionProblem =
	| 'password_missing'
	| 'login_rejected'
	| 'database_missing'
	| 'host_unknown'
	| 'unreachable';

/**
 * Which connection problem an error (a driver error, or the DurableJobsError made from one)
 * is, or null for one that is not about connecting. The credential's texts (below) and the
 * command line's (cli.ts) each name their own settings for it.
 */
export function connectionProblem(error: unknown): ConnectionProblem | null {
	const cause = error instanceof DurableJobsError ? error.cause : error;
	if (isMissingPasswordError(cause)) return 'password_missing';
	const pgError = (typeof cause === 'object' && cause !== null ? cause : {}) as PgLikeError;
	const code = pgError.code ?? '';
	if (code === '28P01' || code === '28000') return 'login_rejected';
	if (code === '3D000') return 'database_missing';
	if (code === 'ENOTFOUND') return 'host_unknown';
	if (unreachable(code, pgError.message ?? '')) return 'unreachable';
	return null;
}

/** Each connection problem in the words of the Durable Jobs Postgres credential. */
const CREDENTIAL_PROBLEMS: Readonly<Record<ConnectionProblem, { message: string; fix: string }>> = {
	password_missing: {
		message: 'PostgreSQL asks for a password, and the credential has none',
		fix: 'Fill in Password in the Durable Jobs Postgres credential',
	},
	login_rejected: {
		message: 'PostgreSQL rejected the user name or password',
		fix: 'Check User and Password in the Durable Jobs Postgres credential',
	},
	database_missing: {
		message: 'The database named in the credential does not exist',
		fix: 'Check Database in the credential, or create it (CREATE DATABASE …)',
	},
	host_unknown: {
		message: 'The database host name could not be resolved',
		fix: 'Check Host in the credential',
	},
	unreachable: {
		message: 'PostgreSQL is unreachable',
		fix: 'Check that PostgreSQL is running and that Host and Port in the credential are right; the next run retries',
	},
};

/** What an unreachable server's error said: its code, for the message. */
export function unreachableDetail(error: unknown): string {
	const cause = error instanceof DurableJobsError ? error.cause : error;
	return (cause as PgLikeError | null)?.code || 'connection lost';
}

/**
 * Turns a driver error into a DurableJobsError with an actionable message. Messages never echo
 * connection settings, so a password cannot leak through them.
 */
export function classifyDatabaseError(error: unknown): DurableJobsError {
	if (error instanceof DurableJobsError) return error;
	const pgError = (typeof error === 'object' && error !== null ? error : {}) as PgLikeError;
	const code = pgError.code ?? '';
	const message = pgError.message ?? String(error);
	const problem = connectionProblem(error);
	if (problem) {
		const texts = CREDENTIAL_PROBLEMS[problem];
		return new DatabaseUnavailableError(
			problem === 'unreachable' ? `${texts.message} (${unreachableDetail(error)})` : texts.message,
			texts.fix,
			error,
		);
	}
	if (code === '42501') {
		return new DurableJobsError('permission_denied', `PostgreSQL denied access: ${message}`, {
			fix: 'Grant the runtime role the privileges listed in the README (section "Database privileges")',
			cause: error,
		});
	}
	if (code === '54000' || code === '22P05' || code === '22021') {
		return new DurableJobsError('invalid_value', `PostgreSQL could not store a value: ${message}`, {
			fix: 'Remove NUL characters (\\u0000) and keep text fields within their limits',
			httpStatus: 400,
			cause: error,
		});
	}
	return new DurableJobsError('database_error', `Database error: ${message}`, {
		fix: 'See the PostgreSQL log for details',
		cause: error,
	});
}

/**
 * Runs `work` again when PostgreSQL aborted it as one side of a deadlock (at most `runs` times
 * in all). Only for work whose aborted run wrote nothing: one statement, or one transaction.
 * It waits a little first (50-250 ms, at random): the other side is still at work, and run at
 * once in the same crossed order the two would deadlock again.
 */
export async function runAgainAfterDeadlock<T>(work: () => Promise<T>, runs = 3): Promise<T> {
	for (let run = 1; ; run++) {
		try {
			return await work();
		} catch (error) {
			if (!isDeadlock(error) || run >= runs) throw error;
		}
		await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 200));
	}
}

/** PostgreSQL aborted the statement as one side of a deadlock (the error or its cause). */
export function isDeadlock(error: unknown): boolean {
	for (let link = error, depth = 0; link && depth < 5; depth++) {
		if ((link as { code?: unknown }).code === '40P01') return true;
		link = (link as { cause?: unknown }).cause;
	}
	return false;
}
