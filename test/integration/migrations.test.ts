import pg from 'pg';

import {
	DEFAULT_SCHEMA,
	MigrationsMissingError,
	ValidationError,
	assertMigrated,
	loadMigrations,
	migrate,
	migrationScript,
	openStore,
	resetMigrationCache,
	JobStore,
} from '../../src/core';
import { isMigrationWaitError } from '../../src/core/errors';
import { DEFERRABLE_MIGRATION_IDS, renderMigration } from '../../src/core/migrate';
import { migrationLockQuery, recordMigrationQuery } from '../../src/core/sql/migrations';
import {
	connectionConfig,
	databaseUrl,
	dropSchema,
	newPool,
	schemaAtMigration,
	tableSnapshot,
	useTestSchema,
	waitFor,
} from '../helpers/db';

const defaultDatabase = `djt_default_${process.pid}`;
const domainsReader = `djt_domains_reader_${process.pid}`;
const { schema, pool } = useTestSchema(__filename, {
	closeCachedPools: true,
	cleanUp: async (pool) => {
		await dropSchema(pool, `${schema}_b`);
		await dropSchema(pool, `${schema}_c`);
		await dropSchema(pool, `${schema}_d`);
		await dropSchema(pool, `${schema}_e`);
		await dropSchema(pool, `${schema}_f`);
		await dropSchema(pool, `${schema}_g`);
		await dropSchema(pool, `${schema}_h`);
		await dropSchema(pool, `${schema}_i`);
		await dropSchema(pool, `${schema}_j`);
		await pool.query(`DROP ROLE IF EXISTS "${domainsReader}"`);
		await pool
			.query(`DROP DATABASE IF EXISTS ${defaultDatabase} WITH (FORCE)`)
			.catch(() => undefined);
	},
});

/** A pool of its own whose connections start with these settings. */
function poolWith(settings: Record<string, string>, max: number): pg.Pool {
	return new pg.Pool({
		connectionString: databaseUrl(),
		max,
		options: Object.entries(settings)
			.map(([name, value]) => `-c ${name}=${value}`)
			.join(' '),
	});
}

/**
 * A new schema `<test schema>_<suffix>` at the migration before `migrationId`: its name, and the
 * name quoted for SQL.
 */
async function schemaBefore(
	suffix: string,
	migrationId: number,
): Promise<{ target: string; s: string }> {
	const target = `${schema}_${suffix}`;
	await dropSchema(pool, target);
	await schemaAtMigration(pool, target, migrationId - 1);
	return { target, s: `"${target}"` };
}

/**
 * Runs `work` with a reader (one connection) and a migrator (a pool) whose deadlock_timeouts
 * are given, then rolls the reader back, closes both and drops `target`.
 */
async function withReaderAndMigrator(
	target: string,
	deadlockTimeouts: { reader: string; migrator: string },
	work: (reader: pg.PoolClient, migrator: pg.Pool) => Promise<void>,
): Promise<void> {
	const migrator = poolWith({ deadlock_timeout: deadlockTimeouts.migrator }, 2);
	const readers = poolWith({ deadlock_timeout: deadlockTimeouts.reader }, 1);
	const reader = await readers.connect();
	try {
		await work(reader, migrator);
	} finally {
		await reader.query('ROLLBACK').catch(() => undefined);
		reader.release();
		await readers.end();
		await migrator.end();
		await dropSchema(pool, target);
	}
}

/** Waits until one lock on `relation` (a qualified name) has been asked for and not granted. */
async function someoneWaitsFor(relation: string, what: string): Promise<void> {
	await waitFor(
		async () =>
			(
				await pool.query<{ n: number }>(
					`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = $1::regclass`,
					[relation],
				)
			).rows[0].n === 1,
		what,
	);
}

