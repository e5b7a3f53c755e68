import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
	DEFAULT_SCHEMA,
	MigrationsMissingError,
	ValidationError,
	assertMigrated,
	closeAllPools,
	loadMigrations,
	migrate,
	migrationScript,
	openStore,
	resetMigrationCache,
} from '../../src/core';
import { connectionConfig, databaseUrl, dropSchema, newPool, testSchema } from '../helpers/db';

let pool: pg.Pool;
const schema = testSchema(__filename);
const defaultDatabase = `djt_default_${process.pid}`;

beforeAll(async () => {
	pool = newPool(20);
	await dropSchema(pool, schema);
});

afterAll(async () => {
	await dropSchema(pool, schema);
	await dropSchema(pool, `${schema}_b`);
	await dropSchema(pool, `${schema}_c`);
	await pool
		.query(`DROP DATABASE IF EXISTS ${defaultDatabase} WITH (FORCE)`)
		.catch(() => undefined);
	await closeAllPools();
	await pool.end();
});

describe('migrations', () => {
	it('are numbered uniquely in increasing order and each one names its file', () => {
		const migrations = loadMigrations();
		expect(migrations.length).toBeGreaterThanOrEqual(2);
		const ids = migrations.map((migration) => migration.id);
		expect(ids).toEqual([...new Set(ids)].sort((a, b) => a - b));
		for (const migration of migrations)
			expect(migration.name.startsWith(String(migration.id).padStart(4, '0'))).toBe(true);
	});

	it('two concurrent runners both succeed and apply each file exactly once', async () => {
		const [a, b, c] = await Promise.all([
			migrate(pool, schema),
			migrate(pool, schema),
			migrate(newPool(2), schema),
		]);
		const appliedNames = [...a.applied, ...b.applied, ...c.applied].sort();
		expect(appliedNames).toEqual(
			loadMigrations()
				.map((migration) => migration.name)
				.sort(),
		);
		const { rows } = await pool.query(`SELECT id, name FROM "${schema}".migrations ORDER BY id`);
		expect(rows.map((row) => row.name)).toEqual(
			loadMigrations().map((migration) => migration.name),
		);
	});

	it('a second run is a no-op', async () => {
		const again = await migrate(pool, schema);
		expect(again.applied).toEqual([]);
		await expect(assertMigrated(pool, schema)).resolves.toBeUndefined();
	});

	it('with auto-migrate off, a missing schema is a clear error naming the command', async () => {
		resetMigrationCache();
		const config = { ...connectionConfig(), schema: `${schema}_b`, autoMigrate: false };
		const error = await openStore(config).catch((caught: unknown) => caught);
		expect(error).toBeInstanceOf(MigrationsMissingError);
		expect((error as MigrationsMissingError).message).toContain('0001_jobs.sql');
		expect((error as MigrationsMissingError).fix).toContain('npx n8n-nodes-durable-jobs migrate');
		const exists = await pool.query(
			`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1`,
			[`${schema}_b`],
		);
		expect(exists.rows[0].n).toBe(0);
	});

	it('with auto-migrate on (default), the first use migrates', async () => {
		const store = await openStore({ ...connectionConfig(), schema: `${schema}_c` });
		expect(store.schema).toBe(`${schema}_c`);
		const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${schema}_c".migrations`);
		expect(rows[0].n).toBe(loadMigrations().length);
	});

	it('the default schema name is durable_jobs and the hand-applied script creates the same schema', async () => {
		expect(DEFAULT_SCHEMA).toBe('durable_jobs');
		await pool.query(`CREATE DATABASE ${defaultDatabase}`);
		const url = new URL(databaseUrl());
		url.pathname = `/${defaultDatabase}`;
		const other = new pg.Pool({ connectionString: url.toString(), max: 2 });
		try {
			await other.query(migrationScript(DEFAULT_SCHEMA));
			await expect(assertMigrated(other, DEFAULT_SCHEMA)).resolves.toBeUndefined();
			expect((await migrate(other, DEFAULT_SCHEMA)).applied).toEqual([]);
		} finally {
			await other.end();
		}
	});

	it('invalid schema names are rejected before any SQL runs', async () => {
		const counter = { queries: 0 };
		const spy = new Proxy(pool, {
			get(target, property, receiver) {
				if (property === 'query' || property === 'connect') counter.queries++;
				return Reflect.get(target, property, receiver);
			},
		});
		for (const bad of [
			'bad"; DROP SCHEMA public; --',
			'Upper',
			'1abc',
			'',
			'x'.repeat(51),
			'pg_catalog',
			'public',
		]) {
			await expect(migrate(spy as pg.Pool, bad)).rejects.toBeInstanceOf(ValidationError);
		}
		expect(counter.queries).toBe(0);
	});
});
