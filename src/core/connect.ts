import type pg from 'pg';

import { MigrationNotPermittedError, MigrationsMissingError, MigrationWaitsError } from './errors';
import { Executor } from './executor';
import {
	DEFERRABLE_MIGRATION_IDS,
	deferredMigrationsMessage,
	migrate,
	migrationState,
	newerSchemaMessage,
	requireMigrations,
	type Migration,
} from './migrate';
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

/**
 * When a use tries again after a migration waited (for running jobs, or for a lock): the delay
 * doubles with each wait in a row, from `first` up to `max`, so a long wait (a pg_dump that
 * holds jobs for an hour) is not tried on every node call. Without a deferrable migration the
 * store opens meanwhile; without one it needs, it fails until the next try.
 */
const DEFERRED_MIGRATION_RETRY_MS = { first: 30_000, max: 5 * 60_000 };
const REQUIRED_MIGRATION_RETRY_MS = { first: 5_000, max: 60_000 };

/**
 * A migration can wait for hours (a long job of the pair 0016 waits for): it is reported when it
 * starts to wait, then at most this often, not on every try.
 */
const WAIT_REPORT_INTERVAL_MS = 5 * 60_000;

/**
 * The last report of a migration that waits, per pool and schema: when, and why it waited. Kept
 * by resetMigrationCache: a migration still waiting for the same reason is not reported again.
 */
const waitReports = new Map<string, { at: number; reason: string }>();

/**
 * Waits in a row per pool, schema and kind of migration waited for, for the retry delay; kept
 * by resetMigrationCache.
 */
const waitsInARow = new Map<string, number>();

/**
 * Waits for a migration the nodes need are counted apart from waits for one they work without:
 * neither may lengthen the other's first delay.
 */
function waitsKey(readyKey: string, kind: 'required' | 'deferrable'): string {
	return `${readyKey}:${kind}`;
}

/** How long a failed open is kept before a use tries again (none: the next use does). */
const retryAfterMs = new WeakMap<object, number>();

/** Schemas known to be migrated, per pool; the check runs once per process and schema. */
const readySchemas = new Map<string, Promise<void>>();

/** What the process running the store is told about (n8n's log, in the nodes). */
export interface StoreEvents {
	/** An idle connection of the pool failed and was discarded. */
	onPoolError?: (error: Error) => void;
	/**
	 * The schema lacks migrations the package works without (DEFERRABLE_MIGRATION_IDS), and
	 * why: Auto-Migrate is off, or the credential's role may not apply them (told once per
	 * process), or one waits (told when it starts to wait or waits for another reason, then at
	 * most every WAIT_REPORT_INTERVAL_MS while the store is opened). Also a schema migrated by a
	 * newer version of the package (told once per process).
	 */
	onMigrationsPending?: (message: string) => void;
}

/**
 * The store for a connection config: a cached pool, and migrations applied (or checked, with
 * auto-migrate off) once per process. A failed check is forgotten so the next call tries again
 * (after a migration that waits, the next call after the retry delay).
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
		const checking =
			config.autoMigrate === false
				? checkMigrated(pool, schema, events)
				: migrateIfMissing(pool, schema, readyKey, events);
		ready = checking;
		readySchemas.set(readyKey, checking);
		checking.catch((error: unknown) =>
			forgetLater(readyKey, checking, (error !== null && retryAfterMs.get(error as object)) || 0),
		);
	}
	await ready;
	return new JobStore(pool, {
		...options,
		schema,
		preparedStatements: config.preparedStatements ?? options.preparedStatements,
		durableLeases: config.durableLeases ?? options.durableLeases,
	});
}

/** Forgets a check after `delayMs` (at once for 0), so that a later use checks again. */
function forgetLater(readyKey: string, ready: Promise<void>, delayMs: number): void {
	const forget = () => {
		if (readySchemas.get(readyKey) === ready) readySchemas.delete(readyKey);
	};
	if (delayMs <= 0) forget();
	else setTimeout(forget, delayMs).unref();
}

/** Auto-Migrate off: every migration must be there, except those the package works without. */
async function checkMigrated(pool: pg.Pool, schema: string, events: StoreEvents): Promise<void> {
	const state = await migrationState(new Executor(pool, false), schema);
	const pending = requireMigrations(schema, state.missing, { allowDeferrable: true });
	if (state.newer.length > 0)
		tell(events.onMigrationsPending, newerSchemaMessage(schema, state.newer));
	if (pending.length > 0)
		tell(events.onMigrationsPending, deferredMigrationsMessage(schema, pending));
}

/**
 * Auto-Migrate on: an up-to-date schema is only read (a runtime role without DDL privileges can
 * use it); migrations run only when something is missing. When they cannot run now (one waits,
 * see DEFERRABLE_MIGRATION_IDS, or the role may not apply them), the store opens if the
 * package can work without every migration still missing (migrationStopped).
 */
