/**
 * The package's command line (src/cli.ts), run as a user runs it, on a database of its own: it
 * migrates the schema it is given, refuses what it does not know without touching anything,
 * names DATABASE_URL (not the n8n credential) in connection errors, and exits with 75 when a
 * migration waits.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';

import pg from 'pg';

import { loadMigrations, migrate } from '../../src/core';
import { databaseUrl, newPool, schemaAtMigration } from '../helpers/db';

const database = `djt_cli_${process.pid}`;
const root = join(__dirname, '..', '..');
let admin: pg.Pool;
let db: pg.Pool;

function urlOf(name: string, user?: string): string {
	const url = new URL(databaseUrl());
	url.pathname = `/${name}`;
	if (user) url.username = user;
	return url.toString();
}

beforeAll(async () => {
	admin = newPool(1);
	await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
	await admin.query(`CREATE DATABASE ${database}`);
	db = new pg.Pool({ connectionString: urlOf(database), max: 2 });
});

afterAll(async () => {
	await db?.end();
	await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
	await admin.end();
});

interface Run {
	status: number | null;
	stdout: string;
	stderr: string;
}

/** Runs the command line with `args`, on the test's database unless `env` says otherwise. */
async function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
	const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], {
		cwd: root,
		env: { ...process.env, DATABASE_URL: urlOf(database), ...env },
		stdio: ['ignore', 'pipe', 'pipe'],
	});
	let stdout = '';
	let stderr = '';
	child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
	child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
	const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
	return { status, stdout, stderr };
}

/** The schemas of the test's database, besides PostgreSQL's own. */
async function schemas(): Promise<string[]> {
	const { rows } = await db.query<{ nspname: string }>(
		`SELECT nspname FROM pg_namespace
		WHERE nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('information_schema', 'public') ORDER BY 1`,
	);
	return rows.map((row) => row.nspname);
}

async function appliedCount(schema: string): Promise<number> {
	return (await db.query(`SELECT count(*)::int AS n FROM "${schema}".migrations`)).rows[0].n;
}

