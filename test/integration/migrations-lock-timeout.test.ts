/**
 * A migration waits at most MIGRATION_LOCK_TIMEOUT_MS for a lock (a long pg_dump holds jobs):
 * it stops, naming the lock and who holds it, instead of queueing every lease and enqueue
 * behind its request, and a later use tries again after a backoff.
 */
import pg from 'pg';

import {
	JobTriggerEngine,
	type LeasedJob,
	MigrationWaitsError,
	MigrationsMissingError,
	loadMigrations,
	migrate,
	openStore,
	resetMigrationCache,
} from '../../src/core';
import { MIGRATION_LOCK_TIMEOUT_MS } from '../../src/core/sql/migrations';
import {
	connectionConfig,
	databaseUrl,
	dropSchema,
	ok,
	schemaAtMigration,
	sleep,
	useTestSchema,
	waitFor,
} from '../helpers/db';

const { schema, pool } = useTestSchema(__filename, { closeCachedPools: true });
const s = `"${schema}"`;

/** One connection that stands for a long transaction (`application_name`) holding jobs. */
async function holder(applicationName: string): Promise<{ client: pg.Client; pid: number }> {
	const client = new pg.Client({
		connectionString: databaseUrl(),
		application_name: applicationName,
	});
	client.on('error', () => undefined);
	await client.connect();
	const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
	return { client, pid: rows[0].pid };
}

async function appliedId(): Promise<number> {
	return (await pool.query(`SELECT max(id)::int AS id FROM ${s}.migrations`)).rows[0].id;
}

/** Waits until some lock on jobs has been asked for and not granted. */
async function someoneWaitsForJobs(): Promise<void> {
	await waitFor(
		async () =>
			(
				await pool.query<{ n: number }>(
					'SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = $1::regclass',
					[`${s}.jobs`],
				)
			).rows[0].n > 0,
		'a lock request on jobs',
	);
}

/** Settles with the outcome of `work`, or with "still waiting" after `ms`. */
async function within<T>(ms: number, work: Promise<T>): Promise<T | 'still waiting'> {
	let timer: NodeJS.Timeout | undefined;
	const deadline = new Promise<'still waiting'>((resolve) => {
		timer = setTimeout(() => resolve('still waiting'), ms);
	});
	try {
		return await Promise.race([work, deadline]);
	} finally {
		clearTimeout(timer);
	}
}

