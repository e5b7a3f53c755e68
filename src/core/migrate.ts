import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type pg from 'pg';

import { migrateByHand } from './defaults';
import {
	driverError,
	MIGRATION_WAITS_STATE,
	MigrationHistoryError,
	MigrationNotPermittedError,
	MigrationsMissingError,
	MigrationWaitsError,
	runAgainAfterDeadlock,
	sqlState,
	truncate,
} from './errors';
import { Executor, type Session } from './executor';
import { notifyChannel, quoteIdentifier, validateSchemaName } from './identifiers';
import {
	MIGRATION_LOCK_TIMEOUT_MS,
	MIGRATIONS_TABLE_COLUMNS,
	appliedMigrationsQuery,
	createMigrationsTableQuery,
	createSchemaQuery,
	lockHolderQuery,
	migrationRightsQuery,
	migrationLockQuery,
	migrationLockTimeoutQuery,
	migrationQuery,
	migrationsTableQuery,
	recordMigrationQuery,
	schemaExistsQuery,
	scriptHeader,
	scriptIntroduction,
	scriptMigration,
} from './sql/migrations';

export interface Migration {
	id: number;
	name: string;
	sql: string;
}

const MIGRATION_FILE = /^(\d{4})_[a-z0-9_]+\.sql$/;

function findMigrationsDir(): string {
	let dir = __dirname;
	for (let depth = 0; depth < 6; depth++) {
		const candidate = join(dir, 'migrations');
		if (existsSync(join(candidate, '0001_jobs.sql'))) return candidate;
		dir = dirname(dir);
	}
	throw new Error(`The package's migrations folder was not found above ${__dirname}`);
}

let cachedMigrations: Migration[] | undefined;

/** The shipped migrations, in order, with the schema placeholders still in place. */
export function loadMigrations(): Migration[] {
	if (cachedMigrations) return cachedMigrations;
	const dir = findMigrationsDir();
	cachedMigrations = readdirSync(dir)
		.filter((file) => MIGRATION_FILE.test(file))
		.sort()
		.map((file) => ({
			id: Number(MIGRATION_FILE.exec(file)![1]),
			name: file,
			sql: readFileSync(join(dir, file), 'utf8'),
		}));
	cachedMigrations.forEach((migration, index) => {
		if (migration.id !== index + 1) {
			throw new Error(
				`Migrations must be numbered without gaps: found ${migration.name} at position ${index + 1}`,
			);
		}
	});
	return cachedMigrations;
}

export function renderMigration(migration: Migration, schema: string): string {
	validateSchemaName(schema);
	return migration.sql
		.replace(/\{\{schema\}\}/g, quoteIdentifier(schema))
		.replace(/\{\{channel\}\}/g, notifyChannel(schema));
}

/**
 * All migrations as one script, for DBAs who apply them by hand (psql -f, or any client that
 * runs a script): on a schema at any earlier version it applies exactly the missing ones, in
 * order, each in its own transaction under the lock migrate() takes, and stops at the first
 * that fails (see sql/migrations.ts).
 */
export function migrationScript(schemaName: string): string {
	const schema = validateSchemaName(schemaName);
	const s = quoteIdentifier(schema);
	const shipped = loadMigrations().map((migration) => ({
		id: migration.id,
		name: migration.name,
		renderedSql: renderMigration(migration, schema),
	}));
	const parts = [
		scriptIntroduction(schema, shipped),
		scriptHeader(schema, s, shipped),
		...shipped.map((migration) => scriptMigration(schema, s, migration)),
	];
	return parts.join('\n\n') + '\n';
}

/** A row of a schema's migrations table. */
export interface AppliedMigration {
	id: number;
	name: string;
}

/** What a schema has of the shipped migrations. */
export interface MigrationState {
	/** The shipped migrations it lacks, in order (all of them without a migrations table). */
	missing: Migration[];
	/** Migrations recorded in it that this version does not ship: a newer version's. */
	newer: AppliedMigration[];
}

