import { createHash } from 'node:crypto';
import pg from 'pg';

import {
	DurableJobsError,
	JobStore,
	closeAllPools,
	finishNoticesSent,
	loadMigrations,
	migrate,
	quoteIdentifier,
	type CompleteResult,
	type ConnectionConfig,
	type LeasedJob,
} from '../../src/core';
import { renderMigration } from '../../src/core/migrate';
import { createMigrationsTableQuery, recordMigrationQuery } from '../../src/core/sql/migrations';
import { parseDatabaseUrl } from '../../scripts/lib/database-url';

/** The test database: jest's global set-up (test/helpers/global-postgres.ts) sets DATABASE_URL. */
export function databaseUrl(): string {
	const url = process.env.DATABASE_URL;
	if (!url)
		throw new Error(
			'DATABASE_URL is not set: run the tests through jest.config.js (npm test), whose global set-up provides it',
		);
	return url;
}

/** Where a postgres:// URL points and who logs in: what a pool config and a credential share. */
export function serverOf(url: string) {
	const { host, port, database, user, password } = parseDatabaseUrl(url);
	return { host, port, database, user, password };
}

export function connectionConfig(
	url = databaseUrl(),
	overrides: Partial<ConnectionConfig> = {},
): ConnectionConfig {
	const server = serverOf(url);
	return { ...server, password: server.password || undefined, maxConnections: 20, ...overrides };
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

/**
 * Creates `schema` as a version of the package that shipped migrations 1 to `lastId` left it,
 * for upgrade tests: the later migrations are still pending.
 */
export async function schemaAtMigration(
	pool: pg.Pool,
	schema: string,
	lastId: number,
): Promise<void> {
	const s = quoteIdentifier(schema);
	await pool.query(`CREATE SCHEMA ${s}`);
	await pool.query(createMigrationsTableQuery(s));
	for (const migration of loadMigrations().filter((m) => m.id <= lastId)) {
		await pool.query(renderMigration(migration, schema));
		await pool.query(recordMigrationQuery(s, migration.id, migration.name));
	}
}

export interface TestSchemaOptions {
	/** Tells this schema from another one of the same file (see testSchema). */
	suffix?: string;
	/** Connections of the file's own pool (default 20). */
	poolSize?: number;
	/** Apply the package's migrations before the tests; `store` needs it. */
	migrate?: boolean;
	/** Options of `store`. */
	storeOptions?: { maxPayloadBytes?: number };
	/** More schemas the file creates: dropped before and after its tests, as the main one is. */
	otherSchemas?: string[];
	/** The nodes under test open pools through the core's cache; close them after the tests. */
	closeCachedPools?: boolean;
	/** Runs after the tests, before the schemas are dropped and the pool is closed. */
	cleanUp?: (pool: pg.Pool) => Promise<unknown>;
}

export interface TestSchema {
	/** The file's schema (dropped before its tests, so every run starts empty). */
	schema: string;
	/** The file's own pool on the test database; it connects on first use. */
	pool: pg.Pool;
	/** A JobStore over the schema (only with `migrate`: the migrations run before the tests). */
	store: JobStore;
}

/**
 * A test file's schema, pool and store, with the hooks that set them up and tear them down:
 * before the tests the schema is dropped (and migrated with `migrate`); after them the core's
 * cached pools are closed (with `closeCachedPools`), `cleanUp` runs, the schemas are dropped
 * and the pool is ended. Call it at the top of the file; the pool and the store exist at once
 * (neither touches the database until used), so tests and later hooks can use them directly:
 *
 *     const { schema, pool, store } = useTestSchema(__filename, { migrate: true });
 *
 * A file's own `beforeAll` runs after this one's; its own `afterAll` would run after the pool is
 * closed, so cleanup that needs the pool goes in `cleanUp`.
 */
export function useTestSchema(file: string, options: TestSchemaOptions = {}): TestSchema {
	const schema = testSchema(file, options.suffix);
	const pool = newPool(options.poolSize ?? 20);
	const schemas = [schema, ...(options.otherSchemas ?? [])];
	const store = new JobStore(pool, { schema, ...options.storeOptions });
	beforeAll(async () => {
		for (const name of schemas) await dropSchema(pool, name);
		if (options.migrate) await migrate(pool, schema);
	});
	afterAll(async () => {
		try {
			if (options.closeCachedPools) await closeAllPools();
			await options.cleanUp?.(pool);
			for (const name of schemas) await dropSchema(pool, name);
		} finally {
			await pool.end();
		}
	});
	return {
		schema,
		pool,
		get store() {
			if (!options.migrate)
				throw new Error(
					'useTestSchema gives a store only with { migrate: true } (the schema is empty otherwise)',
				);
			return store;
		},
	};
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

/**
 * Runs two writers that claim the same keys in crossed orders so that PostgreSQL must abort one
 * of them as a deadlock: a connection of its own holds the middle key uncommitted until both
 * writers wait for it, then lets go; whichever takes that key next needs one the other holds.
 */
export async function crossedWritersDeadlock<T>(
	pool: pg.Pool,
	schema: string,
	middle: { queue: string; key: string },
	writers: () => Promise<T>,
): Promise<T> {
	const holder = await pool.connect();
	try {
		await holder.query('BEGIN');
		await holder.query(
			`INSERT INTO "${schema}".jobs (id, queue, payload, idempotency_key) VALUES (gen_random_uuid(), $1, '{}', $2)`,
			[middle.queue, middle.key],
		);
		const { rows } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
		const running = writers();
		await waitFor(
			async () =>
				(
					await pool.query<{ n: number }>(
						'SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))',
						[rows[0].pid],
					)
				).rows[0].n === 2,
			'both writers to wait for the middle key',
		);
		await holder.query('ROLLBACK');
		return await running;
	} finally {
		await holder.query('ROLLBACK').catch(() => undefined);
		holder.release();
	}
}

/**
 * Runs `work` and returns its value and the SQL text of every statement any pg client sent
 * meanwhile (transaction control included), in order, trimmed (see sentTexts). The spy on
 * `pg.Client.prototype.query` is removed when `work` ends, whether or not it throws.
 */
export async function statementsSentDuring<T>(
	work: () => Promise<T>,
): Promise<{ value: T; statements: string[] }> {
	// A finish notice of an earlier completion (sent after it, see finishNotices.ts) is not
	// `work`'s.
	await finishNoticesSent();
	const spy = jest.spyOn(pg.Client.prototype, 'query');
	try {
		const value = await work();
		return { value, statements: sentTexts(spy) };
	} finally {
		spy.mockRestore();
	}
}

/** The SQL text of every query a spy on `pg.Client.prototype.query` saw, in order, trimmed. */
export function sentTexts(spy: jest.SpyInstance): string[] {
	return (spy.mock.calls as unknown[][]).map(([query]) =>
		(typeof query === 'string'
			? query
			: String((query as { text?: unknown } | null)?.text ?? '')
		).trim(),
	);
}

/**
 * The nodes of the plan PostgreSQL chooses for `query` with its values (a custom plan), each as
 * its type and the index or relation it reads, e.g. "Index Scan jobs_pkey" or "Sort".
 */
export async function planNodes(
	pool: pg.Pool,
	query: { text: string; values: unknown[] },
): Promise<string[]> {
	const [
		{
			'QUERY PLAN': [explained],
		},
	] = (await pool.query({ text: `EXPLAIN (FORMAT JSON) ${query.text}`, values: query.values }))
		.rows;
	const nodes: string[] = [];
	const walk = (node: Record<string, unknown>) => {
		nodes.push(`${node['Node Type']} ${node['Index Name'] ?? node['Relation Name'] ?? ''}`.trim());
		for (const child of (node.Plans as Array<Record<string, unknown>> | undefined) ?? [])
			walk(child);
	};
	walk(explained.Plan);
	return nodes;
}

/** The value of one item's result, or the item's error thrown (so a test fails with its message). */
export function ok<T>(result: T | DurableJobsError): T {
	if (result instanceof DurableJobsError) throw result;
	return result;
}

/** The Date subclass `poolWithOwnTimestampParser` parses timestamptz values into. */
export class PoolDate extends Date {}

/** A pool created with a timestamptz parser of its own, as an application may configure one. */
export function poolWithOwnTimestampParser(max = 2): pg.Pool {
	return new pg.Pool({
		connectionString: databaseUrl(),
		max,
		types: {
			getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
				oid === 1184
					? (text: string) => new PoolDate(text)
					: pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
		},
	});
}

/** Completes every job as succeeded, in one call; each item's result (an error throws). */
export async function succeedAll(
	store: JobStore,
	jobs: Array<Pick<LeasedJob, 'id' | 'attempt_id'>>,
): Promise<CompleteResult[]> {
	return (
		await store.complete(
			jobs.map((job) => ({
				jobId: job.id,
				attemptId: job.attempt_id,
				outcome: 'succeeded' as const,
			})),
		)
	).map(ok);
}

/** Leases and completes jobs of `queue`, `limit` at a time, until none is due. */
export async function drainQueue(store: JobStore, queue: string, limit: number): Promise<void> {
	for (;;) {
		const leased = await store.lease({ queue, limit });
		if (leased.length === 0) return;
		const results = await succeedAll(store, leased);
		if (!results.every((result) => result.applied))
			throw new Error(`a completion of queue ${queue} was not applied`);
	}
}
