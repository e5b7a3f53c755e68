import {
	DatabaseUnavailableError,
	closeAllPools,
	getPool,
	holdPool,
	loadMigrations,
	cachedPoolCount,
	openStore,
	poolKey,
	resetMigrationCache,
} from '../../src/core';
import {
	connectionConfig,
	dropSchema,
	newPool,
	ok,
	schemaAtMigration,
	testSchema,
} from '../helpers/db';
import { freePort } from '../../scripts/lib/postgres';

afterAll(async () => {
	await closeAllPools();
});

describe('connections', () => {
	it('one pool per distinct config, keyed by a hash that does not contain the password', () => {
		const config = connectionConfig(undefined, { password: 'sup3r-secret-pw' });
		const a = getPool(config);
		const b = getPool({ ...config });
		expect(a).toBe(b);
		const c = getPool({ ...config, maxConnections: 3 });
		expect(c).not.toBe(a);
		expect(poolKey(config)).toMatch(/^[0-9a-f]{64}$/);
		expect(poolKey(config)).not.toContain('sup3r');
		expect(cachedPoolCount()).toBeGreaterThanOrEqual(2);
	});

	it('many concurrent first uses in one process share one pool and migrate once', async () => {
		const config = { ...connectionConfig(), schema: testSchema(__filename, 'shared') };
		const stores = await Promise.all(
			Array.from({ length: 20 }, async () => await openStore(config)),
		);
		expect(new Set(stores.map((store) => store.pool)).size).toBe(1);
		await stores[0].pool.query(`DROP SCHEMA "${config.schema}" CASCADE`);
	});

	// Under trust authentication (a DATABASE_URL without a password) any password is accepted,
	// so this runs against password-protected servers such as the embedded one.
	(!connectionConfig().password ? it.skip : it)(
		'a wrong password is a clear error that does not echo the password',
		async () => {
			const base = connectionConfig();
			const error = await openStore({
				...base,
				password: 'definitely-wrong-pw',
				schema: testSchema(__filename, 'pw'),
			}).catch((caught: unknown) => caught);
			expect(error).toBeInstanceOf(DatabaseUnavailableError);
			expect((error as Error).message).toMatch(/password/i);
			expect(
				JSON.stringify({
					message: (error as Error).message,
					fix: (error as DatabaseUnavailableError).fix,
				}),
			).not.toContain('definitely-wrong-pw');
		},
	);

	it('a database that does not exist is named as such', async () => {
		const error = await openStore({
			...connectionConfig(),
			database: 'no_such_database_xyz',
			schema: testSchema(__filename, 'db'),
		}).catch((caught: unknown) => caught);
		expect(error).toBeInstanceOf(DatabaseUnavailableError);
		expect((error as Error).message).toMatch(/does not exist/);
		expect((error as DatabaseUnavailableError).httpStatus).toBe(503);
	});

	it('an unreachable server is a 503-class error, and a later call can succeed (nothing cached)', async () => {
		const port = await freePort();
		const config = {
			...connectionConfig(),
			port,
			schema: testSchema(__filename, 'down'),
			connectionTimeoutMs: 2000,
		};
		const error = await openStore(config).catch((caught: unknown) => caught);
		expect(error).toBeInstanceOf(DatabaseUnavailableError);
		expect((error as Error).message).toMatch(/unreachable/);
	});

	it('while migration 0016 waits for two running jobs of one ordering key, the store opens on the schema before it, those jobs can finish, and a later use applies it', async () => {
		const schema = testSchema(__filename, 'deferred');
		const admin = newPool(2);
		try {
			await dropSchema(admin, schema);
			await schemaAtMigration(admin, schema, 15);
			const { rows: pair } = await admin.query<{ id: string; attempt_id: string }>(
				`INSERT INTO "${schema}".jobs (id, queue, payload, status, attempts, attempt_id, lease_until, ordering_key)
				SELECT gen_random_uuid(), 'orders', '{}', 'running', 1, gen_random_uuid(), now() + interval '1 minute', 'customer-7'
				FROM generate_series(1, 2) RETURNING id, attempt_id`,
			);
			const config = { ...connectionConfig(), schema };
			const applied = async () =>
				(await admin.query(`SELECT max(id)::int AS id FROM "${schema}".migrations`)).rows[0].id;

			for (const autoMigrate of [true, false]) {
				resetMigrationCache();
				const store = await openStore({ ...config, autoMigrate });
				expect(await applied()).toBe(15);
				ok((await store.enqueue([{ queue: 'other', payload: {} }]))[0]);
			}
			const store = await openStore(config);
			const results = await store.complete(
				pair.map((job) => ({
					jobId: job.id,
					attemptId: job.attempt_id,
					outcome: 'succeeded' as const,
				})),
			);
			expect(results.map((result) => ok(result).applied)).toEqual([true, true]);

			resetMigrationCache();
			await openStore(config);
			expect(await applied()).toBe(loadMigrations().at(-1)!.id);
		} finally {
			await dropSchema(admin, schema);
			await admin.end();
		}
	});
});

describe('idle pools', () => {
	const MINUTE = 60_000;
	let offset = 0;
	const realNow = Date.now.bind(Date);
	beforeEach(() => {
		offset = 0;
		jest.spyOn(Date, 'now').mockImplementation(() => realNow() + offset);
	});
	afterEach(() => {
		jest.restoreAllMocks();
	});

	/** A config of its own per test, so that no other test's pool is in play. */
	const configFor = (name: string) =>
		connectionConfig(undefined, { applicationName: `durable-jobs idle pools ${name}` });
	/** What another node does on its first use: ask for a pool, which sweeps idle ones first. */
	const anotherNodeRuns = () => getPool(configFor('another node'));

	it('a pool nobody asked for or queried in 5 minutes is closed on the next use of another', async () => {
		const pool = getPool(configFor('unused'));
		await pool.query('SELECT 1');
		offset = 6 * MINUTE;
		anotherNodeRuns();
		expect(pool.ending).toBe(true);
		const again = getPool(configFor('unused'));
		expect(again).not.toBe(pool);
		expect((await again.query('SELECT 1 AS one')).rows[0].one).toBe(1);
	});

	it('every query counts as a use: a store that keeps its pool and queries it is never closed under it', async () => {
		const pool = getPool(configFor('queried'));
		for (let minute = 4; minute <= 20; minute += 4) {
			offset = minute * MINUTE;
			await pool.query('SELECT 1');
			offset += 3 * MINUTE;
			anotherNodeRuns();
			expect(pool.ending).toBe(false);
		}
	});

	it('a held pool stays open however long it idles, and idles from when it is let go', async () => {
		const pool = getPool(configFor('held'));
		const letGo = holdPool(pool);
		offset = 24 * 60 * MINUTE;
		anotherNodeRuns();
		expect(pool.ending).toBe(false);
		expect(getPool(configFor('held'))).toBe(pool);
		offset += 10 * MINUTE;
		letGo();
		letGo();
		offset += 4 * MINUTE;
		anotherNodeRuns();
		expect(pool.ending).toBe(false);
		offset += 2 * MINUTE;
		anotherNodeRuns();
		expect(pool.ending).toBe(true);
	});

	it('two holders: the pool stays open until both let go', async () => {
		const pool = getPool(configFor('two holders'));
		const first = holdPool(pool);
		const second = holdPool(pool);
		first();
		offset = 60 * MINUTE;
		anotherNodeRuns();
		expect(pool.ending).toBe(false);
		second();
		offset += 6 * MINUTE;
		anotherNodeRuns();
		expect(pool.ending).toBe(true);
	});
});
