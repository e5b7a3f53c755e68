/**
 * A DATABASE_URL whose role connects but may not create what the caller creates (n8n's own
 * database, a schema for the jobs; roles for some tests) is refused up front, with one line
 * naming DATABASE_URL, what the role lacks, the grant that fixes it and the embedded
 * PostgreSQL, before the demo downloads or starts anything.
 *
 * The demo here never gets far enough to download: `npm` is a stand-in that fails, and
 * N8N_NODE_BINARY names a stand-in Node 24, in a cache folder of the test's own.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
	chmodSync,
	existsSync,
	mkdirSync,
	mkdtempSync,
	readdirSync,
	rmSync,
	writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import pg from 'pg';

import {
	checkDatabaseUrl,
	DatabaseUrlError,
	withDatabase,
	type DatabaseNeeds,
} from '../../scripts/lib/database-url';
import { ENVIRONMENT_NEEDS } from '../../scripts/lib/environment';
import { startDemo, type DemoRun } from '../e2e/demo-run';

const suffix = randomBytes(4).toString('hex');
const role = `dj_rights_${suffix}`;
const database = `dj_rights_${suffix}`;
const password = 'dj-rights-pw';
let admin: pg.Client;
let roleUrl: string;

beforeAll(async () => {
	admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
	await admin.connect();
	await admin.query(`CREATE ROLE "${role}" LOGIN NOCREATEDB PASSWORD '${password}'`);
	// A database of its own: nobody but its owner may create schemas in it.
	await admin.query(`CREATE DATABASE "${database}"`);
	const url = new URL(withDatabase(process.env.DATABASE_URL!, database));
	url.username = role;
	url.password = password;
	roleUrl = url.toString();
});

afterAll(async () => {
	await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
	await admin.query(`DROP ROLE IF EXISTS "${role}"`);
	await admin.end();
});

async function refusal(needs: DatabaseNeeds): Promise<string> {
	const error = await checkDatabaseUrl(roleUrl, { needs }).then(
		() => undefined,
		(caught: unknown) => caught,
	);
	expect(error).toBeInstanceOf(DatabaseUrlError);
	const message = (error as Error).message;
	expect(message).not.toContain('\n');
	expect((error as Error).stack).toBe(message);
	expect(message).not.toContain(password);
	expect(message).toMatch(
		new RegExp(`^DATABASE_URL \\(postgres://${role}:\\*\\*\\*@[^)]+/${database}\\): `),
	);
	expect(message).toMatch(/, or unset DATABASE_URL to use an embedded PostgreSQL\.$/);
	return message;
}

describe('the rights of the role of DATABASE_URL, checked up front', () => {
	it('no CREATEDB and no CREATE on the database: both are named, with the grants', async () => {
		const message = await refusal(ENVIRONMENT_NEEDS);
		expect(message).toContain(
			`the role "${role}" connects but may not create databases (it has neither CREATEDB nor SUPERUSER) and may not create schemas in the database "${database}" (no CREATE privilege on it), which it needs for n8n's own database and the jobs' own schema.`,
		);
		expect(message).toContain(
			`Grant it (as a superuser: ALTER ROLE "${role}" CREATEDB; GRANT CREATE ON DATABASE "${database}" TO "${role}")`,
		);
	});

	it('CREATEDB granted: only the schema is missing; both granted: the check passes', async () => {
		await admin.query(`ALTER ROLE "${role}" CREATEDB`);
		const message = await refusal(ENVIRONMENT_NEEDS);
		expect(message).not.toContain('CREATEDB');
		expect(message).toContain(`GRANT CREATE ON DATABASE "${database}" TO "${role}"`);
		await admin.query(`GRANT CREATE ON DATABASE "${database}" TO "${role}"`);
		await expect(checkDatabaseUrl(roleUrl, { needs: ENVIRONMENT_NEEDS })).resolves.toBeUndefined();
		// Without needs, connecting is all that is checked.
		await expect(checkDatabaseUrl(roleUrl)).resolves.toBeUndefined();
	});

	it('a caller that creates superuser roles (the tests) needs SUPERUSER', async () => {
		const message = await refusal({ superuser: true, purpose: 'the roles some tests create' });
		expect(message).toContain(
			`the role "${role}" connects but is not a superuser, which it needs for the roles some tests create.`,
		);
		expect(message).toContain(`ALTER ROLE "${role}" SUPERUSER`);
	});
});

describe('npm run demo with such a DATABASE_URL', () => {
	let dir: string;
	let run: DemoRun | undefined;

	beforeAll(async () => {
		await admin.query(`ALTER ROLE "${role}" NOCREATEDB`);
		dir = mkdtempSync(join(tmpdir(), 'scripts-database-rights-'));
		mkdirSync(join(dir, 'bin'));
		for (const [name, body] of [
			['node24', 'echo v24.0.0'],
			['npm', 'echo "npm must not run in this test" >&2; exit 1'],
		]) {
			writeFileSync(join(dir, 'bin', name), `#!/bin/sh\n${body}\n`);
			chmodSync(join(dir, 'bin', name), 0o755);
		}
	});

	afterAll(() => {
		if (run && run.child.exitCode === null) run.signal('SIGKILL');
		run?.dispose();
		rmSync(dir, { recursive: true, force: true });
	});

	it('ends at once with one line naming DATABASE_URL and the grant; exit code 1; nothing left', async () => {
		run = startDemo({
			env: {
				DATABASE_URL: roleUrl,
				DURABLE_JOBS_CACHE_DIR: join(dir, 'cache'),
				N8N_NODE_BINARY: join(dir, 'bin', 'node24'),
				PATH: `${join(dir, 'bin')}:${process.env.PATH}`,
			},
		});
		const { code } = await run.exited;
		const stderr = run.stderr().trim();
		expect(stderr.split('\n')).toEqual([
			expect.stringMatching(
				new RegExp(
					`^DATABASE_URL \\(.*\\): the role "${role}" connects but may not create databases .*, which it needs for n8n's own database and the jobs' own schema\\. Grant it \\(as a superuser: ALTER ROLE "${role}" CREATEDB\\)`,
				),
			),
		]);
		expect(code).toBe(1);
		expect(run.output()).not.toMatch(/downloading|building and packing/);
		expect(run.leftovers()).toEqual({ files: [], processes: [] });
	}, 60_000);

	it('npm test refuses a role that is not a superuser before it downloads n8n (n8n:install --check-test-database)', () => {
		const cache = join(dir, 'install-cache');
		const result = spawnSync(
			process.execPath,
			['--import', 'tsx', 'scripts/install-n8n.ts', '--check-test-database'],
			{
				cwd: join(__dirname, '..', '..'),
				encoding: 'utf8',
				timeout: 60_000,
				env: {
					...process.env,
					DATABASE_URL: roleUrl,
					DURABLE_JOBS_CACHE_DIR: cache,
					N8N_NODE_BINARY: join(dir, 'bin', 'node24'),
					PATH: `${join(dir, 'bin')}:${process.env.PATH}`,
				},
			},
		);
		expect(result.stderr.trim().split('\n')).toEqual([
			expect.stringMatching(
				new RegExp(
					`^DATABASE_URL \\(.*\\): the role "${role}" connects but is not a superuser, which it needs for the tests \\(some create roles, superusers among them\\)\\. Grant it \\(as a superuser: ALTER ROLE "${role}" SUPERUSER\\)`,
				),
			),
		]);
		expect(result.status).toBe(1);
		expect(result.stdout).not.toMatch(/download/i);
		expect(existsSync(cache) ? readdirSync(cache) : []).toEqual([]);
	}, 60_000);
});
