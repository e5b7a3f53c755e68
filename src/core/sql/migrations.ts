import type { SqlQuery } from './types';

/** First key of the two-key advisory lock; the second is hashtext(schema). */
const MIGRATION_LOCK_NAMESPACE = 0x44_4a_4d; // "DJM"

/**
 * How long a migration's statement waits for a table lock before the migration stops (it is
 * tried again later). Without it, an ALTER that waits behind a long transaction (a pg_dump)
 * makes every lease and enqueue queue behind the ALTER's request.
 */
export const MIGRATION_LOCK_TIMEOUT_MS = 3_000;

/** Serialises migrators of one schema until the end of their transaction. */
export function migrationLockQuery(schema: string): SqlQuery {
	return {
		text: 'SELECT pg_advisory_xact_lock($1, hashtext($2))',
		values: [MIGRATION_LOCK_NAMESPACE, schema],
	};
}

/**
 * Bounds the migration's lock waits, until the end of its transaction. Set after the advisory
 * lock: a migrator queued behind another one's long migration keeps waiting for it.
 */
export function migrationLockTimeoutQuery(): SqlQuery {
	return { text: `SET LOCAL lock_timeout = '${MIGRATION_LOCK_TIMEOUT_MS / 1000}s'`, values: [] };
}

export function schemaExistsQuery(schema: string): SqlQuery {
	return {
		text: 'SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema_exists',
		values: [schema],
	};
}

/**
 * What the connected role lacks to apply migrations to the schema. A missing schema needs
 * CREATE on the database; an existing one CREATE on the schema (new tables, indexes) and the
 * rights of the owner (its own, or inherited) of each of the package's objects in it that
 * migrations alter or replace: `relations` (tables and views), `functions` and `domains` name
 * them. Objects of others in the same schema do not matter. Reads only.
 */
export function migrationRightsQuery(
	schema: string,
	objects: { relations: string[]; functions: string[]; domains: string[] },
): SqlQuery {
	return {
		text: `SELECT n.oid IS NULL AS schema_missing,
	CASE WHEN n.oid IS NULL THEN has_database_privilege(current_database(), 'CREATE')
		ELSE has_schema_privilege(n.oid, 'CREATE') END AS may_create,
	ARRAY(
		SELECT c.relname::text FROM pg_class c WHERE c.relnamespace = n.oid
			AND c.relname = ANY ($2::text[]) AND c.relkind IN ('r', 'p', 'v', 'm')
			AND NOT pg_has_role(c.relowner, 'USAGE')
		UNION ALL
		SELECT p.proname::text FROM pg_proc p WHERE p.pronamespace = n.oid
			AND p.proname = ANY ($3::text[]) AND NOT pg_has_role(p.proowner, 'USAGE')
		UNION ALL
		SELECT t.typname::text FROM pg_type t WHERE t.typnamespace = n.oid AND t.typtype = 'd'
			AND t.typname = ANY ($4::text[]) AND NOT pg_has_role(t.typowner, 'USAGE')
		ORDER BY 1
	) AS not_owned
FROM (VALUES ($1::text)) AS wanted (name)
LEFT JOIN pg_namespace n ON n.nspname = wanted.name`,
		values: [schema, objects.relations, objects.functions, objects.domains],
	};
}

export function createSchemaQuery(s: string): SqlQuery {
	return { text: `CREATE SCHEMA ${s}`, values: [] };
}

/** The columns of the migrations table as `name type`, in order (this package's, or another's). */
const COLUMNS_OF = (relation: string) =>
	`ARRAY(SELECT a.attname::text || ' ' || format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
		WHERE a.attrelid = to_regclass(${relation}) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum)`;

/** Whether the schema has a table named migrations, and its columns. */
export function migrationsTableQuery(s: string): SqlQuery {
	return {
		text: `SELECT to_regclass($1) IS NOT NULL AS present, ${COLUMNS_OF('$1')} AS columns`,
		values: [`${s}.migrations`],
	};
}

/** The columns of the table migrationsTableSql creates, as migrationsTableQuery reads them. */
export const MIGRATIONS_TABLE_COLUMNS: readonly string[] = [
	'id integer',
	'name text',
	'applied_at timestamp with time zone',
];