/**
 * The schema's migration history, or null when it has no migrations table. Throws
 * MigrationHistoryError when the table is not this package's (another application's, e.g.
 * n8n's own in its schema) or records a shipped migration's id under another name.
 */
async function readHistory(db: Session, schema: string): Promise<AppliedMigration[] | null> {
	const s = quoteIdentifier(schema);
	const [table] = await db.run<{ present: boolean; columns: string[] }>(migrationsTableQuery(s));
	if (!table?.present) return null;
	if (table.columns.join(', ') !== MIGRATIONS_TABLE_COLUMNS.join(', '))
		throw new MigrationHistoryError(
			schema,
			`its table "migrations" has the columns ${truncate(table.columns.join(', '), 200)}, where Durable Jobs' has ${MIGRATIONS_TABLE_COLUMNS.join(', ')}`,
		);
	const history = await db.run<AppliedMigration>(appliedMigrationsQuery(s));
	const shipped = loadMigrations();
	for (const row of history) {
		if (row.id > shipped.length) continue;
		const file = shipped.find((migration) => migration.id === row.id);
		if (file?.name !== row.name)
			throw new MigrationHistoryError(
				schema,
				`its migrations table records migration ${row.id} as "${truncate(row.name, 80)}", where this package's is ${file ? `"${file.name}"` : 'none'}`,
			);
	}
	return history;
}

function stateOf(history: readonly AppliedMigration[] | null): MigrationState {
	const shipped = loadMigrations();
	const done = new Set((history ?? []).map((row) => row.id));
	return {
		missing: shipped.filter((migration) => !done.has(migration.id)),
		newer: (history ?? []).filter((row) => row.id > shipped.length),
	};
}

/** What the schema has of the shipped migrations; throws MigrationHistoryError (readHistory). */
export async function migrationState(db: Session, schema: string): Promise<MigrationState> {
	return stateOf(await readHistory(db, schema));
}

/** Ids of the migrations applied to a schema, or null when it has none. */
export async function appliedMigrationIds(pool: pg.Pool, schema: string): Promise<number[] | null> {
	const history = await readHistory(new Executor(pool, false), validateSchemaName(schema));
	return history && history.map((row) => row.id);
}

/** The shipped migrations the schema lacks (all of them when it has no migrations table). */
export async function missingMigrations(db: Session, schema: string): Promise<Migration[]> {
	return (await migrationState(db, schema)).missing;
}

/**
 * The tables, views, functions and domains the shipped migrations create or rename into the
 * schema, and the migrations table: the objects later migrations alter or replace.
 */
export function migrationObjects(): {
	relations: string[];
	functions: string[];
	domains: string[];
} {
	const relations = new Set<string>(['migrations']);
	const functions = new Set<string>();
	const domains = new Set<string>();
	const created =
		/CREATE\s+(?:OR\s+REPLACE\s+)?(TABLE|VIEW|FUNCTION|DOMAIN)\s+(?:IF\s+NOT\s+EXISTS\s+)?\{\{schema\}\}\.(\w+)/gi;
	const renamed = /ALTER\s+TABLE\s+\{\{schema\}\}\.\w+\s+RENAME\s+TO\s+(\w+)/gi;
	for (const migration of loadMigrations()) {
		for (const [, kind, name] of migration.sql.matchAll(created)) {
			const upper = kind.toUpperCase();
			(upper === 'FUNCTION' ? functions : upper === 'DOMAIN' ? domains : relations).add(name);
		}
		for (const [, name] of migration.sql.matchAll(renamed)) relations.add(name);
	}
	return { relations: [...relations], functions: [...functions], domains: [...domains] };
}

/** What the connected role lacks to apply migrations to the schema (empty: nothing). Reads only. */
export interface MigrationRights {
	schemaMissing: boolean;
	/** CREATE on the database (a missing schema) or on the schema. */
	mayCreate: boolean;
	/** The package's objects in the schema whose owner's rights the role does not have. */
	notOwned: string[];
}

