import type { ICredentialDataDecryptedObject, ICredentialTestFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import pg from 'pg';

import { resetMigrationCache } from '../../src/core';
import { Executor } from '../../src/core/executor';
import { JobEnqueue } from '../../nodes/JobEnqueue/JobEnqueue.node';
import { testDurableJobsConnection } from '../../nodes/shared/credentialTest';
import { freePort } from '../../scripts/lib/postgres';
import { databaseUrl, schemaAtMigration, serverOf, testSchema, useTestSchema } from '../helpers/db';
import { credentialFor, nodeRunner, webhookItem } from '../helpers/n8n-context';

const missingSchema = testSchema(__filename, 'never-migrated');
const schemaBefore16 = testSchema(__filename, 'before-0016');
const { schema, pool } = useTestSchema(__filename, {
	otherSchemas: [missingSchema, schemaBefore16],
	closeCachedPools: true,
});

const testFunctions = {
	logger: {
		debug: () => undefined,
		info: () => undefined,
		warn: () => undefined,
		error: () => undefined,
	},
	helpers: {},
} as unknown as ICredentialTestFunctions;

async function check(data: ICredentialDataDecryptedObject) {
	return await testDurableJobsConnection.call(testFunctions, {
		id: 'cred-1',
		name: 'Durable Jobs Postgres',
		type: 'durableJobsPostgresApi',
		data,
	});
}

beforeAll(() => {
	resetMigrationCache();
});

describe('credential test against a real server', () => {
	it('a database that does not exist is named as such', async () => {
		const result = await check(
			credentialFor(databaseUrl(), schema, { database: 'no_such_database_djt' }),
		);
		expect(result.status).toBe('Error');
		expect(result.message).toMatch(/does not exist/);
		expect(result.message).toMatch(/Check Database in the credential/);
	});

	it('missing migrations with Auto-Migrate off says how to apply them', async () => {
		const result = await check(credentialFor(databaseUrl(), missingSchema, { autoMigrate: false }));
		expect(result.status).toBe('Error');
		expect(result.message).toContain(`schema "${missingSchema}" is missing migrations`);
		expect(result.message).toMatch(/Auto-Migrate is off/);
		// Where and how to run it: the installed version, this credential's server and schema.
		const { host, port, database } = serverOf(databaseUrl());
		expect(result.message).toContain(
			`cd ~/.n8n/nodes && DATABASE_URL=postgres://USER:PASSWORD@${String(host)}:${String(port)}/${String(database)} node node_modules/n8n-nodes-durable-jobs/dist/src/cli.js migrate --schema ${missingSchema}`,
		);
		// The test itself never creates anything.
		const { rows } = await pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [
			missingSchema,
		]);
		expect(rows).toEqual([]);
	});

	it('with Auto-Migrate on, a new schema is OK (created on first use); once migrated it is up to date', async () => {
		expect(await check(credentialFor(databaseUrl(), schema))).toEqual({
			status: 'OK',
			message: `Connected; schema "${schema}" will be created or upgraded on first use`,
		});
		await nodeRunner(schema).run(new JobEnqueue(), { items: [{ a: 1 }] });
		expect(await check(credentialFor(databaseUrl(), schema, { autoMigrate: false }))).toEqual({
			status: 'OK',
			message: `Connected; schema "${schema}" is up to date`,
		});
	});

	it('a user whose transactions default to repeatable read is told to set read committed', async () => {
		const role = `djt_rr_${process.pid}`;
		await pool.query(`DROP ROLE IF EXISTS "${role}"`);
		await pool.query(`CREATE ROLE "${role}" LOGIN SUPERUSER PASSWORD 'rr-pw'`);
		await pool.query(`ALTER ROLE "${role}" SET default_transaction_isolation = 'repeatable read'`);
		try {
			const result = await check(
				credentialFor(databaseUrl(), schema, { user: role, password: 'rr-pw' }),
			);
			expect(result.status).toBe('Error');
			expect(result.message).toMatch(/default to "repeatable read"/);
			expect(result.message).toMatch(/default_transaction_isolation = 'read committed'/);
			// The package's own transactions ask for read committed whatever the default.
			const rolePool = new pg.Pool({
				...serverOf(databaseUrl()),
				user: role,
				password: 'rr-pw',
				max: 1,
			});
			try {
				const levels = await new Executor(rolePool, false).transaction(async (tx) => [
					...(await tx.run<{ level: string }>({
						text: `SELECT current_setting('transaction_isolation') AS level`,
						values: [],
					})),
				]);
				expect(levels).toEqual([{ level: 'read committed' }]);
				const { rows } = await rolePool.query(
					`SELECT current_setting('transaction_isolation') AS level`,
				);
				expect(rows).toEqual([{ level: 'repeatable read' }]);
			} finally {
				await rolePool.end();
			}
		} finally {
			await pool.query(`DROP ROLE IF EXISTS "${role}"`);
		}
	});
});

