import type { SqlQuery } from './types';

/** First key of the two-key advisory lock; the second is hashtext(schema). */
const MIGRATION_LOCK_NAMESPACE = 0x44_4a_4d; // "DJM"

/** Serialises migrators of one schema until the end of their transaction. */
export function migrationLockQuery(schema: string): SqlQuery {
	return {
		text: 'SELECT pg_advisory_xact_lock($1, hashtext($2))',
		values: [MIGRATION_LOCK_NAMESPACE, schema],
	};
}

export function schemaExistsQuery(schema: string): SqlQuery {
	return {
		text: 'SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema_exists',
		values: [schema],
	};
}

export function createSchemaQuery(s: string): SqlQuery {
	return { text: `CREATE SCHEMA ${s}`, values: [] };
}

export function migrationsTableExistsQuery(s: string): SqlQuery {
	return {
		text: 'SELECT to_regclass($1) IS NOT NULL AS present',
		values: [`${s}.migrations`],
	};
}

export function appliedMigrationsQuery(s: string): SqlQuery {
	return { text: `SELECT id FROM ${s}.migrations ORDER BY id`, values: [] };
}

export function migrationsTableSql(s: string): string {
	return `CREATE TABLE IF NOT EXISTS ${s}.migrations (
	id integer PRIMARY KEY,
	name text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
);`;
}

export function createMigrationsTableQuery(s: string): SqlQuery {
	return { text: migrationsTableSql(s), values: [] };
}

/** A migration file's SQL (several statements: sent without parameters, as one simple query). */
export function migrationQuery(renderedSql: string): SqlQuery {
	return { text: renderedSql, values: [] };
}

export function recordMigrationQuery(s: string, id: number, name: string): SqlQuery {
	return { text: `INSERT INTO ${s}.migrations (id, name) VALUES ($1, $2)`, values: [id, name] };
}

/** The head of the script for DBAs who apply the migrations by hand. */
export function scriptHeader(s: string): string[] {
	return [`CREATE SCHEMA IF NOT EXISTS ${s};`, migrationsTableSql(s)];
}

/** One migration of that script, in its own transaction, recorded as applied. */
export function scriptMigration(s: string, id: number, name: string, renderedSql: string): string {
	return `-- ${name}\nBEGIN;\n${renderedSql}\nINSERT INTO ${s}.migrations (id, name) VALUES (${id}, '${name}');\nCOMMIT;`;
}
