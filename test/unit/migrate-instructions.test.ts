import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import pg from 'pg';

import { DurableJobsPostgresApi } from '../../credentials/DurableJobsPostgresApi.credentials';
import { migrateCommand } from '../../src/core/connectionTest';
import { INSTALLED_CLI } from '../../src/core/defaults';
import { DurableJobsError } from '../../src/core/errors';
import type { Executor } from '../../src/core/executor';
import type { ConnectionConfig } from '../../src/core/pool';
import { tokenSecret } from '../../src/core/tokens';

/**
 * What the package tells a user who applies the migrations by hand, or whose schema lost its
 * status token secret: where to run the command (the installed version, not the latest from
 * npm), on which server and schema, and a fix that works.
 */

const server: ConnectionConfig = {
	host: 'db.internal',
	port: 5433,
	database: 'n8n_jobs',
	user: 'n8n_runtime',
	password: 'pw-must-not-leak',
};

/** The DATABASE_URL of a command, read back the way the CLI's pg.Pool reads it. */
function readBack(command: string) {
	const url = /DATABASE_URL=(\S+)/.exec(command)?.[1];
	expect(url).toBeDefined();
	// Nothing a shell would expand or split: the command can be pasted as it is.
	expect(url).toMatch(/^[A-Za-z0-9%._~:/@[\]?=-]+$/);
	const client = new pg.Client({ connectionString: url });
	return {
		host: client.host,
		port: client.port,
		database: client.database,
		user: client.user,
		ssl: (client as unknown as { ssl: unknown }).ssl,
	};
}

describe('migrateCommand (the credential Test names it when migrations are missing)', () => {
	it('runs the installed version, on the credential server and database, for its schema', () => {
		const command = migrateCommand(server, 'billing_jobs');
		expect(command).toBe(
			'cd ~/.n8n/nodes && DATABASE_URL=postgres://USER:PASSWORD@db.internal:5433/n8n_jobs node node_modules/n8n-nodes-durable-jobs/dist/src/cli.js migrate --schema billing_jobs',
		);
		expect(command).not.toContain('pw-must-not-leak');
		expect(command).not.toContain('n8n_runtime');
		expect(readBack(command)).toEqual({
			host: 'db.internal',
			port: 5433,
			database: 'n8n_jobs',
			user: 'USER',
			ssl: false,
		});
	});

	it("names the package's own command, the one npm links as its bin", () => {
		const { name, bin } = JSON.parse(
			readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8'),
		) as { name: string; bin: Record<string, string> };
		expect(INSTALLED_CLI).toBe(`node node_modules/${name}/${bin[name]}`);
	});

	it("maps the credential's SSL modes to the URL's", () => {
		expect(readBack(migrateCommand({ ...server, ssl: 'require' }, 'durable_jobs')).ssl).toEqual({
			rejectUnauthorized: false,
		});
		const verify = migrateCommand({ ...server, ssl: 'verify' }, 'durable_jobs');
		expect(verify).not.toContain('NODE_EXTRA_CA_CERTS');
		expect(readBack(verify).ssl).toEqual({});
		const withCa = migrateCommand(
			{ ...server, ssl: 'verify', caCertificate: '-----BEGIN CERTIFICATE-----' },
			'durable_jobs',
		);
		expect(withCa).toContain('&& NODE_EXTRA_CA_CERTS=ca.pem DATABASE_URL=');
		expect(withCa).toMatch(/\(ca\.pem: the credential's CA Certificate saved to a file\)$/);
		expect(readBack(withCa).ssl).toEqual({});
	});

	it('keeps IPv6 addresses, socket folders and unusual database names intact', () => {
		for (const [host, database] of [
			['::1', 'n8n_jobs'],
			['/var/run/postgresql', 'n8n_jobs'],
			['db.internal', "jobs (o'brien) *2026*!"],
		]) {
			expect(readBack(migrateCommand({ ...server, host, database }, 'durable_jobs'))).toMatchObject(
				{ host, database, port: 5433 },
			);
		}
	});
});

describe('the Auto-Migrate field', () => {
	it('says where to run the migrations and for which schema', () => {
		const autoMigrate = new DurableJobsPostgresApi().properties.find(
			(property) => property.name === 'autoMigrate',
		);
		expect(autoMigrate?.description).toContain(
			'cd ~/.n8n/nodes && DATABASE_URL=postgres://… node node_modules/n8n-nodes-durable-jobs/dist/src/cli.js migrate --schema <this Schema>',
		);
	});
});

describe('a schema without its status token secret', () => {
	it('answers 503 with a fix that makes a new secret (migrating again would not)', async () => {
		const db = { pool: {}, run: async () => [] } as unknown as Executor;
		const error = (await tokenSecret(db, 'billing_jobs').catch(
			(e: unknown) => e,
		)) as DurableJobsError;
		expect(error).toBeInstanceOf(DurableJobsError);
		expect(error.code).toBe('schema_incomplete');
		expect(error.httpStatus).toBe(503);
		expect(error.message).toBe('Schema "billing_jobs" has no status token secret');
		expect(error.fix).toContain('Running the migrations again does not bring it back');
		expect(error.fix).toContain(
			`INSERT INTO "billing_jobs".settings (name, value) VALUES ('status_token_secret', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'))`,
		);
	});

	it('is not cached: once the secret is back, the next read finds it', async () => {
		const secret = Buffer.from('0123456789abcdef');
		let rows: { value: Buffer }[] = [];
		const db = { pool: {}, run: async () => rows } as unknown as Executor;
		await expect(tokenSecret(db, 'billing_jobs')).rejects.toMatchObject({
			code: 'schema_incomplete',
		});
		rows = [{ value: secret }];
		await expect(tokenSecret(db, 'billing_jobs')).resolves.toBe(secret);
	});
});