export function appliedMigrationsQuery(s: string): SqlQuery {
	return { text: `SELECT id, name FROM ${s}.migrations ORDER BY id`, values: [] };
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

/**
 * The oldest transaction (older than the migration lock timeout) that holds a lock on a table
 * or view of the schema: its process, application, age (null when the role may not see it) and
 * the relations it holds. What a migration that timed out on a lock most likely waited for.
 */
export function lockHolderQuery(schema: string): SqlQuery {
	return {
		text: `SELECT l.pid, a.application_name, floor(extract(epoch FROM now() - a.xact_start))::int AS seconds,
			array_agg(DISTINCT c.relname::text ORDER BY c.relname::text) AS relations
		FROM pg_locks l
		JOIN pg_class c ON c.oid = l.relation AND c.relkind IN ('r', 'p', 'v', 'm')
		LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'relation' AND l.granted AND l.pid <> pg_backend_pid()
			AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
			AND (a.xact_start IS NULL OR a.xact_start < now() - $2 * interval '1 millisecond')
		GROUP BY l.pid, a.application_name, a.xact_start
		ORDER BY a.xact_start NULLS LAST
		LIMIT 1`,
		values: [schema, MIGRATION_LOCK_TIMEOUT_MS],
	};
}

/** A SQL string literal (for the script, which cannot take parameters). */
function literal(text: string): string {
	return `'${text.replace(/'/g, "''")}'`;
}

/**
 * A dollar-quote tag that `body` does not contain, so the body can be quoted as it is.
 */
function dollarQuote(body: string, base: string): string {
	let tag = `$${base}$`;
	for (let n = 1; body.includes(tag); n++) tag = `$${base}_${n}$`;
	return `${tag}${body}${tag}`;
}

export interface ScriptMigration {
	id: number;
	name: string;
	renderedSql: string;
}

/** The comment the script starts with: what it does and how to apply it. */
export function scriptIntroduction(schema: string, shipped: readonly ScriptMigration[]): string {
	const last = shipped.length === 0 ? 'none' : shipped[shipped.length - 1].name;
	return [
		`-- n8n-nodes-durable-jobs: the migrations of schema "${schema}", up to ${last}.`,
		'-- Apply with psql -v ON_ERROR_STOP=1 -f <this file> (or any client that runs a script), as the',
		'-- owner of the schema (or, for a new schema, a role with CREATE on the database); not in one',
		'-- transaction (no psql -1). On a schema at any earlier version it applies exactly the missing',
		'-- migrations, in order, each in its own transaction under the lock the migrate command takes',
		`-- and with a lock timeout of ${MIGRATION_LOCK_TIMEOUT_MS / 1000} s; the first that fails stops those after it (run the`,
		'-- script again once its cause is fixed).',
	].join('\n');
}

/**
 * The head of the script for DBAs who apply the migrations by hand, in a transaction of its
 * own under the migration lock: creates the schema (only when it is missing: CREATE SCHEMA IF
 * NOT EXISTS would need CREATE on the database even when it exists) and the migrations table,
 * and stops when that table is another application's or names a migration otherwise than
 * this version does. It warns when the schema has migrations this version does not ship.
 */
export function scriptHeader(
	schema: string,
	s: string,
	shipped: readonly ScriptMigration[],
): string {
	const known = shipped.map((m) => `(${m.id}, ${literal(m.name)})`).join(', ');
	const last = shipped.length === 0 ? 0 : shipped[shipped.length - 1].id;
	const body = `
DECLARE
	columns text[];
	mismatch record;
	newer text;
BEGIN
	PERFORM pg_advisory_xact_lock(${MIGRATION_LOCK_NAMESPACE}, hashtext(${literal(schema)}));
	IF NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = ${literal(schema)}) THEN
		CREATE SCHEMA ${s};
	END IF;
	IF to_regclass(${literal(`${s}.migrations`)}) IS NULL THEN
		${migrationsTableSql(s).replace(/\n/g, '\n\t\t')}
	END IF;
	columns := ${COLUMNS_OF(literal(`${s}.migrations`))};
	IF columns <> ARRAY[${MIGRATIONS_TABLE_COLUMNS.map(literal).join(', ')}] THEN
		RAISE EXCEPTION 'Schema "%" holds a table "migrations" that is not Durable Jobs'' (its columns: %)', ${literal(schema)}, array_to_string(columns, ', ')
			USING HINT = 'Choose another schema: this one belongs to another application';
	END IF;
	SELECT m.id, m.name AS recorded, k.name AS shipped INTO mismatch
	FROM ${s}.migrations m LEFT JOIN (VALUES ${known}) AS k (id, name) ON k.id = m.id
	WHERE m.id <= ${last} AND m.name IS DISTINCT FROM k.name
	ORDER BY m.id LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'Schema "%" records migration % as "%", not "%": its migrations table is not Durable Jobs'' history', ${literal(schema)}, mismatch.id, mismatch.recorded, mismatch.shipped
			USING HINT = 'Choose another schema: this one belongs to another application, or its history was edited';
	END IF;
	SELECT string_agg(m.name, ', ' ORDER BY m.id) INTO newer FROM ${s}.migrations m WHERE m.id > ${last};
	IF newer IS NOT NULL THEN
		RAISE WARNING 'Schema "%" has migrations this version does not ship (%): a newer version migrated it', ${literal(schema)}, newer;
	END IF;
END
`;
	return `BEGIN;\nDO ${dollarQuote(body, 'durable_jobs_head')};\nCOMMIT;`;
}

/**
 * One migration of that script, in its own transaction under the migration lock and lock
 * timeout that migrate() takes: applied and recorded only when the schema lacks it and has
 * every migration before it (so, run on after an error, a later one never runs without an
 * earlier one).
 */
export function scriptMigration(schema: string, s: string, migration: ScriptMigration): string {
	const { id, name, renderedSql } = migration;
	const earlierApplied =
		id === 1
			? ''
			: `	IF (SELECT count(*) FROM ${s}.migrations WHERE id BETWEEN 1 AND ${id - 1}) < ${id - 1} THEN
		RAISE EXCEPTION 'Migration ${name} is not applied: schema "%" lacks an earlier migration (see the error above)', ${literal(schema)};
	END IF;
`;
	const body = `
BEGIN
	PERFORM pg_advisory_xact_lock(${MIGRATION_LOCK_NAMESPACE}, hashtext(${literal(schema)}));
	PERFORM set_config('lock_timeout', '${MIGRATION_LOCK_TIMEOUT_MS / 1000}s', true);
	IF EXISTS (SELECT 1 FROM ${s}.migrations WHERE id = ${id}) THEN
		RETURN;
	END IF;
${earlierApplied}	EXECUTE ${dollarQuote(renderedSql, `migration_${String(id).padStart(4, '0')}`)};
	INSERT INTO ${s}.migrations (id, name) VALUES (${id}, ${literal(name)});
END
`;
	return `-- ${name}\nBEGIN;\nDO ${dollarQuote(body, `apply_${String(id).padStart(4, '0')}`)};\nCOMMIT;`;
}