export async function migrationRights(db: Session, schema: string): Promise<MigrationRights> {
	const [row] = await db.run<{ schema_missing: boolean; may_create: boolean; not_owned: string[] }>(
		migrationRightsQuery(schema, migrationObjects()),
	);
	return { schemaMissing: row.schema_missing, mayCreate: row.may_create, notOwned: row.not_owned };
}

/** Lists at most `max` names, quoted, then how many more. */
export function someOf(names: readonly string[], max = 5): string {
	const shown = names.slice(0, max).map((name) => `"${truncate(name, 80)}"`);
	return names.length > max ? `${shown.join(', ')} and ${names.length - max} more` : listed(shown);
}

/**
 * The warning for a schema migrated by a newer version of the package. An older instance keeps
 * working beside newer ones during a rolling upgrade (the README says, per migration, where
 * it does not), so this is no error.
 */
export function newerSchemaMessage(schema: string, newer: readonly AppliedMigration[]): string {
	return `Durable Jobs: schema "${schema}" was migrated by a newer version of n8n-nodes-durable-jobs: it has ${newer.length === 1 ? 'migration' : 'migrations'} ${someOf(newer.map((row) => row.name))}, which this version does not ship. This instance keeps using it; update the package here to the version of the other instances`;
}

export interface MigrateResult {
	applied: string[];
}

export interface MigrateOptions {
	/** Told when the schema has migrations this version does not ship (newerSchemaMessage). */
	onNewerSchema?: (message: string) => void;
}

/**
 * A migration that changes a table or a view takes its locks one object at a time, and a query
 * of n8n may take the same ones in another order: PostgreSQL then aborts one side with a
 * deadlock. The migration's transaction left nothing behind, so it runs again.
 */
const MIGRATION_ATTEMPTS = 5;

/**
 * Migrations the package works without, for a while: 0016 adds a unique index that backs a
 * check the lease makes anyway. It cannot be built while two jobs of one ordering key run (an
 * older version could leave such a pair), and then stops with this SQLSTATE; the package must
 * keep working meanwhile, or the pair could never finish. Every later migration waits with it,
 * so each must be one the package works without too. 0017 and 0018 only change an index's
 * columns (0018 also sets attempt_lease_until where a running job lacks it), and wait the same
 * way (DJ016) when another transaction keeps the jobs table for over 3 s.
 */
export const DEFERRABLE_MIGRATION_IDS: ReadonlySet<number> = new Set([16, 17, 18]);

/** What the package does without each deferrable migration (the warning that it is missing). */
const WITHOUT_MIGRATION: Readonly<Record<number, string>> = {
	16: 'two leases at the same moment can, rarely, start two jobs of one ordering key together',
	17: 'each lease reads every running job of its queue, slower with thousands running',
	18: 'once 0017 is applied, each heartbeat adds an entry to the indexes of jobs instead of being a HOT update',
};

/** "a", "a and b", "a, b and c". */
function listed(parts: readonly string[]): string {
	return parts.length <= 1
		? parts.join('')
		: `${parts.slice(0, -1).join(', ')} and ${parts[parts.length - 1]}`;
}

/**
 * The warning for a schema that lacks only deferrable migrations, and is not migrated: with
 * Auto-Migrate off, or (with `refusal`, PostgreSQL's words) because the credential's role may
 * not apply them. It says what each one's absence means and how to apply them.
 */
