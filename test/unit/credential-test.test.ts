import type { ICredentialTestFunctions } from 'n8n-workflow';

import { credentialToConfig } from '../../nodes/shared/connection';
import { testDurableJobsConnection } from '../../nodes/shared/credentialTest';
import { freePort } from '../../scripts/lib/postgres';

const testFunctions = {
	logger: {
		debug: () => undefined,
		info: () => undefined,
		warn: () => undefined,
		error: () => undefined,
	},
	helpers: {},
} as unknown as ICredentialTestFunctions;

async function check(data: Record<string, unknown>) {
	return await testDurableJobsConnection.call(testFunctions, {
		id: 'cred-1',
		name: 'Durable Jobs Postgres',
		type: 'durableJobsPostgresApi',
		data: data as never,
	});
}

describe('credential test messages (no database needed)', () => {
	it('an unreachable host/port says so and what to check, without echoing the password', async () => {
		const port = await freePort();
		const result = await check({
			host: '127.0.0.1',
			port,
			database: 'postgres',
			user: 'postgres',
			password: 'pw-must-not-leak',
			schema: 'durable_jobs',
		});
		expect(result.status).toBe('Error');
		expect(result.message).toMatch(/unreachable/);
		expect(result.message).toMatch(/Host and Port/);
		expect(result.message).not.toContain('pw-must-not-leak');
	});

	it('an invalid schema name is named before any connection is attempted', async () => {
		for (const schema of ['Bad-Schema', 'x; DROP TABLE jobs', 'pg_catalog', 'public']) {
			// Port 1 would refuse: a connection attempt would answer "unreachable" instead.
			const result = await check({
				host: '127.0.0.1',
				port: 1,
				database: 'postgres',
				user: 'postgres',
				schema,
			});
			expect(result.status, schema).toBe('Error');
			expect(result.message, schema).toContain(`"${schema}"`);
			expect(result.message, schema).toMatch(/schema/);
			expect(result.message, schema).not.toMatch(/unreachable/);
		}
	});

	it('maps the credential fields to the core config with safe defaults', () => {
		expect(credentialToConfig({})).toMatchObject({
			host: 'localhost',
			port: 5432,
			database: 'postgres',
			user: 'postgres',
			password: undefined,
			ssl: 'disable',
			maxConnections: 10,
			schema: 'durable_jobs',
			autoMigrate: true,
			preparedStatements: true,
			durableLeases: false,
		});
		expect(credentialToConfig({ preparedStatements: false }).preparedStatements).toBe(false);
		expect(credentialToConfig({ durableLeases: true }).durableLeases).toBe(true);
		expect(
			credentialToConfig({
				ssl: 'verify',
				caCertificate: 'PEM',
				port: '6543',
				maxConnections: 3,
				schema: 'jobs_x',
				autoMigrate: false,
				password: 'p',
			}),
		).toMatchObject({
			ssl: 'verify',
			caCertificate: 'PEM',
			port: 6543,
			maxConnections: 3,
			schema: 'jobs_x',
			autoMigrate: false,
			password: 'p',
		});
		expect(credentialToConfig({ ssl: 'bogus', schema: '' })).toMatchObject({
			ssl: 'disable',
			schema: 'durable_jobs',
		});
	});
});
