import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type pg from 'pg';

import { migrateByHand } from './defaults';
import { MigrationsMissingError, runAgainAfterDeadlock } from './errors';
import { Executor, type Session } from './executor';
import { notifyChannel, quoteIdentifier, validateSchemaName } from './identifiers';
import {
	appliedMigrationsQuery,
	createMigrationsTableQuery,
	createSchemaQuery,
	migrationLockQuery,
	migrationQuery,
	migrationsTableExistsQuery,
	recordMigrationQuery,
	schemaExistsQuery,
	scriptHeader,
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

/** All migrations as one script, for DBAs who apply them by hand. */
export function migrationScript(schema: string): string {
	const s = quoteIdentifier(validateSchemaName(schema));
	const parts = scriptHeader(s);
	for (const migration of loadMigrations()) {
		parts.push(
			scriptMigration(s, migration.id, migration.name, renderMigration(migration, schema)),
		);
	}
	return parts.join('\n\n') + '\n';
}

/** Ids of the applied migrations, or null when the schema has no migrations table yet. */
async function readAppliedIds(db: Session, schema: string): Promise<number[] | null> {
	const s = quoteIdentifier(schema);
	const [exists] = await db.run<{ present: boolean }>(migrationsTableExistsQuery(s));
	if (!exists?.present) return null;
	const rows = await db.run<{ id: number }>(appliedMigrationsQuery(s));
	return rows.map((row) => row.id);
}

/** Ids of the migrations applied to a schema, or null when it has none. */
export async function appliedMigrationIds(pool: pg.Pool, schema: string): Promise<number[] | null> {
	return await readAppliedIds(new Executor(pool, false), validateSchemaName(schema));
}

/** The shipped migrations the schema lacks (all of them when it has no migrations table). */
export async function missingMigrations(db: Session, schema: string): Promise<Migration[]> {
	const done = new Set((await readAppliedIds(db, schema)) ?? []);
	return loadMigrations().filter((migration) => !done.has(migration.id));
}

export interface MigrateResult {
	applied: string[];
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
 * The warning for a schema that lacks deferrable migrations with Auto-Migrate off: what each
 * one's absence means and how to apply them.
 */
export function deferredMigrationsMessage(schema: string, pending: readonly Migration[]): string {
	const each = pending.map((migration) => {
		const without = WITHOUT_MIGRATION[migration.id];
		return without ? `${migration.name} (without it, ${without})` : migration.name;
	});
	const one = each.length === 1;
	return `Durable Jobs: schema "${schema}" lacks ${one ? 'migration' : 'migrations'} ${listed(each)}, and Auto-Migrate is off. The nodes work meanwhile, with ${one ? 'that limit' : 'those limits'}. Apply ${one ? 'it' : 'them'} with: ${migrateByHand(schema)}; or turn on "Auto-Migrate" in the credential`;
}

const MIGRATION_WAITS = 'DJ016';

/** Whether migrating stopped at a deferrable migration that waits for running jobs. */
export function migrationWaits(error: unknown): boolean {
	const cause = (error as { cause?: unknown } | null)?.cause ?? error;
	return (cause as { code?: unknown } | null)?.code === MIGRATION_WAITS;
}

/** Applies the first pending migration in a transaction of its own; null when none is left. */
async function applyNextMigration(
	db: Executor,
	schema: string,
	s: string,
): Promise<Migration | null> {
	return await db.transaction(async (tx) => {
		await tx.run(migrationLockQuery(schema));
		// Only create what is missing: a migration role that owns a schema created by a DBA
		// needs no CREATE privilege on the database.
		const [present] = await tx.run<{ schema_exists: boolean }>(schemaExistsQuery(schema));
		if (!present?.schema_exists) await tx.run(createSchemaQuery(s));
		const appliedIds = await readAppliedIds(tx, schema);
		if (appliedIds === null) await tx.run(createMigrationsTableQuery(s));
		const done = new Set(appliedIds ?? []);
		const pending = loadMigrations().find((migration) => !done.has(migration.id));
		if (!pending) return null;
		await tx.run(migrationQuery(renderMigration(pending, schema)));
		await tx.run(recordMigrationQuery(s, pending.id, pending.name));
		return pending;
	});
}

/**
 * Applies pending migrations, each in its own transaction. Every transaction first takes a
 * transaction-scoped advisory lock for the schema, so concurrent migrators (several n8n
 * processes starting at once) queue up and each file is applied exactly once. Transaction
 * locks, unlike session locks, also work through PgBouncer in transaction mode. A migration
 * that PostgreSQL aborts in a deadlock with a query runs again (MIGRATION_ATTEMPTS).
 */
export async function migrate(pool: pg.Pool, schemaName: string): Promise<MigrateResult> {
	const schema = validateSchemaName(schemaName);
	const s = quoteIdentifier(schema);
	const db = new Executor(pool, false);
	const applied: string[] = [];
	for (;;) {
		const next = await runAgainAfterDeadlock(
			async () => await applyNextMigration(db, schema, s),
			MIGRATION_ATTEMPTS,
		);
		if (!next) break;
		applied.push(next.name);
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
	const missing = await missingMigrations(new Executor(pool, false), schema);
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