export function deferredMigrationsMessage(
	schema: string,
	pending: readonly Migration[],
	refusal?: string,
): string {
	const each = pending.map((migration) => {
		const without = WITHOUT_MIGRATION[migration.id];
		return without ? `${migration.name} (without it, ${without})` : migration.name;
	});
	const one = each.length === 1;
	const them = one ? 'it' : 'them';
	const lacks = `Durable Jobs: schema "${schema}" lacks ${one ? 'migration' : 'migrations'} ${listed(each)}`;
	const meanwhile = `The nodes work meanwhile, with ${one ? 'that limit' : 'those limits'}.`;
	if (refusal === undefined)
		return `${lacks}, and Auto-Migrate is off. ${meanwhile} Apply ${them} with: ${migrateByHand(schema)}; or turn on "Auto-Migrate" in the credential`;
	return `${lacks}, and the credential's role may not apply ${them} (PostgreSQL: ${refusal}). ${meanwhile} Apply ${them} as the owner of the schema's tables with: ${migrateByHand(schema)}; and turn off "Auto-Migrate" in the credential, so that each start of n8n does not try again`;
}

const LOCK_NOT_AVAILABLE = '55P03';
const INSUFFICIENT_PRIVILEGE = '42501';

/** "45 s", "12 min", "3 h". */
function age(seconds: number): string {
	if (seconds < 120) return `${seconds} s`;
	if (seconds < 2 * 3600) return `${Math.floor(seconds / 60)} min`;
	return `${Math.floor(seconds / 3600)} h`;
}

/**
 * What a migration whose lock wait timed out waited for, as far as the catalog tells after the
 * fact: the oldest transaction that holds a table of the schema.
 */
async function lockWaitReason(
	pool: pg.Pool,
	schema: string,
	migration: Migration,
): Promise<string> {
	const prefix = `Migration ${migration.name.slice(0, 4)} waits for a lock`;
	const holder = await new Executor(pool, false)
		.run<{
			pid: number;
			application_name: string | null;
			seconds: number | null;
			relations: string[];
		}>(lockHolderQuery(schema))
		.then(
			(rows) => rows[0],
			() => undefined,
		);
	if (!holder)
		return `${prefix} that another transaction kept on a table of the schema for more than ${MIGRATION_LOCK_TIMEOUT_MS / 1000} s`;
	const relations = holder.relations.slice(0, 3);
	if (holder.relations.length > 3) relations.push(`${holder.relations.length - 3} more`);
	const details = [
		holder.application_name ? `"${truncate(holder.application_name, 60)}"` : '',
		holder.seconds !== null ? `in a transaction for ${age(holder.seconds)}` : '',
	].filter(Boolean);
	const who = `process ${holder.pid}${details.length > 0 ? ` (${details.join(', ')})` : ''}`;
	return `${prefix} on ${listed(relations)}, held by ${who}`;
}

interface Step {
	/** The migration applied, or null when none was missing. */
	applied: Migration | null;
	newer: AppliedMigration[];
}

/**
 * Applies the first pending migration in a transaction of its own. `willApply` learns what the
 * schema lacks before anything is changed, so that a failure can name it.
 */
async function applyNextMigration(
	db: Executor,
	schema: string,
	s: string,
	willApply: (missing: Migration[]) => void,
): Promise<Step> {
	return await db.transaction(async (tx) => {
		await tx.run(migrationLockQuery(schema));
		await tx.run(migrationLockTimeoutQuery());
		// Only create what is missing: a migration role that owns a schema created by a DBA
		// needs no CREATE privilege on the database.
		const [present] = await tx.run<{ schema_exists: boolean }>(schemaExistsQuery(schema));
		if (!present?.schema_exists) {
			willApply(loadMigrations());
			await tx.run(createSchemaQuery(s));
		}
		const history = await readHistory(tx, schema);
		const state = stateOf(history);
		willApply(state.missing);
		if (history === null) await tx.run(createMigrationsTableQuery(s));
		const pending = state.missing[0];
		if (!pending) return { applied: null, newer: state.newer };
		await tx.run(migrationQuery(renderMigration(pending, schema)));
		await tx.run(recordMigrationQuery(s, pending.id, pending.name));
		return { applied: pending, newer: state.newer };
	});
}

/**
 * The error for a migration that failed: one that waits (for running jobs, SQLSTATE DJ016, or
 * for a lock, past the lock timeout) or that the role may not apply gets an error of its own;
 * any other is the database's.
 */
