import { parseAlsoRetryStatuses } from '../../nodes/JobComplete/JobComplete.node';
import { classifyHttpStatus } from '../../src/core/classify';
import { condition, evaluate, load, node, targets, type TemplateNode } from '../helpers/templates';

/**
 * What the Event intake (06) answers for each kind of CRM answer, and when Monitoring (08)
 * alerts, read from the templates themselves without an n8n: the If node's expression and the
 * Code node's script run here on items shaped as n8n gives them. test/e2e/workflows.test.ts and
 * test/e2e/monitoring.test.ts run the same templates in a real n8n.
 */
interface Header {
	name: string;
	value: string;
}

function headers(respond: TemplateNode): Record<string, string> {
	const options = respond.parameters.options as { responseHeaders?: { entries: Header[] } };
	return Object.fromEntries(
		(options.responseHeaders?.entries ?? []).map((entry) => [entry.name, entry.value]),
	);
}

describe('Event intake (06): a CRM that is down and a CRM that refuses are answered apart', () => {
	const intake = load('06-event-intake.json');
	const isTransient = (answer: unknown) => evaluate(condition(intake, 'CRM down or busy?'), answer);

	it('a non-2xx answer goes to the check, which tells transient from permanent', () => {
		expect(targets(intake, 'CRM answered 2xx?')).toEqual([['Outbox Write'], ['CRM down or busy?']]);
		expect(targets(intake, 'CRM down or busy?')).toEqual([['Mark failed'], ['CRM setup fault?']]);
		expect(targets(intake, 'CRM setup fault?')).toEqual([
			['Explain setup fault (CRM)'],
			['Mark failed (CRM refused)'],
		]);
		// No answer at all still goes from the request's error output straight to Mark failed.
		expect(targets(intake, 'Apply to CRM')[1]).toEqual(['Mark failed']);
	});

	it.each([408, 409, 425, 429, 500, 502, 503, 504, 599])('HTTP %i is transient', (statusCode) => {
		expect(isTransient({ statusCode, body: {} })).toBe(true);
	});

	it('409 is transient: the request carries an Idempotency-Key, and a server answers 409 while an earlier request with that key is still in progress', () => {
		const headers = node(intake, 'Apply to CRM').parameters.headerParameters as {
			parameters: Array<{ name: string }>;
		};
		expect(headers.parameters.map((header) => header.name)).toContain('Idempotency-Key');
		expect(isTransient({ statusCode: 409, body: { error: 'request in progress' } })).toBe(true);
		expect(isTransient({ statusCode: '409' })).toBe(true);
	});

	it('an answer without a status is transient', () => {
		expect(isTransient({})).toBe(true);
		expect(isTransient({ statusCode: 0 })).toBe(true);
	});

	it.each([400, 401, 403, 404, 410, 413, 422, 301, 304])('HTTP %i is permanent', (statusCode) => {
		expect(isTransient({ statusCode, body: { error: 'refused' } })).toBe(false);
	});

	it("agrees with Job Complete's HTTP Status outcome (the Worker's CRM call): Retry there is transient here", () => {
		const finish = node(load('04-worker.json'), 'Finish job');
		const alsoRetry = parseAlsoRetryStatuses(
			(finish.parameters.options as { alsoRetryStatuses?: string }).alsoRetryStatuses,
		);
		expect(alsoRetry).toEqual([409]);
		const disagree: number[] = [];
		for (let statusCode = 100; statusCode < 600; statusCode++) {
			if (statusCode >= 200 && statusCode < 300) continue;
			if (
				isTransient({ statusCode }) !==
				(classifyHttpStatus(statusCode, alsoRetry).outcome === 'retry')
			)
				disagree.push(statusCode);
		}
		expect(disagree).toEqual([]);
	});

	it('transient: the claim is failed, 503 retry_later with Retry-After (also on Claim Lost)', () => {
		expect(node(intake, 'Mark failed').parameters.operation).toBe('fail');
		// Only a setup fault of Outbox Write, or its refusal of the event (templates-setup-faults.test.ts),
		// answers otherwise.
		expect(targets(intake, 'Mark failed')).toEqual([
			['Outbox setup fault?'],
			['Outbox setup fault?'],
		]);
		expect(targets(intake, 'Outbox setup fault?')).toEqual([
			['Respond 500 (outbox)'],
			['Outbox refused the event?'],
		]);
		expect(targets(intake, 'Outbox refused the event?')).toEqual([
			['Respond 422 (outbox)'],
			['Respond 503 retry'],
		]);
		for (const item of [
			{ statusCode: 503, body: {} },
			{ statusCode: 429, body: 'busy' },
			{ error: { message: 'connect ECONNREFUSED 10.0.0.9:443' } },
		])
			for (const check of ['Outbox setup fault?', 'Outbox refused the event?'])
				expect(evaluate(condition(intake, check), item), `${check} ${JSON.stringify(item)}`).toBe(
					false,
				);
		const respond = node(intake, 'Respond 503 retry');
		expect((respond.parameters.options as { responseCode: number }).responseCode).toBe(503);
		expect(headers(respond)['Retry-After']).toBe('10');
	});

	it('permanent: the claim is failed (not completed), 422 problem+json crm_rejected without Retry-After (also on Claim Lost)', () => {
		const mark = node(intake, 'Mark failed (CRM refused)');
		expect(mark.type).toBe('n8n-nodes-durable-jobs.idempotencyCheck');
		expect(mark.parameters.operation).toBe('fail');
		expect(mark.parameters.settleKey).toBe(node(intake, 'Mark failed').parameters.settleKey);
		expect(mark.parameters.claimId).toBe(node(intake, 'Mark failed').parameters.claimId);
		const refused = { statusCode: 422, body: { error: 'email is invalid' } };
		expect(evaluate(mark.parameters.errorMessage, refused)).toBe(
			'CRM refused the event: HTTP 422 {"error":"email is invalid"}',
		);
		expect(evaluate(mark.parameters.errorMessage, { statusCode: 404, body: '' })).toBe(
			'CRM refused the event: HTTP 404',
		);
		expect(targets(intake, 'Mark failed (CRM refused)')).toEqual([
			['Respond 422 CRM refused'],
			['Respond 422 CRM refused'],
		]);

		const respond = node(intake, 'Respond 422 CRM refused');
		expect((respond.parameters.options as { responseCode: number }).responseCode).toBe(422);
		expect(headers(respond)).toEqual({ 'Content-Type': 'application/problem+json' });
		const body = evaluate(respond.parameters.responseBody, {
			...refused,
			idempotency: { key: 'shop:o-1:paid:2026-11-30T10:00:00Z', status: 'failed' },
		});
		expect(body).toEqual({
			type: 'https://www.npmjs.com/package/n8n-nodes-durable-jobs#errors',
			title: 'The CRM refused the event',
			status: 422,
			code: 'crm_rejected',
			detail: expect.stringMatching(/^The CRM answered HTTP 422 to event "shop:o-1:paid:/),
			fix: expect.stringContaining('send it again'),
			event_id: 'shop:o-1:paid:2026-11-30T10:00:00Z',
			crm_status: 422,
		});
	});
});

describe('Event intake (06): a CRM answer that points at the setup, not at the event', () => {
	const intake = load('06-event-intake.json');
	const isSetupFault = (answer: unknown) => evaluate(condition(intake, 'CRM setup fault?'), answer);
	const explain = (answer: Record<string, unknown>) =>
		(
			new Function('$json', node(intake, 'Explain setup fault (CRM)').parameters.jsCode as string)(
				answer,
			) as { json: Record<string, unknown> & { crm_setup_fault: { reason: string; fix: string } } }
		).json;
	const eventId = 'shop:o-1:paid:2026-11-30T10:00:00Z';
	const answer = (statusCode: number, headers: Record<string, string> = {}) => ({
		statusCode,
		headers,
		body: '',
		idempotency: { key: eventId, status: 'failed' },
	});

	it.each([300, 301, 302, 303, 304, 307, 308, 401, 403, 405, 407, 415, 421, 426])(
		'HTTP %i is a fault of the setup (redirects are not followed; credentials, proxy, method, body type, protocol)',
		(statusCode) => {
			expect(isSetupFault(answer(statusCode))).toBe(true);
			expect(isSetupFault({ ...answer(statusCode), statusCode: String(statusCode) })).toBe(true);
		},
	);

	it.each([400, 402, 404, 410, 412, 413, 422, 451])(
		'HTTP %i is a refusal of the event (crm_rejected)',
		(statusCode) => {
			expect(isSetupFault(answer(statusCode))).toBe(false);
		},
	);

	it('every answer that is neither 2xx nor transient is either the setup or the event: nothing else', () => {
		const isTransient = (item: unknown) => evaluate(condition(intake, 'CRM down or busy?'), item);
		const setup: number[] = [];
		for (let statusCode = 300; statusCode < 500; statusCode++)
			if (!isTransient(answer(statusCode)) && isSetupFault(answer(statusCode)))
				setup.push(statusCode);
		expect(setup.filter((statusCode) => statusCode >= 400)).toEqual([
			401, 403, 405, 407, 415, 421, 426,
		]);
		expect(setup.filter((statusCode) => statusCode < 400)).toHaveLength(100);
	});

	it('says why and what to fix, for each kind of answer', () => {
		const redirected = explain(answer(302, { location: 'https://crm.example.com/api/events/' }));
		expect(redirected.crm_setup_fault).toEqual({
			reason:
				'the CRM answered HTTP 302, redirecting to https://crm.example.com/api/events/ (redirects are not followed)',
			fix: 'set crm_url in Config to the address the CRM answers at without a redirect (https://, host name, trailing slash)',
		});
		// The item goes on as it came (the claim's key, the status), with the explanation added.
		expect(redirected).toMatchObject({ statusCode: 302, idempotency: { key: eventId } });
		expect(explain(answer(308)).crm_setup_fault.reason).toBe(
			'the CRM answered HTTP 308 (redirects are not followed)',
		);
		expect(explain(answer(303, { location: '/records/7' })).crm_setup_fault.reason).toBe(
			'the CRM answered HTTP 303, redirecting to /records/7 (redirects are not followed; a 303 may mean the CRM applied the event: check it there)',
		);
		for (const statusCode of [401, 403]) {
			const { reason, fix } = explain(answer(statusCode)).crm_setup_fault;
			expect(reason).toBe(
				`the CRM answered HTTP ${statusCode} (it refused the credentials or the access of Apply to CRM)`,
			);
			expect(fix).toMatch(/^give Apply to CRM credentials the CRM accepts/);
		}
		expect(explain(answer(407)).crm_setup_fault).toEqual({
			reason: 'the proxy between n8n and the CRM answered HTTP 407 (it asks for credentials)',
			fix: "give the proxy's credentials in Apply to CRM's Proxy option, or n8n's proxy settings",
		});
		for (const statusCode of [405, 415, 421, 426])
			expect(explain(answer(statusCode)).crm_setup_fault.fix).toMatch(/^check crm_url in Config/);
		const long = 'https://crm.example.com/' + 'x'.repeat(5_000);
		expect(explain(answer(301, { location: long })).crm_setup_fault.reason.length).toBeLessThan(
			1_100,
		);
	});

	it('the claim is failed with the reason, so the event sent after the fix is processed; Claim Lost answers the same', () => {
		expect(targets(intake, 'Explain setup fault (CRM)')).toEqual([['Mark failed (CRM setup)']]);
		const mark = node(intake, 'Mark failed (CRM setup)');
		expect(mark.type).toBe('n8n-nodes-durable-jobs.idempotencyCheck');
		expect(mark.parameters.operation).toBe('fail');
		expect(mark.parameters.settleKey).toBe(node(intake, 'Mark failed').parameters.settleKey);
		expect(mark.parameters.claimId).toBe(node(intake, 'Mark failed').parameters.claimId);
		expect(evaluate(mark.parameters.errorMessage, explain(answer(401)))).toBe(
			'Setup fault: the CRM answered HTTP 401 (it refused the credentials or the access of Apply to CRM)',
		);
		expect(targets(intake, 'Mark failed (CRM setup)')).toEqual([
			['Respond 500 (CRM)'],
			['Respond 500 (CRM)'],
		]);
		expect(targets(intake, 'Respond 500 (CRM)')).toEqual([['Fail: setup error (CRM)']]);
	});

	it('answers 500 problem+json without Retry-After, like the other setup faults, and the execution fails naming the fix', () => {
		const item = explain(answer(302, { location: 'https://crm.example.com/api/events/' }));
		const respond = node(intake, 'Respond 500 (CRM)');
		expect((respond.parameters.options as { responseCode: number }).responseCode).toBe(500);
		expect(headers(respond)).toEqual({ 'Content-Type': 'application/problem+json' });
		expect(evaluate(respond.parameters.responseBody, item)).toEqual({
			type: 'https://www.npmjs.com/package/n8n-nodes-durable-jobs#errors',
			title: 'Internal server error',
			status: 500,
			detail: expect.stringContaining('not answered as a duplicate'),
			event_id: eventId,
		});
		const fail = node(intake, 'Fail: setup error (CRM)');
		expect(fail.type).toBe('n8n-nodes-base.stopAndError');
		expect(evaluate(fail.parameters.errorMessage, item)).toBe(
			`Answered 500, event "${eventId}" not applied: the CRM answered HTTP 302, redirecting to https://crm.example.com/api/events/ (redirects are not followed). Fix: set crm_url in Config to the address the CRM answers at without a redirect (https://, host name, trailing slash), then send the event again: it is processed, not answered as a duplicate`,
		);
	});
});

interface QueueStats {
	queue: string;
	queued: number;
	ready: number;
	running: number;
	running_expired: number;
	oldest_ready_age_seconds: number | null;
	oldest_queued_age_seconds: number | null;
	failed: number;
}

interface Checked extends QueueStats {
	alert: boolean;
	reasons: string[];
	dead_letter: number;
	new_dead_letters: number;
}

describe('Monitoring (08): Check thresholds', () => {
	const monitoring = load('08-monitoring.json');
	const code = node(monitoring, 'Check thresholds').parameters.jsCode as string;
	const shipped = Object.fromEntries(
		(
			node(monitoring, 'Config').parameters.assignments as {
				assignments: Array<{ name: string; value: unknown }>;
			}
		).assignments.map((entry) => [entry.name, entry.value]),
	);
	const toMinute = '2026-12-01T10:05:00.000Z';

	function stats(queue: string, extra: Partial<QueueStats> = {}): QueueStats {
		return {
			queue,
			queued: 0,
			ready: 0,
			running: 0,
			running_expired: 0,
			oldest_ready_age_seconds: null,
			oldest_queued_age_seconds: null,
			failed: 0,
			...extra,
		};
	}

	/** Runs the Code node's script on a Queue Overview answer, as n8n's Code node runs it. */
	function check(
		queues: QueueStats[],
		config: Record<string, unknown> = shipped,
		failedPerMinute: Record<string, Record<string, number>> = {},
	): Map<string, Checked> {
		const overview = {
			as_of: '2026-12-01T10:05:12.000Z',
			queues,
			chart: {
				to_minute: toMinute,
				series: queues.map((queue) => ({
					queue: queue.queue,
					points: Object.entries(failedPerMinute[queue.queue] ?? {}).map(([minute, failed]) => ({
						minute,
						done: 0,
						failed,
					})),
				})),
			},
		};
		const $ = (name: string) => {
			if (name !== 'Config') throw new Error(`the script reads node ${name}`);
			return { first: () => ({ json: config }) };
		};
		const $input = { first: () => ({ json: overview }) };
		const items = new Function('$', '$input', code)($, $input) as Array<{ json: Checked }>;
		return new Map(items.map((item) => [item.json.queue, item.json]));
	}

	it('ships max_dead_letters (100) next to the other thresholds', () => {
		expect(shipped).toMatchObject({
			max_oldest_ready_seconds: 300,
			max_new_dead_letters: 0,
			dead_letter_window_minutes: 1,
			max_dead_letters: 100,
		});
	});

	it('more dead letters kept than max_dead_letters alert every run, with no new one', () => {
		const result = check([stats('backlog', { failed: 101 }), stats('at-limit', { failed: 100 })]);
		expect(result.get('backlog')).toMatchObject({ alert: true, dead_letter: 101 });
		expect(result.get('backlog')?.reasons).toEqual([
			expect.stringMatching(/^101 dead letters kept \(limit 100\): they stay until replayed/),
		]);
		expect(result.get('at-limit')).toMatchObject({ alert: false, reasons: [] });
	});

	it('a new dead letter alerts once by itself; with a backlog over the limit, both reasons', () => {
		const minute = '2026-12-01T10:04:00.000Z';
		const result = check(
			[stats('one', { failed: 1 }), stats('many', { failed: 150 })],
			{ ...shipped, max_dead_letters: 100 },
			{ one: { [minute]: 1 }, many: { [minute]: 2 } },
		);
		expect(result.get('one')?.reasons).toEqual([
			expect.stringMatching(/^1 job\(s\) dead-lettered between /),
		]);
		expect(result.get('many')?.reasons).toEqual([
			expect.stringMatching(/^2 job\(s\) dead-lettered between /),
			expect.stringMatching(/^150 dead letters kept \(limit 100\)/),
		]);
	});

	it('without max_dead_letters in Config the kept dead letters alert nothing', () => {
		const config: Record<string, unknown> = { ...shipped };
		delete config.max_dead_letters;
		expect(check([stats('backlog', { failed: 5000 })], config).get('backlog')).toMatchObject({
			alert: false,
		});
		const zero = check([stats('backlog', { failed: 1 })], { ...shipped, max_dead_letters: 0 });
		expect(zero.get('backlog')?.reasons).toEqual([
			expect.stringMatching(/^1 dead letters kept \(limit 0\)/),
		]);
	});

	it('the age alert counts due jobs only: a job scheduled for next week is not late', () => {
		const result = check([
			stats('late', { queued: 1, ready: 1, oldest_ready_age_seconds: 301 }),
			stats('on-time', { queued: 1, ready: 1, oldest_ready_age_seconds: 299 }),
			stats('scheduled', {
				queued: 1,
				oldest_ready_age_seconds: null,
				oldest_queued_age_seconds: 86_400,
			}),
		]);
		expect(result.get('late')?.reasons).toEqual([
			'oldest due job has waited 301 s (limit 300 s): no worker takes it, or the workers cannot keep up',
		]);
		expect(result.get('on-time')?.alert).toBe(false);
		expect(result.get('scheduled')?.alert).toBe(false);
	});
});