describe('migrations', () => {
	it('are numbered without gaps and each one names its file', () => {
		const migrations = loadMigrations();
		expect(migrations.length).toBeGreaterThanOrEqual(2);
		expect(migrations.map((migration) => migration.id)).toEqual(
			migrations.map((_, index) => index + 1),
		);
	});

	it('two concurrent runners both succeed and apply each file exactly once', async () => {
		const otherPool = newPool(2);
		const [a, b, c] = await Promise.all([
			migrate(pool, schema),
			migrate(pool, schema),
			migrate(otherPool, schema),
		]).finally(() => otherPool.end());
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
		await expect(assertMigrated(pool, schema)).resolves.toEqual([]);
	});

	it('with auto-migrate off, a missing schema is a clear error naming the command', async () => {
		resetMigrationCache();
		const config = { ...connectionConfig(), schema: `${schema}_b`, autoMigrate: false };
		const error = await openStore(config).catch((caught: unknown) => caught);
		expect(error).toBeInstanceOf(MigrationsMissingError);
		expect((error as MigrationsMissingError).message).toContain('0001_jobs.sql');
		expect((error as MigrationsMissingError).fix).toContain(
			'cd ~/.n8n/nodes && DATABASE_URL=postgres://USER:PASSWORD@HOST:PORT/DATABASE node node_modules/n8n-nodes-durable-jobs/dist/src/cli.js migrate --schema',
		);
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
			await expect(assertMigrated(other, DEFAULT_SCHEMA)).resolves.toEqual([]);
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

	it('0015 turns four conditions of jobs into domains without rewriting a file, keeps the grants of job_attempts, and every condition still rejects its bad value', async () => {
		const upgraded = `${schema}_d`;
		const s = `"${upgraded}"`;
		await dropSchema(pool, upgraded);
		await schemaAtMigration(pool, upgraded, 14);
		await pool.query(
			`INSERT INTO ${s}.jobs (id, queue, payload, status, attempts, max_attempts, idempotency_key, error_class,
				attempt_id, attempt_checkpoint, finished_at)
			SELECT gen_random_uuid(), 'q', '{}', CASE WHEN i % 3 = 0 THEN 'queued' WHEN i % 3 = 1 THEN 'running' ELSE 'failed' END,
				i % 4, 5, 'k' || i, CASE WHEN i % 3 = 2 THEN 'needs_mapping' END, gen_random_uuid(),
				CASE WHEN i % 3 = 1 THEN 'step ' || i END, CASE WHEN i % 3 = 2 THEN now() END
			FROM generate_series(1, 300) AS i`,
		);
		await pool.query(`DROP ROLE IF EXISTS "${domainsReader}"`);
		await pool.query(`CREATE ROLE "${domainsReader}"`);
		await pool.query(`GRANT SELECT ON ${s}.job_attempts TO "${domainsReader}"`);
		const files = `SELECT c.relname, c.relfilenode FROM pg_class c
			WHERE c.relnamespace = $1::regnamespace AND c.relkind IN ('r', 'i') ORDER BY c.relname`;
		const view = `SELECT c.relowner::regrole::text AS owner, c.relacl::text AS acl,
			(SELECT array_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum)
			 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0) AS columns
			FROM pg_class c WHERE c.oid = $1::regclass`;
		const state = async () => ({
			files: (await pool.query(files, [upgraded])).rows,
			view: (await pool.query(view, [`${upgraded}.job_attempts`])).rows,
			tables: await tableSnapshot(pool, upgraded),
		});
		const before = await state();
		expect(before.view[0].acl).toContain(`${domainsReader}=r/`);

		expect((await migrate(pool, upgraded)).applied).toEqual([
			'0015_column_domains.sql',
			'0016_ordering_key_runs_alone.sql',
			'0017_running_by_lease_end.sql',
			'0018_running_by_attempt_lease_end.sql',
		]);

		// 0016 only adds an index (of the running jobs with an ordering key, none here), and 0017
		// and 0018 build jobs_running anew (0018 sets no value here: no job runs).
		const rebuilt = new Set(['jobs_ordering_running', 'jobs_running']);
		const after = await state();
		expect(after.files.filter((file: { relname: string }) => !rebuilt.has(file.relname))).toEqual(
			before.files.filter((file: { relname: string }) => !rebuilt.has(file.relname)),
		);
		expect({ ...after, files: before.files }).toEqual(before);
		const { rows: types } = await pool.query<{ attname: string; type: string }>(
			`SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a
			WHERE a.attrelid = $1::regclass AND a.attname IN ('status', 'idempotency_key', 'attempts',
				'max_attempts', 'error_class', 'attempt_checkpoint') ORDER BY a.attname`,
			[`${upgraded}.jobs`],
		);
		// NOT VALID: validating would read the whole table under the migration's lock.
		const { rows: conditions } = await pool.query<{ conname: string; convalidated: boolean }>(
			`SELECT conname, convalidated FROM pg_constraint WHERE connamespace = $1::regnamespace
			AND conname IN ('jobs_status_check', 'jobs_attempts_check', 'jobs_max_attempts_check',
				'jobs_error_class_check', 'jobs_attempt_checkpoint_length') ORDER BY conname`,
			[upgraded],
		);
		expect(conditions).toEqual(
			[
				'jobs_attempt_checkpoint_length',
				'jobs_attempts_check',
				'jobs_error_class_check',
				'jobs_max_attempts_check',
				'jobs_status_check',
			].map((conname) => ({ conname, convalidated: false })),
		);
		expect(Object.fromEntries(types.map((row) => [row.attname, row.type]))).toEqual({
			attempt_checkpoint: `${upgraded}.job_checkpoint`,
			attempts: `${upgraded}.job_attempt_count`,
			error_class: `${upgraded}.job_error_class`,
			idempotency_key: 'text',
			max_attempts: `${upgraded}.job_max_attempts`,
			status: 'text',
		});

		// Each condition, in the upgraded schema and in one migrated from scratch, on an UPDATE
		// of an existing row and on an INSERT: the same error, the same constraint name, nothing
		// written.
		const fresh = `${schema}_e`;
		await dropSchema(pool, fresh);
		await migrate(pool, fresh);
		const bad: Array<[column: string, value: string, constraint: string]> = [
			['status', `'finished'`, 'jobs_status_check'],
			['idempotency_key', `repeat('k', 256)`, 'jobs_idempotency_key_check'],
			['attempts', '-1', 'jobs_attempts_check'],
			['max_attempts', '0', 'jobs_max_attempts_check'],
			['error_class', `'fatal'`, 'jobs_error_class_check'],
			['attempt_checkpoint', `repeat('c', 101)`, 'jobs_attempt_checkpoint_length'],
		];
		for (const target of [upgraded, fresh]) {
			const t = `"${target}"`;
			await pool.query(
				`INSERT INTO ${t}.jobs (id, queue, payload) VALUES ('00000000-0000-7000-8000-00000000d001', 'q', '{}')
				ON CONFLICT DO NOTHING`,
			);
			const unchanged = await tableSnapshot(pool, target);
			for (const [column, value, constraint] of bad) {
				for (const statement of [
					`UPDATE ${t}.jobs SET ${column} = ${value} WHERE id = '00000000-0000-7000-8000-00000000d001'`,
					`INSERT INTO ${t}.jobs (id, queue, payload, ${column}) VALUES (gen_random_uuid(), 'q', '{}', ${value})`,
				]) {
					const error = await pool.query(statement).then(
						() => null,
						(caught: unknown) => caught as { code?: string; constraint?: string },
					);
					expect({ target, statement, code: error?.code, constraint: error?.constraint }).toEqual({
						target,
						statement,
						code: '23514',
						constraint,
					});
				}
			}
			expect(await tableSnapshot(pool, target)).toEqual(unchanged);
		}
		await dropSchema(pool, upgraded);
		await dropSchema(pool, fresh);
	});

	it('0016 stops, naming them, while two jobs of one ordering key run (an older version could leave them), and is applied once one has ended', async () => {
		const { target, s } = await schemaBefore('g', 16);
		await pool.query(
			`INSERT INTO ${s}.jobs (id, queue, payload, status, attempts, attempt_id, lease_until, ordering_key)
			SELECT gen_random_uuid(), 'orders', '{}', 'running', 1, gen_random_uuid(), now() + interval '1 minute', 'customer-7'
			FROM generate_series(1, 2)`,
		);
		await expect(migrate(pool, target)).rejects.toThrow(
			/Migration 0016 waits: 2 jobs of queue "orders" with ordering key "customer-7" are running at once/,
		);
		const { rows: applied } = await pool.query(`SELECT max(id)::int AS id FROM ${s}.migrations`);
		expect(applied[0].id).toBe(15);

		await pool.query(
			`UPDATE ${s}.jobs SET status = 'done', lease_until = NULL, finished_at = now()
			WHERE id = (SELECT id FROM ${s}.jobs ORDER BY seq LIMIT 1)`,
		);
		expect((await migrate(pool, target)).applied).toEqual([
			'0016_ordering_key_runs_alone.sql',
			'0017_running_by_lease_end.sql',
			'0018_running_by_attempt_lease_end.sql',
		]);
		await expect(
			pool.query(
				`INSERT INTO ${s}.jobs (id, queue, payload, status, attempts, attempt_id, lease_until, ordering_key)
				VALUES (gen_random_uuid(), 'orders', '{}', 'running', 1, gen_random_uuid(), now(), 'customer-7')`,
			),
		).rejects.toMatchObject({ code: '23505', constraint: 'jobs_ordering_running' });
		await dropSchema(pool, target);
	});

	it('a store opened without the migrations the package works without says so once: with Auto-Migrate off, or while one waits', async () => {
		const { target, s } = await schemaBefore('j', 16);
		const told: string[] = [];
		const events = { onMigrationsPending: (message: string) => told.push(message) };
		const config = { ...connectionConfig(), schema: target };
		resetMigrationCache();

		await openStore({ ...config, autoMigrate: false }, {}, events);
		await openStore({ ...config, autoMigrate: false }, {}, events);
		expect(told).toHaveLength(1);
		for (const part of [
			`schema "${target}" lacks migrations`,
			'0016_ordering_key_runs_alone.sql (without it,',
			'0017_running_by_lease_end.sql (without it,',
			'0018_running_by_attempt_lease_end.sql (without it,',
			'Auto-Migrate is off',
			`node node_modules/n8n-nodes-durable-jobs/dist/src/cli.js migrate --schema ${target}`,
		])
			expect(told[0]).toContain(part);
		// A listener that throws does not fail the open.
		resetMigrationCache();
		const store = await openStore(
			{ ...config, autoMigrate: false },
			{},
			{
				onMigrationsPending: () => {
					throw new Error('no logger');
				},
			},
		);
		expect(store.schema).toBe(target);

		await pool.query(
			`INSERT INTO ${s}.jobs (id, queue, payload, status, attempts, attempt_id, lease_until, ordering_key)
			SELECT gen_random_uuid(), 'orders', '{}', 'running', 1, gen_random_uuid(), now() + interval '1 minute', 'customer-7'
			FROM generate_series(1, 2)`,
		);
		told.length = 0;
		await openStore(config, {}, events);
		expect(told).toHaveLength(1);
		for (const part of [
			'Migration 0016 waits: 2 jobs of queue "orders" with ordering key "customer-7" are running at once',
			`schema "${target}"`,
			'tries again',
			'5 minutes',
		])
			expect(told[0]).toContain(part);
		// The next try (here at once, as a use 30 s later would) waits for the same reason: not
		// reported again. A wait for another reason is.
		resetMigrationCache();
		await openStore(config, {}, events);
		expect(told).toHaveLength(1);
		await pool.query(`UPDATE ${s}.jobs SET ordering_key = 'customer-8'`);
		resetMigrationCache();
		await openStore(config, {}, events);
		expect(told).toHaveLength(2);
		expect(told[1]).toContain('ordering key "customer-8"');

		await pool.query(`UPDATE ${s}.jobs SET ordering_key = NULL`);
		await migrate(pool, target);
		resetMigrationCache();
		told.length = 0;
		await openStore({ ...config, autoMigrate: false }, {}, events);
		await openStore(config, {}, events);
		expect(told).toEqual([]);
		resetMigrationCache();
	});

	it('every migration after one the package works without is one it works without too, since it waits with it', () => {
		const ids = loadMigrations().map((migration) => migration.id);
		const first = Math.min(...DEFERRABLE_MIGRATION_IDS);
		expect(ids.filter((id) => id >= first && !DEFERRABLE_MIGRATION_IDS.has(id))).toEqual([]);
	});

	/**
	 * The two migrations that rebuild jobs_running: its columns, the name of an index an operator
	 * may build beforehand, and how the test applies it alone (0017 by its file, since migrate()
	 * would go on to 0018).
	 */
	const runningIndexMigrations = [
		{
			id: 17,
			name: '0017_running_by_lease_end.sql',
			columns: '(queue, lease_until)',
			prepared: 'jobs_running_lease',
		},
		{
			id: 18,
			name: '0018_running_by_attempt_lease_end.sql',
			columns: '(queue, attempt_lease_until)',
			prepared: 'jobs_running_attempt_lease',
		},
	];

	/** Applies migration `id` alone, as migrate() applies one, and returns its file's name. */
	async function applyAlone(db: pg.Pool, target: string, id: number): Promise<string> {
		if (id === Math.max(...loadMigrations().map((migration) => migration.id))) {
			const { applied } = await migrate(db, target);
			expect(applied).toHaveLength(1);
			return applied[0];
		}
		const migration = loadMigrations().find((candidate) => candidate.id === id)!;
		const client = await db.connect();
		try {
			await client.query('BEGIN');
			await client.query(renderMigration(migration, target));
			await client.query(recordMigrationQuery(`"${target}"`, migration.id, migration.name));
			await client.query('COMMIT');
		} catch (error) {
			await client.query('ROLLBACK');
			throw error;
		} finally {
			client.release();
		}
		return migration.name;
	}

	for (const { id, name: file, columns, prepared: preparedName } of runningIndexMigrations)
		it(`${file.slice(0, 4)} rebuilds jobs_running on ${columns}; an index built beforehand is kept, one left invalid or of another definition built again, and a swap done by hand left as it is`, async () => {
			const target = `${schema}_h`;
			const s = `"${target}"`;
			const definition = `ON ${target}.jobs USING btree ${columns} WHERE (status = 'running'::text)`;
			const indexOid = async (name: string) =>
				(
					await pool.query<{ oid: number | null }>(`SELECT to_regclass($1)::oid::int AS oid`, [
						`${s}.${name}`,
					])
				).rows[0].oid;
			const runningIndex = async () => {
				const { rows } = await pool.query<{ oid: number; definition: string; valid: boolean }>(
					`SELECT i.indexrelid::int AS oid, pg_get_indexdef(i.indexrelid) AS definition, i.indisvalid AS valid
					FROM pg_index i WHERE i.indexrelid = to_regclass($1)`,
					[`${s}.jobs_running`],
				);
				return rows[0];
			};
			const wanted = `ON ${s}.jobs ${columns} WHERE status = 'running'`;
			// What an operator may have done before upgrading, and whether the migration keeps it.
			const preparations: Array<[string, string[], 'kept' | 'built again']> = [
				['built beforehand', [`CREATE INDEX ${preparedName} ${wanted}`], 'kept'],
				[
					'left invalid',
					[
						`CREATE INDEX ${preparedName} ${wanted}`,
						`UPDATE pg_index SET indisvalid = false WHERE indexrelid = '${s}.${preparedName}'::regclass`,
					],
					'built again',
				],
				[
					'of another definition',
					[`CREATE INDEX ${preparedName} ON ${s}.jobs (queue) WHERE status = 'running'`],
					'built again',
				],
				[
					'swapped by hand',
					[
						`CREATE INDEX ${preparedName} ${wanted}`,
						`DROP INDEX ${s}.jobs_running`,
						`ALTER INDEX ${s}.${preparedName} RENAME TO jobs_running`,
					],
					'kept',
				],
			];
			for (const [name, statements, outcome] of preparations) {
				await schemaBefore('h', id);
				await pool.query(
					`INSERT INTO ${s}.jobs (id, queue, payload, status, attempts, attempt_id, lease_until, attempt_lease_until)
					SELECT gen_random_uuid(), 'q', '{}', 'running', 1, gen_random_uuid(), now() + i * interval '1 second',
						now() + i * interval '1 second'
					FROM generate_series(1, 20) AS i`,
				);
				for (const statement of statements) await pool.query(statement);
				const prepared = (await indexOid(preparedName)) ?? (await indexOid('jobs_running'));

				expect(await applyAlone(pool, target, id), name).toBe(file);
				const index = await runningIndex();
				expect(index.definition, name).toContain(definition);
				expect(index.valid, name).toBe(true);
				expect(index.oid === prepared ? 'kept' : 'built again', name).toBe(outcome);
				expect(await indexOid(preparedName), name).toBeNull();
			}
			await dropSchema(pool, target);
		});

	it("a new schema gets the last jobs_running, on the end each attempt's lease was given", async () => {
		const target = `${schema}_h`;
		await dropSchema(pool, target);
		await migrate(pool, target);
		const { rows } = await pool.query<{ definition: string }>(
			`SELECT pg_get_indexdef(to_regclass($1)) AS definition`,
			[`"${target}".jobs_running`],
		);
		expect(rows[0].definition).toContain(
			`ON ${target}.jobs USING btree (queue, attempt_lease_until) WHERE (status = 'running'::text)`,
		);
		await dropSchema(pool, target);
	});

	it('0018 gives a running job without an attempt lease end, or with one after its lease end, its lease end, so an ended lease is found', async () => {
		const { target, s } = await schemaBefore('h', 18);
		const ids = {
			missing: '00000000-0000-7000-8000-00000000f001',
			later: '00000000-0000-7000-8000-00000000f002',
			fine: '00000000-0000-7000-8000-00000000f003',
		};
		await pool.query(
			`INSERT INTO ${s}.jobs (id, queue, payload, status, attempts, attempt_id, lease_until, attempt_lease_until)
			VALUES ($1, 'q', '{}', 'running', 1, gen_random_uuid(), now() - interval '1 minute', NULL),
				($2, 'q', '{}', 'running', 1, gen_random_uuid(), now() - interval '1 minute', now() + interval '1 hour'),
				($3, 'q', '{}', 'running', 1, gen_random_uuid(), now() + interval '1 hour', now() + interval '1 minute')`,
			[ids.missing, ids.later, ids.fine],
		);
		expect((await migrate(pool, target)).applied).toEqual([
			'0018_running_by_attempt_lease_end.sql',
		]);
		const { rows } = await pool.query(
			`SELECT id, attempt_lease_until = lease_until AS at_lease_end FROM ${s}.jobs ORDER BY id`,
		);
		expect(rows).toEqual([
			{ id: ids.missing, at_lease_end: true },
			{ id: ids.later, at_lease_end: true },
			{ id: ids.fine, at_lease_end: false },
		]);
		const store = new JobStore(pool, { schema: target });
		const taken = await store.lease({ queue: 'q', limit: 10 });
		expect(taken.map((job) => job.id).sort()).toEqual([ids.missing, ids.later]);
		await dropSchema(pool, target);
	});

	for (const { id, name: file } of runningIndexMigrations)
		it(`${file.slice(0, 4)} locks jobs before it builds, so a lease that read jobs first is never its deadlock, and a transaction that keeps jobs for over 3 s makes it wait for a later use`, async () => {
			const { target, s } = await schemaBefore('i', id);
			await pool.query(
				`INSERT INTO ${s}.jobs (id, queue, payload, status) VALUES ('00000000-0000-7000-8000-00000000e001', 'q', '{}', 'queued')`,
			);
			// The reader looks for a deadlock after 100 ms of waiting, the migration after a minute:
			// had the migration built before it locked, the reader's write would wait for the
			// migration's build lock while the migration's drop waited for the reader, and the
			// reader would be the side that finds the deadlock and is aborted.
			const applied = async () =>
				(await pool.query(`SELECT max(id)::int AS id FROM ${s}.migrations`)).rows[0].id;
			await withReaderAndMigrator(
				target,
				{ reader: '100ms', migrator: '60s' },
				async (reader, migrator) => {
					await reader.query('BEGIN');
					await reader.query(`SELECT count(*) FROM ${s}.jobs`);
					const first = applyAlone(migrator, target, id).catch((error: unknown) => error);
					await someoneWaitsFor(`${s}.jobs`, 'the migration to wait for jobs');
					await reader.query(
						`UPDATE ${s}.jobs SET priority = 1 WHERE id = '00000000-0000-7000-8000-00000000e001'`,
					);
					await reader.query('COMMIT');
					const outcome = await first;
					// Applied, unless the reader's commit came over 3 s after the migration asked (a
					// loaded machine): then it waits, as below.
					if (!isMigrationWaitError(outcome)) expect(outcome).toBe(file);

					await schemaBefore('i', id);
					await reader.query('BEGIN');
					await reader.query(`SELECT count(*) FROM ${s}.jobs`);
					const started = Date.now();
					const waiting = await applyAlone(migrator, target, id).catch((error: unknown) => error);
					expect(isMigrationWaitError(waiting)).toBe(true);
					expect(String((waiting as Error).message)).toMatch(
						new RegExp(
							`Migration ${file.slice(0, 4)} waits: another transaction kept the jobs table for more than 3 s`,
						),
					);
					expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
					expect(await applied()).toBe(id - 1);
					await reader.query('COMMIT');
					expect(await applyAlone(migrator, target, id)).toBe(file);
				},
			);
		}, 30_000);

	it('a migration that deadlocks with a query runs again and is applied once', async () => {
		const target = `${schema}_f`;
		await dropSchema(pool, target);
		await schemaAtMigration(pool, target, 14);
		// PostgreSQL looks for a deadlock once per wait, deadlock_timeout after it began, and
		// aborts the side that looks while the cycle exists: the reader's 60 s make the migration
		// the one. The migration's 1 s stays under its lock timeout (3 s), past which it would
		// stop waiting for the view and report that it waits instead.
		await withReaderAndMigrator(
			target,
			{ reader: '60s', migrator: '1s' },
			async (reader, migrator) => {
				// A reader of job_attempts, as Job Status is, holds the view; 0015 waits for it while
				// holding the schema's migration lock, which the reader then asks for. PostgreSQL
				// aborts the migration, which runs again.
				await reader.query('BEGIN');
				await reader.query(`SELECT count(*) FROM "${target}".job_attempts`);
				const migrating = migrate(migrator, target);
				await someoneWaitsFor(`"${target}".job_attempts`, 'the migration to wait for the view');
				const lock = migrationLockQuery(target);
				await reader.query(lock.text, lock.values);
				await reader.query('COMMIT');
				expect((await migrating).applied).toEqual([
					'0015_column_domains.sql',
					'0016_ordering_key_runs_alone.sql',
					'0017_running_by_lease_end.sql',
					'0018_running_by_attempt_lease_end.sql',
				]);
				const { rows } = await pool.query(`SELECT name FROM "${target}".migrations WHERE id = 15`);
				expect(rows).toEqual([{ name: '0015_column_domains.sql' }]);
			},
		);
	}, 30_000);
});
