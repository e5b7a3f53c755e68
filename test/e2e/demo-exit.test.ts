/**
 * `npm run demo` all the way (embedded PostgreSQL, stand-ins, a real n8n with the packed
 * package and every bundled workflow, the sample job), then Ctrl-C: everything it started is
 * stopped and removed before it exits, whatever embedded PostgreSQL or n8n were doing. Also
 * shows the start-up progress a user sees: every step with its time.
 */

import { startDemo, type DemoRun } from './demo-run';
import { e2eLog } from './progress';

let run: DemoRun | undefined;

afterAll(() => {
	if (run && run.child.exitCode === null) run.signal('SIGKILL');
	run?.dispose();
});

describe('npm run demo, then Ctrl-C', () => {
	it(
		'prints each start-up step with its time, runs the sample job, prints the dashboard and reconciliation logins that work, and on SIGINT leaves no temp file and no process',
		async () => {
			run = startDemo();
			const started = Date.now();
			const progress = setInterval(
				() =>
					e2eLog(
						`waiting for the demo to be ready (${Math.round((Date.now() - started) / 1000)} s): ${run!.output().trim().split('\n').at(-1)}`,
					),
				15_000,
			);
			try {
				await run.waitFor(/Press Ctrl-C to stop everything/, 15 * 60_000);
			} finally {
				clearInterval(progress);
			}
			const output = run.output();
			for (const step of [
				/\[\s*[\d.]+ s\] PostgreSQL: DATABASE_URL not set, starting an embedded one/,
				/\[\s*[\d.]+ s\] embedded PostgreSQL: ready on 127\.0\.0\.1:\d+ after [\d.]+ s/,
				/\[\s*[\d.]+ s\] building and packing this package \(npm pack\)/,
				/\[\s*[\d.]+ s\] publishing \d+ workflows/,
				/\[\s*[\d.]+ s\] n8n healthy after [\d.]+ s/,
				/\[\s*[\d.]+ s\] published Dj\w+ \(\d+ of \d+\)/,
				/\[\s*[\d.]+ s\] webhooks answering after [\d.]+ s/,
				/HTTP 202/,
				/done \(attempt 1\)/,
			])
				expect(output).toMatch(step);
			// n8n is cached for the tests, so the demo must not claim to download it.
			expect(output).not.toMatch(/downloading n8n/);
			// The dashboard and the reconciliation report it prints answer with what it prints.
			const dashboard = /jobs dashboard: (\S+) {2}\(login (\S+) \/ (\S+), credential/.exec(output);
			expect(dashboard).not.toBeNull();
			const [, dashboardUrl, user, password] = dashboard!;
			const login = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
			expect((await fetch(dashboardUrl, { headers: { Authorization: login } })).status).toBe(200);
			expect((await fetch(dashboardUrl)).status).toBe(401);
			const report =
				/curl -i '(\S+\/webhook\/jobs\/unknown-outcomes\S*)' -H '([^:]+): ([^']+)'/.exec(output);
			expect(report).not.toBeNull();
			const [, reportUrl, header, key] = report!;
			const answer = await fetch(reportUrl, { headers: { [header]: key } });
			expect(answer.status).toBe(200);
			expect(await answer.json()).toMatchObject({ count: expect.any(Number) });
			expect((await fetch(reportUrl)).status).toBe(403);

			run.signal('SIGINT');
			const { code } = await run.exited;
			expect(run.output()).toMatch(/SIGINT: stopping everything this command started/);
			expect(code).toBe(130);
			expect(run.leftovers()).toEqual({ files: [], processes: [] });
		},
		20 * 60_000,
	);
});
