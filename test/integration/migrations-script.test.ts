/**
 * The script of `cli sql`, for DBAs who apply the migrations by hand: on a schema at any earlier
 * version it applies exactly the missing migrations, in order, and leaves the same catalog as
 * migrate(); it stops at the first that fails and never applies a later one without it; it
 * needs no CREATE on the database when the schema exists.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import pg from 'pg';

import { loadMigrations, migrate, migrationScript } from '../../src/core';
import {
	connectionConfig,
	databaseUrl,
	dropSchema,
	schemaAtMigration,
	testSchema,
	useTestSchema,
} from '../helpers/db';

const base = testSchema(__filename);
const names = {
	migrated: `${base}_migrated`,
	fresh: `${base}_fresh`,
	at10: `${base}_at10`,
	driver: `${base}_driver`,
	waits: `${base}_waits`,
	owned: `${base}_owned`,
	racing: `${base}_racing`,
};
const schemaOwner = `djt_script_owner_${process.pid}`;
const { pool } = useTestSchema(__filename, {
	otherSchemas: Object.values(names),
	cleanUp: async (admin) => {
		for (const name of Object.values(names)) await dropSchema(admin, name);
		const { rows } = await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [schemaOwner]);
		if (rows.length > 0) {
			await admin.query(`DROP OWNED BY "${schemaOwner}" CASCADE`);
			await admin.query(`DROP ROLE "${schemaOwner}"`);
		}
	},
});

const psql = spawnSync('psql', ['--version']).status === 0;
if (!psql) console.warn('migrations-script: psql is not installed; its tests are skipped');

const scriptDir = mkdtempSync(join(tmpdir(), 'djt-script-'));
afterAll(() => rmSync(scriptDir, { recursive: true, force: true }));

/** Runs `cli sql`'s script for `schema` with psql, as `user` (default: the URL's). */
async function runPsql(
	schema: string,
	options: { onErrorStop: boolean; user?: string },
): Promise<{ status: number | null; stderr: string }> {
	const file = join(scriptDir, `${schema}.sql`);
	writeFileSync(file, migrationScript(schema));
	const url = new URL(databaseUrl());
	if (options.user) url.username = options.user;
	const child = spawn(
		'psql',
		[
			url.toString(),
			'-X',
			'-q',
			...(options.onErrorStop ? ['-v', 'ON_ERROR_STOP=1'] : []),
			'-f',
			file,
		],
		{ stdio: ['ignore', 'ignore', 'pipe'] },
	);
	let stderr = '';
	child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
	const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
	return { status, stderr };
}

/**
 * Everything the migrations create in a schema, with the schema's name replaced, so that two
 * schemas can be compared: relations, columns, constraints, indexes, functions, triggers,
 * views, types, owners of nothing (all the test's role) and the recorded migrations.
 */
async function catalogOf(schema: string): Promise<Record<string, unknown[]>> {
	const queries: Record<string, string> = {
		relations: `SELECT c.relname, c.relkind, c.reloptions::text FROM pg_class c
			WHERE c.relnamespace = $1::regnamespace ORDER BY c.relname`,
		columns: `SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod) AS type,
				a.attnotnull, a.attidentity, pg_get_expr(d.adbin, d.adrelid) AS "default"
			FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
			LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
			WHERE c.relnamespace = $1::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
			ORDER BY c.relname, a.attnum`,
		constraints: `SELECT conname, contype, convalidated, pg_get_constraintdef(oid) AS definition
			FROM pg_constraint WHERE connamespace = $1::regnamespace ORDER BY conname, 4`,
		indexes: `SELECT c.relname, pg_get_indexdef(i.indexrelid) AS definition, i.indisvalid
			FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			WHERE c.relnamespace = $1::regnamespace ORDER BY c.relname`,
		functions: `SELECT p.proname, pg_get_functiondef(p.oid) AS definition
			FROM pg_proc p WHERE p.pronamespace = $1::regnamespace ORDER BY p.proname, 2`,
		triggers: `SELECT t.tgname, pg_get_triggerdef(t.oid) AS definition
			FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
			WHERE c.relnamespace = $1::regnamespace AND NOT t.tgisinternal ORDER BY t.tgname`,
		views: `SELECT c.relname, pg_get_viewdef(c.oid) AS definition
			FROM pg_class c WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'v' ORDER BY c.relname`,
		types: `SELECT t.typname, t.typtype, format_type(t.typbasetype, t.typtypmod) AS base, t.typnotnull
			FROM pg_type t WHERE t.typnamespace = $1::regnamespace ORDER BY t.typname`,
	};
	const catalog: Record<string, unknown[]> = {};
	for (const [part, query] of Object.entries(queries)) {
		const { rows } = await pool.query(query, [schema]);
		catalog[part] = JSON.parse(JSON.stringify(rows).replaceAll(schema, '<schema>'));
	}
	catalog.migrations = (
		await pool.query(`SELECT id, name FROM "${schema}".migrations ORDER BY id`)
	).rows;
	catalog.settings = (
		await pool.query(`SELECT name, length(value) AS bytes FROM "${schema}".settings ORDER BY name`)
	).rows;
	return catalog;
}

let migrated: Record<string, unknown[]>;

