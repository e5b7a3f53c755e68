/**
 * `npm run demo` up to the point where it needs n8n: a DATABASE_URL that does not work ends it
 * at once with one line (what is wrong, that it came from DATABASE_URL, what to do) and exit
 * code 1; Ctrl-C (SIGINT to its process group) or SIGTERM while the embedded PostgreSQL starts
 * leaves no file in its temp folder and no process behind. The same with n8n running is
 * test/e2e/demo-exit.test.ts.
 */

import { startEmbeddedPostgres, type EmbeddedServer } from '../../scripts/lib/postgres';
import { freePort } from '../../scripts/lib/postgres';
import { startDemo, type DemoRun } from '../e2e/demo-run';

const runs: DemoRun[] = [];
let server: EmbeddedServer;

beforeAll(async () => {
	// A server that checks passwords (the shared test server may trust everyone).
	server = await startEmbeddedPostgres();
}, 120_000);

afterAll(async () => {
	for (const run of runs) run.dispose();
	await server?.destroy();
});

function withUrl(base: string, change: (url: URL) => void): string {
	const url = new URL(base);
	change(url);
	return url.toString();
}

async function demoWith(
	databaseUrl: string,
): Promise<{ code: number | null; stderr: string; run: DemoRun }> {
	const run = startDemo({ env: { DATABASE_URL: databaseUrl } });
	runs.push(run);
	const { code } = await run.exited;
	return { code, stderr: run.stderr().trim(), run };
}

describe('a DATABASE_URL that does not work', () => {
	const cases: Array<[string, () => Promise<string>, RegExp]> = [
		[
			'nothing listens there (ECONNREFUSED)',
			async () => `postgres://postgres@127.0.0.1:${await freePort()}/postgres`,
			/nothing accepts connections at 127\.0\.0\.1:\d+ \(connection refused/,
		],
		[
			// A server that checks passwords does not tell a client whether the role exists.
			'an unknown role',
			async () => withUrl(process.env.DATABASE_URL!, (url) => (url.username = 'dj_nobody')),
			/the user \(role\) "dj_nobody" does not exist|the password for user "dj_nobody" was rejected/,
		],
		[
			'no password where the server asks for one',
			async () => withUrl(server.url, (url) => (url.password = '')),
			/asks for a password for user "postgres", and the URL has none/,
		],
		[
			'an unknown database',
			async () =>
				withUrl(process.env.DATABASE_URL!, (url) => (url.pathname = '/dj_no_such_database')),
			/the database "dj_no_such_database" does not exist/,
		],
		[
			'a wrong password',
			async () => withUrl(server.url, (url) => (url.password = 'wrong-password')),
			/the password for user "postgres" was rejected/,
		],
		[
			'not a URL (Invalid URL)',
			async () => 'localhost:5432/jobs',
			/DATABASE_URL (is not a valid URL|starts with "localhost:\/\/")/,
		],
	];
	for (const [name, url, pattern] of cases) {
		it(`${name}: one line naming DATABASE_URL, the cause and the fix; exit code 1; nothing left`, async () => {
			const { code, stderr, run } = await demoWith(await url());
			expect(code).toBe(1);
			expect(stderr).toMatch(pattern);
			expect(stderr).toMatch(/DATABASE_URL/);
			expect(stderr).toMatch(/Fix DATABASE_URL, or unset it to use an embedded PostgreSQL\.$/);
			expect(stderr.split('\n')).toHaveLength(1);
			expect(stderr).not.toMatch(/^\s+at /m);
			expect(run.leftovers()).toEqual({ files: [], processes: [] });
		}, 60_000);
	}
});

describe('interrupted while the embedded PostgreSQL starts', () => {
	it('Ctrl-C during initdb: exit 130, the PostgreSQL folder is gone, no process is left', async () => {
		const run = startDemo();
		runs.push(run);
		await run.waitFor(/embedded PostgreSQL: creating a database cluster/, 60_000);
		run.signal('SIGINT');
		const { code } = await run.exited;
		expect(run.output()).toMatch(/SIGINT: stopping everything this command started/);
		expect(code).toBe(130);
		expect(run.leftovers()).toEqual({ files: [], processes: [] });
	}, 120_000);

	it('SIGTERM once PostgreSQL is ready: exit 143, the server is stopped and its folder removed', async () => {
		const run = startDemo();
		runs.push(run);
		await run.waitFor(/embedded PostgreSQL: ready on/, 60_000);
		run.signal('SIGTERM');
		const { code } = await run.exited;
		expect(code).toBe(143);
		expect(run.output()).not.toMatch(/Error/);
		expect(run.leftovers()).toEqual({ files: [], processes: [] });
	}, 120_000);

	it('the fault rehearsal, Ctrl-C once its job database is up: both embedded servers stopped and removed', async () => {
		const run = startDemo({ script: 'scripts/rehearsal.ts', args: ['--no-doc', '--kills', '1'] });
		runs.push(run);
		await run.waitFor(/job database: embedded PostgreSQL: ready on/, 60_000);
		run.signal('SIGINT');
		const { code } = await run.exited;
		expect(code).toBe(130);
		expect(run.leftovers()).toEqual({ files: [], processes: [] });
	}, 120_000);
});
