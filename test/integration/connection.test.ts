import {
	DatabaseUnavailableError,
	closeAllPools,
	getPool,
	cachedPoolCount,
	openStore,
	poolKey,
} from '../../src/core';
import { connectionConfig, testSchema } from '../helpers/db';
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
});