async function migrationFailure(
	pool: pg.Pool,
	schema: string,
	missing: readonly Migration[],
	applied: readonly string[],
	error: unknown,
): Promise<unknown> {
	const migration = missing[0];
	if (!migration) return error;
	const state = sqlState(error);
	const cause = driverError(error) as {
		message?: unknown;
		hint?: unknown;
	};
	if (state === MIGRATION_WAITS_STATE)
		return new MigrationWaitsError(schema, migration, String(cause.message).replace(/\.$/, ''), {
			hint: typeof cause.hint === 'string' && cause.hint ? cause.hint : undefined,
			applied,
			cause: error,
		});
	if (state === LOCK_NOT_AVAILABLE)
		return new MigrationWaitsError(
			schema,
			migration,
			await lockWaitReason(pool, schema, migration),
			{
				hint: 'It is applied once that transaction has ended',
				applied,
				cause: error,
			},
		);
	if (state === INSUFFICIENT_PRIVILEGE)
		return new MigrationNotPermittedError(
			schema,
			missing.map((m) => m.name),
			String(cause.message),
			error,
		);
	return error;
}

/**
 * Applies pending migrations, each in its own transaction. Every transaction first takes a
 * transaction-scoped advisory lock for the schema, so concurrent migrators (several n8n
 * processes starting at once) queue up and each file is applied exactly once. Transaction
 * locks, unlike session locks, also work through PgBouncer in transaction mode. A migration
 * that PostgreSQL aborts in a deadlock with a query runs again (MIGRATION_ATTEMPTS); one that
 * waits for a lock longer than MIGRATION_LOCK_TIMEOUT_MS stops with MigrationWaitsError, as
 * one that waits for running jobs does, and one the role may not apply with
 * MigrationNotPermittedError.
 */
export async function migrate(
	pool: pg.Pool,
	schemaName: string,
	options: MigrateOptions = {},
): Promise<MigrateResult> {
	const schema = validateSchemaName(schemaName);
	const s = quoteIdentifier(schema);
	const db = new Executor(pool, false);
	const applied: string[] = [];
	for (;;) {
		let missing: Migration[] = [];
		let step: Step;
		try {
			step = await runAgainAfterDeadlock(
				async () =>
					await applyNextMigration(db, schema, s, (pending) => {
						missing = pending;
					}),
				MIGRATION_ATTEMPTS,
			);
		} catch (error) {
			throw await migrationFailure(pool, schema, missing, applied, error);
		}
		if (!step.applied) {
			if (step.newer.length > 0) options.onNewerSchema?.(newerSchemaMessage(schema, step.newer));
			break;
		}
		applied.push(step.applied.name);
	}
	return { applied };
}

/**
 * Throws MigrationsMissingError when the schema lacks any shipped migration (with
 * `allowDeferrable`, any but those the package works without). Returns the deferrable ones it
 * lacks (none without `allowDeferrable`).
 */
export async function assertMigrated(
	pool: pg.Pool,
	schemaName: string,
	options: { allowDeferrable?: boolean } = {},
): Promise<Migration[]> {
	const schema = validateSchemaName(schemaName);
	const { missing } = await migrationState(new Executor(pool, false), schema);
	return requireMigrations(schema, missing, options);
}

/**
 * Throws MigrationsMissingError when `missing` holds a migration the package needs (with
 * `allowDeferrable`, one it cannot work without); returns `missing` otherwise.
 */
export function requireMigrations(
	schema: string,
	missing: Migration[],
	options: { allowDeferrable?: boolean } = {},
): Migration[] {
	const required = missing.filter(
		(migration) => !options.allowDeferrable || !DEFERRABLE_MIGRATION_IDS.has(migration.id),
	);
	if (required.length > 0)
		throw new MigrationsMissingError(
			schema,
			required.map((m) => m.name),
		);
	return missing;
}
