/**
 * Progress of the long steps of the end-to-end tests (installing and starting n8n, waiting for
 * its webhooks, kill loops), one line per step, so a run is never silent for minutes. Written
 * straight to stderr: test runners buffer console output per test.
 * DEBUG_E2E=0 turns it off.
 */
export function e2eLog(line: string): void {
	if (process.env.DEBUG_E2E === '0') return;
	process.stderr.write(`[e2e ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
}