describe('n8n-nodes-durable-jobs migrate', () => {
	it('--schema=NAME and --schema NAME migrate that schema, not the default one', async () => {
		const first = await cli(['migrate', '--schema=cli_equals']);
		expect(first).toMatchObject({ status: 0, stderr: '' });
		expect(first.stdout).toContain('Applied to schema "cli_equals": 0001_jobs.sql');
		const second = await cli(['migrate', '--schema', 'cli_spaced']);
		expect(second.status).toBe(0);
		expect(await schemas()).toEqual(['cli_equals', 'cli_spaced']);
		expect(await appliedCount('cli_equals')).toBe(loadMigrations().length);
		expect(await cli(['--schema', 'cli_spaced', 'migrate'])).toMatchObject({
			status: 0,
			stdout: 'Schema "cli_spaced" is up to date\n',
		});
	}, 60_000);

	it('refuses unknown options and extra arguments with the usage on stderr and exit 2, touching nothing', async () => {
		const before = await schemas();
		for (const args of [
			['migrate', '-s', 'cli_other'],
			['migrate', '--shcema', 'cli_other'],
			['migrate', '--schema'],
			['migrate', '--schema=', 'x'],
			['migrate', 'cli_other'],
			['migrate', '--schema', 'cli_other', '--schema', 'cli_third'],
			['migrate', '--schema', 'Not-Valid'],
			['migrat'],
			[],
		]) {
			const run = await cli(args);
			expect({ args, status: run.status, stdout: run.stdout }).toEqual({
				args,
				status: 2,
				stdout: '',
			});
			expect(run.stderr).toContain('Usage: n8n-nodes-durable-jobs <command>');
		}
		expect(await schemas()).toEqual(before);
	}, 120_000);

	it('--help or -h anywhere prints the usage on stdout and exits 0, touching nothing', async () => {
		const before = await schemas();
		for (const args of [
			['--help'],
			['migrate', '--help'],
			['migrate', '--schema', 'cli_help', '-h'],
			['help'],
		]) {
			const run = await cli(args);
			expect({ args, status: run.status, stderr: run.stderr }).toEqual({
				args,
				status: 0,
				stderr: '',
			});
			expect(run.stdout).toContain('Usage: n8n-nodes-durable-jobs <command>');
			expect(run.stdout).toContain('75');
		}
		expect(await schemas()).toEqual(before);
	}, 60_000);

	it('connection errors name DATABASE_URL, not the n8n credential', async () => {
		const cases: Array<[string, string]> = [
			[urlOf(`${database}_missing`), 'The database does not exist'],
			[
				urlOf(database, `djt_nobody_${process.pid}`),
				'PostgreSQL rejected the user name or password',
			],
			['postgres://postgres@127.0.0.1:1/postgres', 'PostgreSQL is unreachable (ECONNREFUSED)'],
		];
		for (const [url, message] of cases) {
			const run = await cli(['migrate', '--schema', 'cli_unreachable'], { DATABASE_URL: url });
			expect(run.status).toBe(1);
			expect(run.stderr).toContain(message);
			expect(run.stderr).toContain('DATABASE_URL');
			expect(run.stderr).not.toContain('credential');
		}
	}, 60_000);

	it('a migration that waits (DJ016) is printed with what to do, after what was applied, with exit 75', async () => {
		await schemaAtMigration(db, 'cli_waits', 14);
		await db.query(
			`INSERT INTO cli_waits.jobs (id, queue, payload, status, attempts, attempt_id, lease_until, ordering_key)
			SELECT gen_random_uuid(), 'orders', '{}', 'running', 1, gen_random_uuid(), now() + interval '1 minute', 'customer-7'
			FROM generate_series(1, 2)`,
		);
		const run = await cli(['migrate', '--schema', 'cli_waits']);
		expect(run.status).toBe(75);
		expect(run.stdout).toBe('Applied to schema "cli_waits": 0015_column_domains.sql\n');
		expect(run.stderr).toContain(
			'Migration 0016 waits: 2 jobs of queue "orders" with ordering key "customer-7" are running at once (schema "cli_waits")',
		);
		expect(run.stderr).toContain('The nodes work without it meanwhile');
		expect(run.stderr).toContain('Run this command again once that is over');
		expect(await appliedCount('cli_waits')).toBe(15);
	}, 60_000);

	it("a schema migrated by a newer version is said so; another application's is refused, naming --schema", async () => {
		await migrate(db, 'cli_newer');
		await db.query(`INSERT INTO cli_newer.migrations (id, name) VALUES (19, '0019_later.sql')`);
		const newer = await cli(['migrate', '--schema', 'cli_newer']);
		expect(newer.status).toBe(0);
		expect(newer.stdout).toBe('Schema "cli_newer" is up to date\n');
		expect(newer.stderr).toContain('was migrated by a newer version of n8n-nodes-durable-jobs');
		expect(newer.stderr).toContain('0019_later.sql');

		await db.query('CREATE SCHEMA cli_n8n');
		await db.query(
			'CREATE TABLE cli_n8n.migrations (id serial PRIMARY KEY, "timestamp" bigint NOT NULL, name varchar NOT NULL)',
		);
		await db.query(
			`INSERT INTO cli_n8n.migrations ("timestamp", name) SELECT i, 'Migration' || i FROM generate_series(1, 40) AS i`,
		);
		const foreign = await cli(['migrate', '--schema', 'cli_n8n']);
		expect(foreign.status).toBe(1);
		expect(foreign.stdout).toBe('');
		expect(foreign.stderr).toContain('Schema "cli_n8n" is not a Durable Jobs schema');
		expect(foreign.stderr).toContain('Choose another schema with --schema');
		expect(
			(await db.query(`SELECT to_regclass('cli_n8n.jobs') IS NULL AS absent`)).rows[0].absent,
		).toBe(true);
	}, 60_000);
});

describe('n8n-nodes-durable-jobs sql', () => {
	it('prints the script of the schema it is given', async () => {
		const run = await cli(['sql', '--schema=cli_script'], { DATABASE_URL: '' });
		expect(run.status).toBe(0);
		expect(run.stdout).toContain('INSERT INTO "cli_script".migrations (id, name) VALUES (1,');
		expect(run.stdout).not.toContain('durable_jobs".');
		expect((await cli(['sql', '-x'])).status).toBe(2);
	}, 60_000);
});