async function migrateIfMissing(
	pool: pg.Pool,
	schema: string,
	readyKey: string,
	events: StoreEvents,
): Promise<void> {
	const state = await migrationState(new Executor(pool, false), schema);
	if (state.newer.length > 0)
		tell(events.onMigrationsPending, newerSchemaMessage(schema, state.newer));
	if (state.missing.length > 0) {
		try {
			await migrate(pool, schema);
		} catch (error) {
			await migrationStopped(pool, schema, readyKey, error, events);
			return;
		}
	}
	waitReports.delete(readyKey);
	waitsInARow.delete(waitsKey(readyKey, 'required'));
	waitsInARow.delete(waitsKey(readyKey, 'deferrable'));
}

/**
 * Migrating stopped. The store opens, with a warning, when every migration still missing is one
 * the package works without and migrating stopped because one waits (a use after the retry
 * delay tries again) or because the role may not apply them (not tried again in this
 * process). Otherwise it fails: with MigrationNotPermittedError, whose fix is to migrate as the
 * schema's owner, or, while one it needs waits, until a use after the retry delay.
 */
async function migrationStopped(
	pool: pg.Pool,
	schema: string,
	readyKey: string,
	error: unknown,
	events: StoreEvents,
): Promise<void> {
	if (!(error instanceof MigrationWaitsError) && !(error instanceof MigrationNotPermittedError))
		throw error;
	const { missing } = await migrationState(new Executor(pool, false), schema);
	const required = missing.filter((migration) => !DEFERRABLE_MIGRATION_IDS.has(migration.id));
	if (error instanceof MigrationNotPermittedError) {
		if (required.length > 0) throw error;
		tell(events.onMigrationsPending, deferredMigrationsMessage(schema, missing, error.refusal));
		return;
	}
	const waitKey = waitsKey(readyKey, required.length > 0 ? 'required' : 'deferrable');
	const waits = (waitsInARow.get(waitKey) ?? 0) + 1;
	waitsInARow.set(waitKey, waits);
	const retry = required.length > 0 ? REQUIRED_MIGRATION_RETRY_MS : DEFERRED_MIGRATION_RETRY_MS;
	const delayMs = Math.min(retry.first * 2 ** (waits - 1), retry.max);
	if (required.length > 0) throw requiredMigrationWaits(schema, required, error, delayMs);
	forgetLater(readyKey, readySchemas.get(readyKey) ?? Promise.resolve(), delayMs);
	reportWait(readyKey, error, delayMs, events);
}

/** The error of a store that cannot open while a migration it needs waits. */
function requiredMigrationWaits(
	schema: string,
	required: readonly Migration[],
	waiting: MigrationWaitsError,
	delayMs: number,
): MigrationsMissingError {
	const error = new MigrationsMissingError(
		schema,
		required.map((migration) => migration.name),
		{
			message: `${waiting.reason} (schema "${schema}"), and will be retried on a use after ${delayMs / 1000} s: the nodes cannot work without it`,
			fix: waiting.fix,
			cause: waiting,
		},
	);
	retryAfterMs.set(error, delayMs);
	return error;
}

/**
 * Reports a migration that waits when it starts to wait, when it waits for another reason, and
 * otherwise at most every WAIT_REPORT_INTERVAL_MS.
 */
function reportWait(
	readyKey: string,
	waiting: MigrationWaitsError,
	delayMs: number,
	events: StoreEvents,
): void {
	const last = waitReports.get(readyKey);
	const now = performance.now();
	if (
		last !== undefined &&
		last.reason === waiting.reason &&
		now - last.at < WAIT_REPORT_INTERVAL_MS
	)
		return;
	waitReports.set(readyKey, { at: now, reason: waiting.reason });
	tell(events.onMigrationsPending, migrationWaitsMessage(waiting, delayMs));
}

/** Reporting must not fail the open: a listener that throws is ignored. */
function tell(listener: ((message: string) => void) | undefined, message: string): void {
	try {
		listener?.(message);
	} catch {
		// The warning is lost; the store still opens.
	}
}

function migrationWaitsMessage(waiting: MigrationWaitsError, delayMs: number): string {
	const hint = waiting.hint ? ` ${waiting.hint.replace(/\.?$/, '.')}` : '';
	return `Durable Jobs: ${waiting.message}.${hint} The nodes work without it meanwhile; a use after ${delayMs / 1000} s tries again (this warning repeats at most every ${WAIT_REPORT_INTERVAL_MS / 60_000} minutes while it waits)`;
}

/** Forget which schemas were migrated (tests that drop schemas). */
export function resetMigrationCache(): void {
	readySchemas.clear();
}
