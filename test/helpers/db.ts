import { createHash } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

import { DurableJobsError, JobStore, migrate, type ConnectionConfig } from '../../src/core';

export function databaseUrl(): string {
	return inject('databaseUrl');
}

export function connectionConfig(
	url = databaseUrl(),
	overrides: Partial<ConnectionConfig> = {},
): ConnectionConfig {
	const parsed = new URL(url);
	return {
		host: parsed.hostname,
		port: Number(parsed.port || 5432),
		database: decodeURIComponent(parsed.pathname.slice(1) || 'postgres'),
		user: decodeURIComponent(parsed.username || process.env.USER || 'postgres'),
		password: decodeURIComponent(parsed.password) || undefined,
		maxConnections: 20,
		...overrides,
	};
}

/** A schema name unique to one test file (and an optional suffix), never the default. */
export function testSchema(file: string, suffix = ''): string {
	const hash = createHash('sha1')
		.update(file + suffix)
		.digest('hex')
		.slice(0, 10);
	return `djt_${hash}`;
}

export function newPool(max = 20): pg.Pool {
	const pool = new pg.Pool({ connectionString: databaseUrl(), max });
	pool.on('error', () => undefined);
	return pool;
}

export async function dropSchema(pool: pg.Pool, schema: string): Promise<void> {
	await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}

/** A fresh, migrated schema and a store over it. */
export async function freshStore(
	pool: pg.Pool,
	schema: string,
	options: { maxPayloadBytes?: number } = {},
): Promise<JobStore> {
	await dropSchema(pool, schema);
	await migrate(pool, schema);
	return new JobStore(pool, { schema, ...options });
}

export async function tableSnapshot(
	pool: pg.Pool,
	schema: string,
): Promise<Record<string, unknown[]>> {
	const snapshot: Record<string, unknown[]> = {};
	for (const table of [
		'jobs',
		'job_attempts',
		'idempotency_keys',
		'entity_versions',
		'job_counts',
	]) {
		const result = await pool.query(`SELECT * FROM "${schema}".${table} ORDER BY 1, 2`);
		snapshot[table] = result.rows;
	}
	return snapshot;
}

export function sleep(ms: number): Promise<void> {
	return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `check` every 20 ms until it returns a value other than undefined or false. */
export async function waitFor<T>(
	check: () => T | undefined | false | Promise<T | undefined | false>,
	what: string,
	timeoutMs = 20_000,
): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const value = await check();
		if (value !== undefined && value !== false) return value;
		if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
		await sleep(20);
	}
}

/** The value of one item's result, or the item's error thrown (so a test fails with its message). */
export function ok<T>(result: T | DurableJobsError): T {
	if (result instanceof DurableJobsError) throw result;
	return result;
}