beforeAll(async () => {
	await migrate(pool, names.migrated);
	migrated = await catalogOf(names.migrated);
	expect(migrated.migrations).toHaveLength(loadMigrations().length);
	for (const [part, rows] of Object.entries(migrated)) expect(rows.length, part).toBeGreaterThan(0);
});

async function appliedIds(schema: string): Promise<number[]> {
	return (
		await pool.query<{ id: number }>(`SELECT id FROM "${schema}".migrations ORDER BY id`)
	).rows.map((row) => row.id);
}

(psql ? describe : describe.skip)('the script applied with psql -v ON_ERROR_STOP=1', () => {
	it('to a new schema: the catalog migrate() makes', async () => {
		expect(await runPsql(names.fresh, { onErrorStop: true })).toMatchObject({ status: 0 });
		expect(await catalogOf(names.fresh)).toEqual(migrated);
	});

	it('to a schema at 0010: applies 0011 onwards, and the catalog is the one migrate() makes', async () => {
		await schemaAtMigration(pool, names.at10, 10);
		await pool.query(
			`INSERT INTO "${names.at10}".jobs (id, queue, payload) VALUES (gen_random_uuid(), 'q', '{}')`,
		);
		const before = await pool.query(
			`SELECT applied_at FROM "${names.at10}".migrations ORDER BY id`,
		);
		expect(await runPsql(names.at10, { onErrorStop: true })).toMatchObject({ status: 0 });
		expect(await catalogOf(names.at10)).toEqual(migrated);
		// 0001-0010 were not applied again.
		const after = await pool.query(
			`SELECT applied_at FROM "${names.at10}".migrations WHERE id <= 10 ORDER BY id`,
		);
		expect(after.rows).toEqual(before.rows);
		// Applying it again changes nothing.
		expect(await runPsql(names.at10, { onErrorStop: true })).toMatchObject({ status: 0 });
		expect(await catalogOf(names.at10)).toEqual(migrated);
	});

	it('stops at a migration that fails (0016 waits for two running jobs of one key), and never applies 0017 or 0018 without it, with or without ON_ERROR_STOP', async () => {
		await schemaAtMigration(pool, names.waits, 14);
		await pool.query(
			`INSERT INTO "${names.waits}".jobs (id, queue, payload, status, attempts, attempt_id, lease_until, ordering_key)
			SELECT gen_random_uuid(), 'orders', '{}', 'running', 1, gen_random_uuid(), now() + interval '1 minute', 'customer-7'
			FROM generate_series(1, 2)`,
		);
		const stopped = await runPsql(names.waits, { onErrorStop: true });
		expect(stopped.status).toBe(3);
		expect(stopped.stderr).toContain('Migration 0016 waits: 2 jobs of queue "orders"');
		expect(await appliedIds(names.waits)).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));

		const goneOn = await runPsql(names.waits, { onErrorStop: false });
		expect(goneOn.stderr).toContain('Migration 0017_running_by_lease_end.sql is not applied');
		expect(goneOn.stderr).toContain(
			'Migration 0018_running_by_attempt_lease_end.sql is not applied',
		);
		expect(await appliedIds(names.waits)).toHaveLength(15);

		await pool.query(`UPDATE "${names.waits}".jobs SET ordering_key = NULL`);
		expect(await runPsql(names.waits, { onErrorStop: true })).toMatchObject({ status: 0 });
		expect(await appliedIds(names.waits)).toHaveLength(loadMigrations().length);
	});

	it('needs no CREATE on the database from the owner of an existing schema', async () => {
		const password = connectionConfig().password;
		await pool.query(`DROP ROLE IF EXISTS "${schemaOwner}"`);
		await pool.query(
			`CREATE ROLE "${schemaOwner}" LOGIN${password ? ` PASSWORD '${password.replace(/'/g, "''")}'` : ''}`,
		);
		await pool.query(`CREATE SCHEMA "${names.owned}" AUTHORIZATION "${schemaOwner}"`);
		const { rows } = await pool.query(
			`SELECT has_database_privilege($1, current_database(), 'CREATE') AS may_create`,
			[schemaOwner],
		);
		expect(rows[0].may_create).toBe(false);
		expect(await runPsql(names.owned, { onErrorStop: true, user: schemaOwner })).toMatchObject({
			status: 0,
		});
		expect(await catalogOf(names.owned)).toEqual(migrated);
	});

	it('run while migrate() runs on the same schema: each migration is applied once', async () => {
		const [script, result] = await Promise.all([
			runPsql(names.racing, { onErrorStop: true }),
			migrate(pool, names.racing),
		]);
		expect(script.status).toBe(0);
		expect(result.applied.length).toBeLessThanOrEqual(loadMigrations().length);
		expect(await catalogOf(names.racing)).toEqual(migrated);
	});
});

describe('the script sent through the driver (any client that runs a script)', () => {
	it('to a schema at 0010: the catalog migrate() makes', async () => {
		await schemaAtMigration(pool, names.driver, 10);
		const client = new pg.Client({ connectionString: databaseUrl() });
		await client.connect();
		try {
			await client.query(migrationScript(names.driver));
		} finally {
			await client.end();
		}
		expect(await catalogOf(names.driver)).toEqual(migrated);
	});
});
