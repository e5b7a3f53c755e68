import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type pg from 'pg';

import { MigrationsMissingError, classifyDatabaseError } from './errors';
import { notifyChannel, quoteIdentifier, validateSchemaName } from './identifiers';

export interface Migration {
	id: number;
	name: string;
	sql: string;
}

const MIGRATION_FILE = /^(\d{4})_[a-z0-9_]+\.sql$/;
/** First key of the two-key advisory lock; the second is hashtext(schema). */
const MIGRATION_LOCK_NAMESPACE = 0x44_4a_4d; // "DJM"

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
	// Numbers are unique and increasing; a gap is allowed because branches reserve numbers (one
	// may ship 0008 before the 0007 of another is merged). Pending files are applied in order.
	cachedMigrations.forEach((migration, index) => {
		const previous = cachedMigrations![index - 1];
		if (migration.id < 1 || (previous && migration.id <= previous.id)) {
			throw new Error(
				`Migration numbers must be unique and increasing: ${migration.name} follows ${previous?.name ?? 'nothing'}`,
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
	const parts = [`CREATE SCHEMA IF NOT EXISTS ${s};`, migrationsTableSql(s)];
	for (const migration of loadMigrations()) {
		parts.push(
			`-- ${migration.name}\nBEGIN;\n${renderMigration(migration, schema)}\nINSERT INTO ${s}.migrations (id, name) VALUES (${migration.id}, '${migration.name}');\nCOMMIT;`,
		);
	}
	return parts.join('\n\n') + '\n';
}

function migrationsTableSql(quotedSchema: string): string {
	return `CREATE TABLE IF NOT EXISTS ${quotedSchema}.migrations (
	id integer PRIMARY KEY,
	name text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
);`;
}

export async function appliedMigrationIds(
	client: pg.ClientBase,
	schema: string,
): Promise<number[] | null> {
	const exists = await client.query<{ present: boolean }>(
		`SELECT to_regclass($1) IS NOT NULL AS present`,
		[`${quoteIdentifier(schema)}.migrations`],
	);
	if (!exists.rows[0]?.present) return null;
	const rows = await client.query<{ id: number }>(
		`SELECT id FROM ${quoteIdentifier(schema)}.migrations ORDER BY id`,
	);
	return rows.rows.map((row) => row.id);
}

export interface MigrateResult {
	applied: string[];
}

/**
 * Applies pending migrations, each in its own transaction. Every transaction first takes a
 * transaction-scoped advisory lock for the schema, so concurrent migrators (several n8n
 * processes starting at once) queue up and each file is applied exactly once. Transaction
 * locks, unlike session locks, also work through PgBouncer in transaction mode.
 */
export async function migrate(pool: pg.Pool, schemaName: string): Promise<MigrateResult> {
	const schema = validateSchemaName(schemaName);
	const s = quoteIdentifier(schema);
	const migrations = loadMigrations();
	const applied: string[] = [];
	const client = await pool.connect().catch((error: unknown) => {
		throw classifyDatabaseError(error);
	});
	try {
		for (;;) {
			await client.query('BEGIN');
			try {
				await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [
					MIGRATION_LOCK_NAMESPACE,
					schema,
				]);
				// Only create what is missing: a migration role that owns a schema created by a DBA
				// needs no CREATE privilege on the database.
				const present = await client.query<{ schema_exists: boolean }>(
					'SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema_exists',
					[schema],
				);
				if (!present.rows[0]?.schema_exists) await client.query(`CREATE SCHEMA ${s}`);
				const appliedIds = await appliedMigrationIds(client, schema);
				if (appliedIds === null) await client.query(migrationsTableSql(s));
				const done = new Set(appliedIds ?? []);
				const next = migrations.find((migration) => !done.has(migration.id));
				if (!next) {
					await client.query('COMMIT');
					break;
				}
				await client.query(renderMigration(next, schema));
				await client.query(`INSERT INTO ${s}.migrations (id, name) VALUES ($1, $2)`, [
					next.id,
					next.name,
				]);
				await client.query('COMMIT');
				applied.push(next.name);
			} catch (error) {
				await client.query('ROLLBACK').catch(() => undefined);
				throw error;
			}
		}
	} catch (error) {
		throw classifyDatabaseError(error);
	} finally {
		client.release();
	}
	return { applied };
}

/** Throws MigrationsMissingError when the schema lacks any shipped migration. */
export async function assertMigrated(pool: pg.Pool, schemaName: string): Promise<void> {
	const schema = validateSchemaName(schemaName);
	const client = await pool.connect().catch((error: unknown) => {
		throw classifyDatabaseError(error);
	});
	try {
		const done = new Set((await appliedMigrationIds(client, schema)) ?? []);
		const missing = loadMigrations().filter((migration) => !done.has(migration.id));
		if (missing.length > 0)
			throw new MigrationsMissingError(
				schema,
				missing.map((m) => m.name),
			);
	} catch (error) {
		throw classifyDatabaseError(error);
	} finally {
		client.release();
	}
}