describe('node executions with a broken connection', () => {
	it('missing migrations with Auto-Migrate off: the node fails with the fix, and creates nothing', async () => {
		const nodes = nodeRunner(missingSchema, {
			credential: credentialFor(databaseUrl(), missingSchema, { autoMigrate: false }),
		});
		const error = (await nodes
			.run(new JobEnqueue(), { items: [{ a: 1 }] })
			.catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.message).toContain(`Schema "${missingSchema}" is missing migrations`);
		expect(error.description).toMatch(/Turn on "Auto-Migrate".*Field: autoMigrate/);
		const { rows } = await pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [
			missingSchema,
		]);
		expect(rows).toEqual([]);
	});

	it("only migrations the package works without missing, Auto-Migrate off: the node runs, and n8n's log says which and how to apply them", async () => {
		await schemaAtMigration(pool, schemaBefore16, 15);
		const nodes = nodeRunner(schemaBefore16, {
			credential: credentialFor(databaseUrl(), schemaBefore16, { autoMigrate: false }),
		});
		const run = nodes.create(new JobEnqueue(), { items: [{ a: 1 }] });
		const result = await run.run();
		expect(result.output('main')[0].json).toMatchObject({ status: 'queued' });
		const warnings = run.logs.filter((entry) => entry.level === 'warn');
		expect(warnings).toHaveLength(1);
		for (const part of [
			'0016_ordering_key_runs_alone.sql',
			'0017_running_by_lease_end.sql',
			'0018_running_by_attempt_lease_end.sql',
			'Auto-Migrate is off',
			`cd ~/.n8n/nodes && DATABASE_URL=postgres://USER:PASSWORD@HOST:PORT/DATABASE node node_modules/n8n-nodes-durable-jobs/dist/src/cli.js migrate --schema ${schemaBefore16}`,
		])
			expect(warnings[0].message).toContain(part);
	});

	it('database unreachable: with the error output each request gets a 503 item (the receiver answers 503, never 202)', async () => {
		const port = await freePort();
		const nodes = nodeRunner(schema, {
			credential: credentialFor(databaseUrl(), schema, { port, password: 'pw-must-not-leak' }),
		});
		const result = await nodes.run(new JobEnqueue(), {
			items: [webhookItem({ a: 1 }, { 'idempotency-key': 'down-1' }), webhookItem({ a: 2 })],
			onError: 'continueErrorOutput',
		});
		expect(result.routing()).toEqual({ Success: [], Error: [0, 1] });
		for (const item of result.output('Error')) {
			expect(item.json).toMatchObject({
				details: { code: 'database_unavailable', http_status: 503 },
			});
			expect(item.json).not.toHaveProperty('job_id');
		}
		expect(JSON.stringify(result.output('Error').map((item) => item.json))).not.toContain(
			'pw-must-not-leak',
		);

		const error = (await nodes
			.run(new JobEnqueue(), { items: [{ a: 1 }] })
			.catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.description).toMatch(/Check that PostgreSQL is running/);
		expect(
			JSON.stringify({
				message: error.message,
				description: error.description,
				messages: error.messages,
			}),
		).not.toContain('pw-must-not-leak');
	});
});
