/**
 * .ci/run, sourced (it then only defines its functions): the machine's PostgreSQL becomes the
 * tests' DATABASE_URL only when a real connection as postgres works, with psql or, without
 * psql, with node and pg, so a server that asks for a password the URL does not have (stock
 * Debian on 127.0.0.1) leaves the tests to the embedded PostgreSQL; as root without a user
 * postgres it creates one (the embedded PostgreSQL runs as that user); and it still runs the
 * README's test command, after npm ci and the database decision.
 */
import { spawnSync } from 'node:child_process';
import {
	chmodSync,
	mkdirSync,
	mkdtempSync,
	readFileSync,
	rmSync,
	symlinkSync,
	writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { startEmbeddedPostgres, type EmbeddedServer } from '../../scripts/lib/postgres';

const REPO_DIR = resolve(__dirname, '..', '..');
const CI_RUN = join(REPO_DIR, '.ci', 'run');

let server: EmbeddedServer;
let dir: string;

beforeAll(async () => {
	// A server that asks for a password, as stock Debian's does on 127.0.0.1.
	server = await startEmbeddedPostgres();
	dir = mkdtempSync(join(tmpdir(), 'scripts-ci-run-'));
}, 120_000);

afterAll(async () => {
	await server?.destroy();
	rmSync(dir, { recursive: true, force: true });
});

/** Runs `command` in bash after sourcing .ci/run, in the repository (where pg resolves). */
function sourced(command: string, env: NodeJS.ProcessEnv = {}) {
	const result = spawnSync('/bin/bash', ['-c', `source ${JSON.stringify(CI_RUN)}; ${command}`], {
		cwd: REPO_DIR,
		env: { ...process.env, PGPASSWORD: '', ...env },
		encoding: 'utf8',
		timeout: 60_000,
	});
	return { code: result.status, stdout: result.stdout.trim(), stderr: result.stderr.trim() };
}

/** A PATH with node and the few tools the function uses, and no psql. */
function pathWithoutPsql(): string {
	const bin = join(dir, 'no-psql-bin');
	mkdirSync(bin, { recursive: true });
	for (const [name, target] of [
		['node', process.execPath],
		['head', '/usr/bin/head'],
		['sed', '/bin/sed'],
	]) {
		try {
			symlinkSync(target, join(bin, name));
		} catch {
			// Made by an earlier test.
		}
	}
	return bin;
}

const hasPsql = spawnSync('bash', ['-c', 'command -v psql']).status === 0;

describe('usable_local_postgres_url', () => {
	const checkers: Array<[string, () => NodeJS.ProcessEnv]> = [
		['with psql', () => ({})],
		['without psql (node and pg)', () => ({ PATH: pathWithoutPsql() })],
	];
	for (const [name, env] of checkers) {
		const maybe = name === 'with psql' && !hasPsql ? it.skip : it;

		maybe(`${name}: a server that asks for a password postgres has not: no URL, and why`, () => {
			const result = sourced(`usable_local_postgres_url ${server.port}`, env());
			expect(result.code).toBe(1);
			expect(result.stdout).toBe('');
			expect(result.stderr).toMatch(
				new RegExp(`^connecting to 127\\.0\\.0\\.1:${server.port} as postgres failed: .*password`),
			);
		});

		maybe(`${name}: a connection that works: the URL`, () => {
			const result = sourced(`usable_local_postgres_url ${server.port}`, {
				...env(),
				PGPASSWORD: server.password,
			});
			expect(result).toEqual({
				code: 0,
				stdout: `postgres://postgres@127.0.0.1:${server.port}/postgres`,
				stderr: '',
			});
		});
	}
});

describe('ensure_postgres_user', () => {
	/** Stand-ins for id (root or not, a user postgres or not) and useradd (records its call). */
	function fakeTools(
		uid: number,
		postgresExists: boolean,
	): { env: NodeJS.ProcessEnv; calls: () => string } {
		const bin = mkdtempSync(join(dir, 'tools-'));
		const log = join(bin, 'useradd.log');
		const script = (name: string, body: string) => {
			writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`);
			chmodSync(join(bin, name), 0o755);
		};
		script(
			'id',
			`if [ "$1" = -u ] && [ -z "$2" ]; then echo ${uid}; exit 0; fi\n${postgresExists ? 'echo 101' : 'exit 1'}`,
		);
		script('useradd', `echo "$@" >> '${log}'`);
		return {
			env: { PATH: `${bin}:${process.env.PATH}` },
			calls: () => {
				try {
					return readFileSync(log, 'utf8').trim();
				} catch {
					return '';
				}
			},
		};
	}

	it('as root without a user postgres: creates it as a system user without a home', () => {
		const tools = fakeTools(0, false);
		const result = sourced('ensure_postgres_user', tools.env);
		expect(result.code).toBe(0);
		expect(tools.calls()).toMatch(/^--system .*--no-create-home .*postgres$/);
	});

	it('as root with a user postgres, or not as root: creates nothing', () => {
		for (const tools of [fakeTools(0, true), fakeTools(1000, false)]) {
			expect(sourced('ensure_postgres_user', tools.env).code).toBe(0);
			expect(tools.calls()).toBe('');
		}
	});
});

it('main still runs npm ci, then decides on the database, then runs npm test', () => {
	const main = sourced('declare -f main').stdout;
	const npmCi = main.indexOf('npm ci');
	const decision = main.indexOf('usable_local_postgres_url');
	const npmTest = main.indexOf('npm test');
	expect(npmCi).toBeGreaterThan(0);
	expect(decision).toBeGreaterThan(npmCi);
	expect(npmTest).toBeGreaterThan(decision);
	expect(main).toMatch(/ensure_postgres_user/);
});
