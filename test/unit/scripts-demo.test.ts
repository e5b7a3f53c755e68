/**
 * What `npm run demo` decides (scripts/lib/demo.ts): each run has a job schema of its own, so
 * two demos on one DATABASE_URL do not drop each other's; and following the sample job ends on
 * every final status, shows answers that are not a job's status as they are, and gives up
 * after a deadline with what to check instead of asking forever.
 */
import { demoSchemaName, followJobStatus, type StatusAnswer } from '../../scripts/lib/demo';
import { validateSchemaName } from '../../src/core/identifiers';

describe('the demo schema', () => {
	it('is a new, valid schema name for every run', () => {
		const names = new Set(Array.from({ length: 20 }, () => demoSchemaName()));
		expect(names.size).toBe(20);
		for (const name of names) {
			expect(name).toMatch(/^durable_jobs_demo_[0-9a-f]+$/);
			expect(validateSchemaName(name)).toBe(name);
		}
	});
});

function json(status: number, body: unknown): StatusAnswer {
	const text = JSON.stringify(body);
	return { status, body, text };
}

/** Answers from the list in turn, the last one again and again. */
function follow(answers: Array<StatusAnswer | Error>, deadlineMs = 2_000) {
	const lines: string[] = [];
	let polls = 0;
	const outcome = followJobStatus({
		poll: async () => {
			const answer = answers[Math.min(polls++, answers.length - 1)];
			if (answer instanceof Error) throw answer;
			return answer;
		},
		line: (text) => lines.push(text),
		since: () => '1.00 s',
		hint: 'Check the Dispatcher.',
		deadlineMs,
		intervalMs: 5,
	});
	return { outcome, lines, polls: () => polls };
}

describe('following the sample job', () => {
	const queued = json(200, { status: 'queued', attempts: 0 });
	const running = json(200, { status: 'running', attempts: 1 });

	it.each([
		['done', { result: { crm_record_id: 'crm-1' } }, 'result: {"crm_record_id":"crm-1"}'],
		['failed', { error: { code: 'needs_mapping' } }, 'error: {"code":"needs_mapping"}'],
		['cancelled', { cancel_reason: 'operator' }, 'cancel reason: "operator"'],
	])(
		'stops at the final status %s and prints what the job ended with',
		async (status, extra, shown) => {
			const run = follow([queued, running, json(200, { status, attempts: 1, ...extra })]);
			await expect(run.outcome).resolves.toEqual({ final: true, status });
			expect(run.lines).toEqual([
				'  1.00 s  queued',
				'  1.00 s  running (attempt 1)',
				`  1.00 s  ${status} (attempt 1)`,
				`  ${shown}`,
			]);
			expect(run.polls()).toBe(3);
		},
	);

	it('prints the HTTP status and body of an answer that is not a job status, once, and goes on asking', async () => {
		const unavailable = json(503, { code: 'database_unavailable' });
		const run = follow([
			unavailable,
			unavailable,
			unavailable,
			queued,
			running,
			json(200, { status: 'done', attempts: 1, result: {} }),
		]);
		await expect(run.outcome).resolves.toEqual({ final: true, status: 'done' });
		expect(run.lines[0]).toBe('  1.00 s  HTTP 503  {"code":"database_unavailable"}');
		expect(run.lines.filter((line) => line.includes('HTTP 503'))).toHaveLength(1);
		expect(run.lines.join('\n')).not.toContain('undefined');
	});

	it('a 404 that never changes: says so, then gives up at the deadline with what to check', async () => {
		const started = Date.now();
		const run = follow([{ status: 404, body: '', text: '' }], 300);
		await expect(run.outcome).resolves.toEqual({ final: false, last: 'HTTP 404  (empty body)' });
		expect(Date.now() - started).toBeLessThan(2_000);
		expect(run.lines).toEqual([
			'  1.00 s  HTTP 404  (empty body)',
			'  no final status after 0 s (last: HTTP 404  (empty body)); giving up following it. Check the Dispatcher.',
		]);
	});

	it('a job nobody picks up: gives up at the deadline, naming its last status', async () => {
		const run = follow([queued], 300);
		await expect(run.outcome).resolves.toEqual({ final: false, last: 'queued' });
		expect(run.lines.at(-1)).toMatch(
			/^ {2}no final status after \d+ s \(last: queued\); giving up following it\. Check the Dispatcher\.$/,
		);
	});

	it('no answer at all (n8n gone for a moment): says why and goes on asking', async () => {
		const run = follow([
			new TypeError('fetch failed'),
			queued,
			json(200, { status: 'done', attempts: 1, result: null }),
		]);
		await expect(run.outcome).resolves.toEqual({ final: true, status: 'done' });
		expect(run.lines[0]).toBe('  1.00 s  no answer: fetch failed');
	});

	it('cuts a long body to one line', async () => {
		const html = `<html>\n<body>${'x'.repeat(1_000)}</body>\n</html>`;
		const run = follow([{ status: 502, body: html, text: html }], 50);
		await run.outcome;
		expect(run.lines[0]).toMatch(
			/^ {2}1\.00 s {2}HTTP 502 {2}<html> <body>x+… \(\d+ characters\)$/,
		);
		expect(run.lines[0].length).toBeLessThan(400);
	});
});