describe('a migration that waits for a lock', () => {
	it('stops after the lock timeout, naming the tables and the transaction that holds them, and enqueues queued behind it go on', async () => {
		await dropSchema(pool, schema);
		await schemaAtMigration(pool, schema, 14);
		const { client: dump, pid: dumpPid } = await holder('pg_dump');
		const { client: writer } = await holder('n8n');
		const migrator = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
		try {
			await dump.query('BEGIN');
			await dump.query(`LOCK TABLE ${s}.jobs, ${s}.settings IN ACCESS SHARE MODE`);
			// The dump's transaction is older than the lock timeout when the migration gives up.
			const migrating = migrate(migrator, schema).catch((error: unknown) => error);
			await someoneWaitsForJobs();
			const started = Date.now();
			const enqueued = writer
				.query(`INSERT INTO ${s}.jobs (id, queue, payload) VALUES (gen_random_uuid(), 'q', '{}')`)
				.then(() => Date.now() - started);

			const error = await within(15_000, migrating);
			expect(error).toBeInstanceOf(MigrationWaitsError);
			const waiting = error as MigrationWaitsError;
			expect(waiting.migration).toBe('0015_column_domains.sql');
			expect(waiting.message).toMatch(
				new RegExp(
					`^Migration 0015 waits for a lock on jobs and settings, held by process ${dumpPid} \\("pg_dump", in a transaction for \\d+ s\\) \\(schema "${schema}"\\)$`,
				),
			);
			expect(waiting.code).toBe('migrations_missing');
			// The enqueue that queued behind the migration's request went on when it gave up.
			expect(await within(15_000, enqueued)).toBeLessThan(MIGRATION_LOCK_TIMEOUT_MS + 5_000);
			expect(await appliedId()).toBe(14);
			// SET LOCAL: the migration's connection keeps its own lock timeout.
			expect((await migrator.query('SHOW lock_timeout')).rows[0].lock_timeout).toBe('0');

			await dump.query('COMMIT');
			expect((await migrate(migrator, schema)).applied).toHaveLength(loadMigrations().length - 14);
		} finally {
			await dump.end();
			await writer.end();
			await migrator.end();
		}
	}, 60_000);

	it('a store that needs the migration fails with "will be retried", and does not try again before the backoff ends', async () => {
		await dropSchema(pool, schema);
		await schemaAtMigration(pool, schema, 14);
		resetMigrationCache();
		const { client: dump } = await holder('pg_dump');
		const config = { ...connectionConfig(), schema };
		try {
			await dump.query('BEGIN');
			await dump.query(`LOCK TABLE ${s}.jobs IN ACCESS SHARE MODE`);
			const first = await within(
				15_000,
				openStore(config).catch((error: unknown) => error),
			);
			expect(first).toBeInstanceOf(MigrationsMissingError);
			expect((first as Error).message).toMatch(
				new RegExp(
					`^Migration 0015 waits for a lock on jobs, held by process \\d+ \\("pg_dump", in a transaction for \\d+ s\\) \\(schema "${schema}"\\), and will be retried on a use after 5 s: the nodes cannot work without it$`,
				),
			);
			await dump.query('COMMIT');

			// Within the backoff a use fails at once with the same error, without trying.
			const started = Date.now();
			const again = await openStore(config).catch((error: unknown) => error);
			expect(again).toBe(first);
			expect(Date.now() - started).toBeLessThan(1_000);
			expect(await appliedId()).toBe(14);

			await sleep(5_000);
			await expect(openStore(config)).resolves.toBeDefined();
			expect(await appliedId()).toBe(loadMigrations().length);
		} finally {
			await dump.end();
		}
	}, 60_000);

	it('a Job Trigger activated while a migration it needs waits for a lock starts all the same, and leases once it is applied', async () => {
		await dropSchema(pool, schema);
		await schemaAtMigration(pool, schema, 14);
		resetMigrationCache();
		const { client: dump } = await holder('pg_dump');
		const config = { ...connectionConfig(), schema };
		const emitted: string[] = [];
		const trigger = new JobTriggerEngine({
			store: async () => await openStore(config),
			schema,
			queue: 'during-upgrade',
			connection: connectionConfig(),
			backstopMs: 1_000,
			emit: async (jobs: LeasedJob[]) => {
				emitted.push(...jobs.map((job) => job.id));
			},
		});
		try {
			await dump.query('BEGIN');
			await dump.query(`LOCK TABLE ${s}.jobs IN ACCESS SHARE MODE`);
			expect(await within(15_000, trigger.start())).toBeUndefined();
			expect(await appliedId()).toBe(14);
			await dump.query('COMMIT');

			await waitFor(
				async () => (await appliedId()) === loadMigrations().length,
				'the trigger applying the migrations',
				30_000,
			);
			const [enqueued] = await (
				await openStore(config)
			).enqueue([{ queue: 'during-upgrade', payload: {} }]);
			const { jobId } = ok(enqueued);
			await waitFor(() => emitted.includes(jobId), 'the job leased by the trigger', 15_000);
		} finally {
			await trigger.stop();
			await dump.end();
		}
	}, 90_000);

	it('a store opens without a deferrable migration that waits for a lock, says so, and applies it later', async () => {
		await dropSchema(pool, schema);
		await schemaAtMigration(pool, schema, 15);
		resetMigrationCache();
		// A transaction that wrote a job (and, through the trigger, its count) and goes on: 0016
		// builds a unique index on jobs, whose lock waits for it.
		const { client: writer, pid: writerPid } = await holder('long writer');
		const told: string[] = [];
		const config = { ...connectionConfig(), schema };
		try {
			await writer.query('BEGIN');
			await writer.query(
				`INSERT INTO ${s}.jobs (id, queue, payload) VALUES (gen_random_uuid(), 'q', '{}')`,
			);
			const store = await within(
				15_000,
				openStore(config, {}, { onMigrationsPending: (message) => told.push(message) }),
			);
			expect(store).not.toBe('still waiting');
			expect(told).toHaveLength(1);
			expect(told[0]).toMatch(
				new RegExp(
					`^Durable Jobs: Migration 0016 waits for a lock on job_counts and jobs, held by process ${writerPid} \\("long writer", in a transaction for \\d+ s\\) \\(schema "${schema}"\\)\\. It is applied once that transaction has ended\\. The nodes work without it meanwhile; a use after 30 s tries again`,
				),
			);
			expect(await appliedId()).toBe(15);
			await writer.query('COMMIT');
			// A use after the delay (here: at once, as after resetMigrationCache) applies it.
			resetMigrationCache();
			await openStore(config);
			expect(await appliedId()).toBe(loadMigrations().length);
		} finally {
			await writer.end();
		}
	}, 60_000);
});
