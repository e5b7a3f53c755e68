import type pg from 'pg';

import { MigrationsMissingError } from './errors';
import { assertMigrated, deferredMigrationsMessage, migrate, migrationWaits } from './migrate';
import { DEFAULT_SCHEMA, validateSchemaName } from './identifiers';
import { getPool, poolKey, type ConnectionConfig } from './pool';
import { JobStore, type StoreOptions } from './store';

export interface StoreConfig extends ConnectionConfig {
	schema?: string;
	/** Apply missing migrations on first use (default). Off: a missing schema is an error. */
	autoMigrate?: boolean;
	/**
	 * Named prepared statements for the frequent statements (default true). Turn off behind
	 * PgBouncer in transaction mode (before 1.21, or without max_prepared_statements).
	 */
	preparedStatements?: boolean;
	/** StoreOptions.durableLeases (default false). */
	durableLeases?: boolean;
}

/** How long a store opens without a migration that waits for running jobs before it tries again. */
const DEFERRED_MIGRATION_RETRY_MS = 30_000;

/**
 * A migration can wait for hours (a long job of the pair 0016 waits for): it is reported when it
 * starts to wait, then at most this often, not on every try.
 */
const WAIT_REPORT_INTERVAL_MS = 5 * 60_000;

/**
 * The last report of a migration that waits, per pool and schema: when, and what it said. Kept
 * by resetMigrationCache: a migration still waiting for the same reason is not reported again.
 */
const waitReports = new Map<string, { at: number; message: string }>();

/** Schemas known to be migrated, per pool; the check runs once per process and schema. */
const readySchemas = new Map<string, Promise<void>>();

/** What the process running the store is told about (n8n's log, in the nodes). */
export interface StoreEvents {
	/** An idle connection of the pool failed and was discarded. */
	onPoolError?: (error: Error) => void;
	/**
	 * The schema lacks migrations the package works without (DEFERRABLE_MIGRATION_IDS), and
	 * why: Auto-Migrate is off (told once per process), or one waits (told when it starts to
	 * wait or waits for another reason, then at most every WAIT_REPORT_INTERVAL_MS while the
	 * store is opened).
	 */
	onMigrationsPending?: (message: string) => void;
}

/**
 * The store for a connection config: a cached pool, and migrations applied (or checked, with
 * auto-migrate off) once per process. A failed check is forgotten so the next call tries again.
 */
export async function openStore(
	config: StoreConfig,
	options: Omit<StoreOptions, 'schema'> = {},
	events: StoreEvents = {},
): Promise<JobStore> {
	const schema = validateSchemaName(config.schema || DEFAULT_SCHEMA);
	const pool = getPool(config, events.onPoolError);
	const readyKey = `${poolKey(config)}:${schema}:${config.autoMigrate === false ? 'check' : 'migrate'}`;
	let ready = readySchemas.get(readyKey);
	if (!ready) {
		ready =
			config.autoMigrate === false
				? checkMigrated(pool, schema, events)
				: migrateIfMissing(pool, schema, readyKey, events);
		readySchemas.set(readyKey, ready);
		ready.catch(() => readySchemas.delete(readyKey));
	}
	await ready;
	return new JobStore(pool, {
		...options,
		schema,
		preparedStatements: config.preparedStatements ?? options.preparedStatements,
		durableLeases: config.durableLeases ?? options.durableLeases,
	});
}

/** Auto-Migrate off: every migration must be there, except those the package works without. */
async function checkMigrated(pool: pg.Pool, schema: string, events: StoreEvents): Promise<void> {
	const pending = await assertMigrated(pool, schema, { allowDeferrable: true });
	if (pending.length > 0)
		tell(events.onMigrationsPending, deferredMigrationsMessage(schema, pending));
}

/**
 * Auto-Migrate on: an up-to-date schema is only read (a runtime role without DDL privileges can
 * use it); migrations run only when something is missing. A migration the package works
 * without that waits for running jobs (see DEFERRABLE_MIGRATION_IDS) lets the store open, and a
 * use after DEFERRED_MIGRATION_RETRY_MS migrates again.
 */
async function migrateIfMissing(
	pool: pg.Pool,
	schema: string,
	readyKey: string,
	events: StoreEvents,
): Promise<void> {
	try {
		await assertMigrated(pool, schema);
	} catch (error) {
		if (!(error instanceof MigrationsMissingError)) throw error;
		try {
			await migrate(pool, schema);
		} catch (migrationError) {
			if (!migrationWaits(migrationError)) throw migrationError;
			setTimeout(() => readySchemas.delete(readyKey), DEFERRED_MIGRATION_RETRY_MS).unref();
			reportWait(readyKey, migrationWaitsMessage(schema, migrationError), events);
			return;
		}
	}
	waitReports.delete(readyKey);
}

/**
 * Reports a migration that waits when it starts to wait, when it waits for another reason, and
 * otherwise at most every WAIT_REPORT_INTERVAL_MS.
 */
function reportWait(readyKey: string, message: string, events: StoreEvents): void {
	const last = waitReports.get(readyKey);
	const now = performance.now();
	if (last !== undefined && last.message === message && now - last.at < WAIT_REPORT_INTERVAL_MS)
		return;
	waitReports.set(readyKey, { at: now, message });
	tell(events.onMigrationsPending, message);
}

/** Reporting must not fail the open: a listener that throws is ignored. */
function tell(listener: ((message: string) => void) | undefined, message: string): void {
	try {
		listener?.(message);
	} catch {
		// The warning is lost; the store still opens.
	}
}

function migrationWaitsMessage(schema: string, error: unknown): string {
	const cause = ((error as { cause?: unknown } | null)?.cause ?? error) as {
		message?: unknown;
		hint?: unknown;
	} | null;
	const reason = String(cause?.message ?? cause).replace(/\.$/, '');
	const hint =
		typeof cause?.hint === 'string' && cause.hint ? ` ${cause.hint.replace(/\.?$/, '.')}` : '';
	return `Durable Jobs: ${reason} (schema "${schema}").${hint} The nodes work without it meanwhile; a use after ${DEFERRED_MIGRATION_RETRY_MS / 1000} s tries again (this warning repeats at most every ${WAIT_REPORT_INTERVAL_MS / 60_000} minutes while it waits)`;
}

/** Forget which schemas were migrated (tests that drop schemas). */
export function resetMigrationCache(): void {
	readySchemas.clear();
}
