import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';

import { errorJson } from '../../nodes/shared/errors';
import { DurableJobsError, IdempotencyConflictError } from '../../src/core/errors';
import { validateQueueName, validateSchemaName } from '../../src/core/identifiers';
import {
	inRange,
	optionalText,
	optionalUrl,
	serializePayload,
	validateKey,
} from '../../src/core/validate';
import {
	WORKFLOWS,
	condition,
	XML_BODY_REFUSED,
	driverErrorItem,
	evaluate,
	load,
	node,
	responseHeaders,
	targets,
	thrownErrorItem,
	type Template,
} from '../helpers/templates';

/**
 * The receiver (01) and the relays (05, 07) read from the templates themselves, without an n8n:
 * the Code nodes' scripts and the If and Job Complete expressions run here on items shaped as
 * n8n gives them. test/e2e/workflows.test.ts, hostile-webhooks.test.ts and security.test.ts run
 * the same templates in a real n8n.
 */
function responseCode(template: Template, name: string): unknown {
	return (node(template, name).parameters.options as { responseCode: unknown }).responseCode;
}

function headersOf(template: Template, name: string): Record<string, string> {
	return responseHeaders(node(template, name));
}

interface Validated {
	valid: boolean;
	problems: Array<{ field: string; message: string }>;
	unsupported_media_type?: boolean;
}

describe('Receiver (01): Validate request', () => {
	const receiver = load('01-receiver.json');
	const code = node(receiver, 'Validate request').parameters.jsCode as string;

	/** The Code node's script (run once for each item) on the webhook's item after Config. */
	function validate(
		body: unknown,
		headers: Record<string, string> = { 'content-type': 'application/json' },
		allowed = '',
	): Validated {
		const $json = { headers, params: {}, query: {}, body, allowed_private_callback_hosts: allowed };
		return (new Function('$json', code)($json) as { json: Validated }).json;
	}

	const document = { id: 'doc-1', text: 'hello' };
	const withCallback = (url: string, allowed = '') =>
		validate({ document, callback_url: url }, undefined, allowed);

	it('accepts a JSON body sent as application/json, with or without a charset', () => {
		for (const type of ['application/json', 'application/json; charset=utf-8', 'Application/JSON'])
			expect(validate({ document }, { 'content-type': type }), type).toMatchObject({
				valid: true,
				problems: [],
			});
	});

	it.each([
		['application/xml', /must be application\/json \(got "application\/xml"\)/],
		['text/xml; charset=utf-8', /must be application\/json/],
		['application/x-www-form-urlencoded', /must be application\/json/],
		['text/plain', /must be application\/json/],
		['multipart/form-data; boundary=x', /must be application\/json/],
		[
			'application/merge-patch+json',
			/n8n reads the body only when it is sent as application\/json \(got "application\/merge-patch\+json"\): send the same JSON with Content-Type: application\/json/,
		],
		['application/vnd.api+json; charset=utf-8', /n8n reads the body only when/],
		// n8n does not read the body of a type followed by a space before its parameters.
		['application/json ; charset=utf-8', /n8n reads the body only when/],
	])('refuses Content-Type %s as an unsupported media type', (type, message) => {
		// n8n turns XML and forms into objects; the body looks like a request that lacks nothing.
		const result = validate({ document }, { 'content-type': type });
		expect(result).toMatchObject({ valid: false, unsupported_media_type: true });
		expect(result.problems).toEqual([{ field: 'Content-Type', message: expect.any(String) }]);
		expect(result.problems[0].message).toMatch(message);
	});

	it('refuses a request without Content-Type', () => {
		const result = validate({ document }, {});
		expect(result).toMatchObject({ valid: false, unsupported_media_type: true });
		expect(result.problems[0].message).toMatch(/^is missing: send the body as JSON/);
	});

	it.each([
		'http://n8n:5678/x',
		'http://postgres/',
		'http://ip6-localhost:5678/',
		'http://ip6-loopback/',
		'http://n8n.:5678/x',
		'http://metadata.google.internal/computeMetadata/v1/',
		'http://foo.internal/',
		'https://printer.local/hook',
		'http://box.localdomain/',
		'http://router.home.arpa/',
		'http://nas.lan/',
		'http://user@n8n/x',
		'HTTP://N8N:5678/x',
	])('refuses the internal host name in %s', (url) => {
		const result = withCallback(url);
		expect(result.valid).toBe(false);
		expect(result.problems).toEqual([
			{
				field: 'callback_url',
				message: expect.stringMatching(/^must not point at an internal host name \(/),
			},
		]);
	});

	it.each([
		'http://localhost:5678/webhook/jobs',
		'http://api.localhost/',
		'http://127.0.0.1/',
		'http://10.0.0.5/',
		'http://[::1]/',
		'http://0x7f000001/',
		'http://2130706433/',
		'HTTP://127.0.0.1/',
	])('still refuses the loopback or private address in %s', (url) => {
		expect(withCallback(url).problems).toEqual([
			{
				field: 'callback_url',
				message: expect.stringMatching(
					/^must not point at localhost or a loopback, private or link-local address \(/,
				),
			},
		]);
	});

	it.each([
		'https://hooks.example.com/job-finished',
		'HTTPS://example.com/cb',
		'Http://example.com./cb',
		'https://internal.example.com/cb',
		'https://example.local.example.com/cb',
		'https://8.8.8.8/cb',
	])('accepts the public host in %s', (url) => {
		expect(withCallback(url)).toMatchObject({ valid: true, problems: [] });
	});

	it('refuses a callback_url without a host, naming callback_url', () => {
		for (const url of ['http://', 'https:///', 'http://@/x'])
			expect(withCallback(url).problems, url).toEqual([
				{
					field: 'callback_url',
					message: 'must name a host (e.g. https://example.com/hooks/jobs)',
				},
			]);
	});

	it('correlation_id: text of up to 255 characters or a number; anything else is refused naming correlation_id', () => {
		for (const id of ['c-1', 'c'.repeat(255), 42, null, undefined])
			expect(validate({ document, correlation_id: id }), String(id)).toMatchObject({
				valid: true,
			});
		for (const id of ['c'.repeat(256), { a: 1 }, ['x'], true, Number.NaN])
			expect(validate({ document, correlation_id: id }).problems, JSON.stringify(id)).toEqual([
				{ field: 'correlation_id', message: 'must be text of at most 255 characters, or a number' },
			]);
	});

	it('accepts an internal host listed in allowed_private_callback_hosts', () => {
		expect(withCallback('http://hooks:8080/x', 'hooks, 10.0.0.7')).toMatchObject({ valid: true });
		expect(withCallback('http://10.0.0.7/x', 'hooks, 10.0.0.7')).toMatchObject({ valid: true });
		expect(withCallback('http://other:8080/x', 'hooks').valid).toBe(false);
	});

	it('the scheme check ignores case; other schemes are still refused', () => {
		expect(withCallback('ftp://example.com/x').problems).toEqual([
			{ field: 'callback_url', message: 'must be an http(s) URL' },
		]);
		expect(withCallback('javascript:alert(1)').valid).toBe(false);
	});

	it('a request that is not JSON answers 415 problem+json, one with bad fields 400', () => {
		expect(targets(receiver, 'Valid?')).toEqual([['Job Enqueue'], ['Content-Type JSON?']]);
		expect(targets(receiver, 'Content-Type JSON?')).toEqual([['Respond 400'], ['Respond 415']]);
		const isJson = condition(receiver, 'Content-Type JSON?');
		expect(evaluate(isJson, validate({ document }, { 'content-type': 'application/xml' }))).toBe(
			false,
		);
		expect(evaluate(isJson, validate({}, { 'content-type': 'application/json' }))).toBe(true);
		expect(responseCode(receiver, 'Respond 415')).toBe(415);
		expect(headersOf(receiver, 'Respond 415')).toEqual({
			'Content-Type': 'application/problem+json',
		});
		const refused = validate({ document }, { 'content-type': 'application/xml' });
		expect(evaluate(node(receiver, 'Respond 415').parameters.responseBody, refused)).toEqual(
			XML_BODY_REFUSED,
		);
	});
});

describe('Receiver (01): a fault in the setup is a 500, any other server error a 503', () => {
	const receiver = load('01-receiver.json');
	/** Where Job Enqueue's error item goes: the Respond node that answers it. */
	function answer(item: Record<string, unknown>): string {
		if (evaluate(condition(receiver, 'Store unavailable?'), item) === true) return 'Respond 503';
		return evaluate(condition(receiver, 'Request refused?'), item) === true
			? 'Respond error'
			: 'Respond 500';
	}
	const fromDriver = driverErrorItem;

	it('routes Job Enqueue’s error output through the two checks', () => {
		expect(targets(receiver, 'Job Enqueue')[1]).toEqual(['Store unavailable?']);
		expect(targets(receiver, 'Store unavailable?')).toEqual([
			['Respond 503'],
			['Request refused?'],
		]);
		expect(targets(receiver, 'Request refused?')).toEqual([['Respond error'], ['Respond 500']]);
		expect(targets(receiver, 'Respond 500')).toEqual([['Fail: setup error']]);
	});

	it.each([
		[
			'connection refused',
			{ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:5432' },
		],
		['connection reset', { code: 'ECONNRESET', message: 'read ECONNRESET' }],
		['connect timeout', { message: 'timeout exceeded when trying to connect' }],
		['too many connections', { code: '53300', message: 'sorry, too many clients already' }],
		['server shutting down', { code: '57P01', message: 'terminating connection' }],
		['server starting up', { code: '57P03', message: 'the database system is starting up' }],
		// A restarting container's name is gone from Docker's DNS for a moment.
		['unknown host', { code: 'ENOTFOUND', message: 'getaddrinfo ENOTFOUND db' }],
		// PgBouncer while PostgreSQL restarts.
		['PgBouncer waiting for a server', { code: '08P01', message: 'query_wait_timeout' }],
		['a read-only replica after a failover', { code: '25006', message: 'read-only transaction' }],
		['any other database error', { code: 'XX000', message: 'internal error' }],
	])('%s → 503 with Retry-After', (_, error) => {
		expect(answer(fromDriver(error))).toBe('Respond 503');
	});

	it('an enqueue that could not tell what it stored, or a migration that waits, → 503', () => {
		expect(
			answer(
				errorJson(
					new DurableJobsError('enqueue_unresolved', 'The job could not be stored or found', {
						httpStatus: 503,
					}),
				),
			),
		).toBe('Respond 503');
		// MigrationWaitsError: a migration that waits for running jobs or for a lock (src/core/migrate.ts).
		for (const error of [
			'Migration 0016 waits: 2 jobs of queue "documents" are running at once (schema "s")',
			'Migration 0017 waits for a lock on jobs, held by process 4242 (schema "s")',
		])
			expect(
				answer({ error, details: { code: 'migrations_missing', http_status: 503 } }),
				error,
			).toBe('Respond 503');
	});

	it.each([
		['permission denied', { code: '42501', message: 'permission denied for schema durable_jobs' }],
		['wrong password', { code: '28P01', message: 'password authentication failed' }],
		['unknown database', { code: '3D000', message: 'database "x" does not exist' }],
		[
			'no password',
			{ message: 'SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string' },
		],
	])('%s → 500 without Retry-After', (_, error) => {
		expect(answer(fromDriver(error))).toBe('Respond 500');
	});

	it('missing migrations with Auto-Migrate off, a lost status-token secret → 500', () => {
		for (const code of ['migrations_missing', 'schema_incomplete', 'migration_history_mismatch'])
			expect(
				answer(
					errorJson(
						new DurableJobsError(code, `Schema "s" is broken (${code})`, { httpStatus: 503 }),
					),
				),
				code,
			).toBe('Respond 500');
		expect(answer({ error: 'no details' })).toBe('Respond 500');
	});

	/** The error item of what `work` throws, as Job Enqueue puts it out. */
	const refusal = thrownErrorItem;

	it('a refusal of what the request sent keeps its 4xx and is quoted to the caller', () => {
		const limit = { bytes: 1024, raisedBy: null };
		for (const [name, item] of [
			[
				'a payload too large',
				refusal(() => serializePayload({ t: 'x'.repeat(2000) }, 'payload', limit)),
			],
			['a payload with NUL', refusal(() => serializePayload({ t: 'a\u0000b' }, 'payload', limit))],
			[
				'a key reused',
				errorJson(new IdempotencyConflictError('k-1', '0190d1a2-0000-7000-8000-000000000000')),
			],
			['a key with a control character', refusal(() => validateKey('a\u0007b', 'idempotencyKey'))],
			['a callback URL without a host', refusal(() => optionalUrl('http://', 'callbackUrl'))],
			['a correlation id with NUL', refusal(() => optionalText('c\u0000', 'correlationId', 255))],
		] as const) {
			const status = (item.details as { http_status: number }).http_status;
			expect(status, name).toBeGreaterThanOrEqual(400);
			expect(status, name).toBeLessThan(500);
			expect(answer(item), name).toBe('Respond error');
			const body = evaluate(node(receiver, 'Respond error').parameters.responseBody, item);
			expect(body, name).toMatchObject({ status, detail: item.error });
			expect(
				evaluate(
					(node(receiver, 'Respond error').parameters.options as { responseCode: string })
						.responseCode,
					item,
				),
				name,
			).toBe(status);
		}
	});

	it('a refusal of the template’s own settings is a fault in the setup: 500, and the execution fails naming it', () => {
		for (const [name, item] of [
			['an invalid schema name in the credential', refusal(() => validateSchemaName('Jobs'))],
			['an invalid queue name', refusal(() => validateQueueName('bad queue!'))],
			[
				'Max Attempts out of range',
				refusal(() => inRange(0, 'maxAttempts', { min: 1, max: 1000, default: 5 })),
			],
			[
				'a Delay Seconds out of range',
				refusal(() => inRange(-1, 'delayMs', { min: 0, max: 10, default: 0 })),
			],
			[
				'a parameter whose expression failed (n8n’s own error, read as invalid_parameter)',
				errorJson(
					new DurableJobsError('invalid_parameter', 'invalid syntax', {
						field: 'callbackUrl',
						httpStatus: 400,
					}),
				),
			],
			[
				'a refusal that names no field',
				errorJson(new DurableJobsError('invalid_input', 'bad', { httpStatus: 400 })),
			],
		] as const) {
			expect(answer(item), name).toBe('Respond 500');
			const body = evaluate(node(receiver, 'Respond 500').parameters.responseBody, item);
			expect(JSON.stringify(body), name).not.toContain(String(item.error));
			expect(
				evaluate(node(receiver, 'Fail: setup error').parameters.errorMessage, item),
				name,
			).toBe(
				`Answered 500, nothing stored: ${String(item.error)}${(item.details as { fix: string | null }).fix ? `. Fix: ${(item.details as { fix: string }).fix}` : ''}`,
			);
		}
	});

	it('the 503 carries Retry-After; the 500 does not, says nothing internal, and fails the execution', () => {
		expect(responseCode(receiver, 'Respond 503')).toBe(503);
		expect(headersOf(receiver, 'Respond 503')['Retry-After']).toBe('5');
		expect(responseCode(receiver, 'Respond 500')).toBe(500);
		expect(headersOf(receiver, 'Respond 500')).toEqual({
			'Content-Type': 'application/problem+json',
		});
		const item = fromDriver({ code: '42501', message: 'permission denied for table jobs' });
		const body = evaluate(node(receiver, 'Respond 500').parameters.responseBody, item) as Record<
			string,
			unknown
		>;
		expect(body).toMatchObject({ status: 500, title: 'Internal server error' });
		expect(JSON.stringify(body)).not.toMatch(/permission|PostgreSQL|credential|password|retry/i);
		expect(body.detail).toMatch(/will not help until the operator/);
		const fail = node(receiver, 'Fail: setup error');
		expect(fail.type).toBe('n8n-nodes-base.stopAndError');
		expect(evaluate(fail.parameters.errorMessage, item)).toBe(
			'Answered 500, nothing stored: PostgreSQL denied access: permission denied for table jobs. Fix: Grant the runtime role the privileges listed in the README (section "Database privileges")',
		);
	});
});

describe('executions that hold secrets are not saved when they succeed', () => {
	it.each([
		['01-receiver.json', 'status tokens and request bodies'],
		['05-callback-relay.json', 'the signing key'],
	])('%s (%s): saveDataSuccessExecution none, errors saved', (file) => {
		expect(load(file).settings).toMatchObject({
			saveDataSuccessExecution: 'none',
			saveDataErrorExecution: 'all',
		});
	});
});

describe('Callback relay (05)', () => {
	const relay = load('05-callback-relay.json');

	it('the signing key is the Sign node’s credential: no node, item or setting of the workflow holds it', () => {
		expect(targets(relay, 'Config')).toEqual([['Build signed request']]);
		expect(targets(relay, 'Build signed request')).toEqual([['Sign']]);
		const sign = node(relay, 'Sign');
		expect(sign).toMatchObject({
			type: 'n8n-nodes-base.crypto',
			typeVersion: 2,
			parameters: { action: 'hmac', type: 'SHA256', encoding: 'base64' },
			credentials: {
				crypto: { id: 'DjCallbackSigning', name: 'Durable Jobs callback signing key' },
			},
			onError: 'continueErrorOutput',
		});
		// Crypto v2 reads the secret only from its credential: no parameter may name one.
		expect(Object.keys(sign.parameters).sort()).toEqual(
			['action', 'dataPropertyName', 'encoding', 'type', 'value'].sort(),
		);
		for (const other of relay.nodes)
			expect(JSON.stringify(other.parameters), other.name).not.toMatch(
				/signing_key['"]?\s*[:=]|secret['"]?\s*:/,
			);
		const config = node(relay, 'Config').parameters.assignments as {
			assignments: Array<{ name: string }>;
		};
		expect(config.assignments.map((entry) => entry.name)).toEqual(['timeout_ms']);

		const code = node(relay, 'Build signed request').parameters.jsCode as string;
		const built = (
			new Function('$json', code)({
				job_id: 'j',
				attempt_id: 'a',
				timeout_ms: 15000,
				payload: {
					event_id: 'evt-1',
					event_type: 'job.succeeded',
					occurred_at: '2026-12-01T00:00:00Z',
					payload: { job_id: 'j' },
				},
			}) as { json: Record<string, unknown> }
		).json;
		expect(built).toMatchObject({ job_id: 'j', attempt_id: 'a', webhook_id: 'evt-1' });
		expect(built.to_sign).toBe(
			`evt-1.${String(built.webhook_timestamp)}.${String(built.body_text)}`,
		);
	});

	it('a credential without its secret sends nothing: the event retries (signing_key_missing) and the execution fails saying what to set', () => {
		// Crypto reads its credential before its items: when that throws, n8n (onError: continue)
		// passes the input items on output 0, unsigned; an error of one item goes to output 1.
		expect(targets(relay, 'Sign')).toEqual([['Signed?'], ['Refuse: no signing key']]);
		expect(targets(relay, 'Signed?')).toEqual([['Deliver'], ['Refuse: no signing key']]);
		const signed = condition(relay, 'Signed?');
		expect(evaluate(signed, { job_id: 'j', signature: 'c2ln' })).toBe(true);
		for (const item of [{ job_id: 'j' }, { job_id: 'j', signature: '' }, { error: 'x' }])
			expect(evaluate(signed, item), JSON.stringify(item)).toBe(false);
		expect(targets(relay, 'Refuse: no signing key')).toEqual([
			['Stop: set the signing key'],
			['Stop: set the signing key'],
		]);
		const refuse = node(relay, 'Refuse: no signing key');
		expect(refuse.parameters).toMatchObject({
			outcome: 'retry',
			errorCode: 'signing_key_missing',
			jobId: "={{ $('Build signed request').item.json.job_id }}",
			attemptId: "={{ $('Build signed request').item.json.attempt_id }}",
			errorMessage:
				'Not sent: the Sign node could not sign, because its credential "Durable Jobs callback signing key" is missing or its Hmac Secret is empty. Set a long random secret as Hmac Secret in that credential; the event is delivered at its next attempt.',
		});
		// It waits as a refused delivery does: a key set within the 2 days loses no event.
		expect((refuse.parameters.options as Record<string, unknown>).retryAfterSeconds).toBe(
			(node(relay, 'Job Complete').parameters.options as Record<string, unknown>).retryAfterSeconds,
		);
		expect(node(relay, 'Stop: set the signing key').parameters.errorMessage).toMatch(
			/^Callback not sent: the credential "Durable Jobs callback signing key" \(type Crypto\) of the Sign node has no Hmac Secret/,
		);
	});

	it('every answer but a 2xx, and no answer, is a retry with backoff (never a permanent failure)', () => {
		const complete = node(relay, 'Job Complete');
		expect(targets(relay, 'Deliver')).toEqual([['Job Complete'], ['Job Complete']]);
		const outcome = (item: unknown) => evaluate(complete.parameters.outcome, item);
		const code = (item: unknown) => evaluate(complete.parameters.errorCode, item);
		for (let status = 100; status < 600; status++) {
			const item = { statusCode: status, headers: {} };
			expect(outcome(item), `HTTP ${status}`).toBe(
				status >= 200 && status < 300 ? 'succeeded' : 'retry',
			);
			if (status < 200 || status >= 300) expect(code(item)).toBe(`http_${status}`);
		}
		// The error output: a timeout, a refused connection, a DNS or TLS error.
		const noAnswer = { error: { message: 'connect ECONNREFUSED 127.0.0.1:9' }, statusCode: 200 };
		expect(outcome(noAnswer)).toBe('retry');
		expect(code(noAnswer)).toBe('http_no_response');
		expect(complete.parameters.errorClass).toBe('');
	});

	/** Retry After Seconds of Job Complete after the given delivery (attempt) failed. */
	function waitAfter(attempt: unknown): number {
		const expression = (node(relay, 'Job Complete').parameters.options as Record<string, unknown>)
			.retryAfterSeconds;
		return evaluate(
			expression,
			{ statusCode: 503 },
			{ 'Build signed request': { attempt } },
		) as number;
	}

	it('retries on the Standard Webhooks schedule: 5 s, 5 min, 30 min, 2 h, 5 h, then 10 h, each ±20%', () => {
		const nominal = [5, 300, 1800, 7200, 18000, 36000, 36000, 36000, 36000];
		const seen = nominal.map(() => new Set<number>());
		for (let round = 0; round < 200; round++)
			nominal.forEach((wait, index) => {
				const drawn = waitAfter(index + 1);
				expect(Number.isInteger(drawn)).toBe(true);
				expect(drawn).toBeGreaterThanOrEqual(Math.floor(wait * 0.8));
				expect(drawn).toBeLessThanOrEqual(Math.ceil(wait * 1.2));
				seen[index].add(drawn);
			});
		// Spread, so that events that failed together do not all come back at the same moment.
		for (const [index, drawn] of seen.entries())
			if (nominal[index] >= 300) expect(drawn.size).toBeGreaterThan(20);
		// An attempt number the item lacks counts as the first delivery, never as no wait.
		for (const attempt of [undefined, null, 0, 'x'])
			expect(waitAfter(attempt)).toBeGreaterThanOrEqual(4);
	});

	it('the sticky note states the retry window the callback queue’s 10 attempts and the schedule give', () => {
		// job_finished_event (migration 0010) enqueues each callback event with max_attempts 10.
		const migration = readFileSync(
			resolve(__dirname, '..', '..', 'migrations', '0010_finished_event_function.sql'),
			'utf8',
		);
		expect(migration).toMatch(/p_event_id, p_event_id, 10, p_correlation_id\)/);
		// The 10th delivery comes after the waits that follow the first nine.
		const total = [5, 300, 1800, 7200, 18000, 36000, 36000, 36000, 36000].reduce((a, b) => a + b);
		expect(Math.floor((total * 0.8) / 3600)).toBe(38);
		expect(Math.round((total * 1.2) / 3600)).toBe(57);
		const note = node(relay, 'Note 1').parameters.content as string;
		expect(note).toContain('An event gets **10 deliveries**');
		expect(note).toContain('5 s, 5 min, 30 min, 2 h and 5 h, after each later one 10 h');
		expect(note).toContain('the 10th delivery comes about 2 days (38 to 57 hours) after the first');
		expect(note).not.toMatch(/needs_manual_review/);
	});
});

describe('HTTP Request nodes of the templates', () => {
	const files = readdirSync(WORKFLOWS).filter((file) => file.endsWith('.json'));

	it('read the answer by its Content-Type: a 2xx with a text body is an answer, not an error', () => {
		const requests: string[] = [];
		for (const file of files)
			for (const candidate of load(file).nodes.filter(
				(entry) => entry.type === 'n8n-nodes-base.httpRequest',
			)) {
				const response = (
					candidate.parameters.options as {
						response?: { response?: Record<string, unknown> };
					}
				).response?.response;
				requests.push(`${file} ${candidate.name}`);
				// "json" throws "Response body is not valid JSON" on a text answer (n8n 2.40.7,
				// HttpRequestV3), even with Never Error: the item goes to the error output as no answer.
				// Call AI takes the answer as text, and Read AI answer reads its JSON whatever the type.
				expect(response?.responseFormat, `${file} ${candidate.name}`).toBe(
					candidate.name === 'Call AI' ? 'text' : 'autodetect',
				);
				expect(response, `${file} ${candidate.name}`).toMatchObject({
					fullResponse: true,
					neverError: true,
				});
			}
		expect(requests).toEqual(
			expect.arrayContaining([
				'03-dispatcher.json Call AI',
				'03-dispatcher.json Create CRM record',
				'04-worker.json Call AI',
				'04-worker.json Create CRM record',
				'05-callback-relay.json Deliver',
				'06-event-intake.json Apply to CRM',
				'07-outbox-relay.json Deliver',
				'08-monitoring.json Send alert',
			]),
		);
	});

	it('the Event intake quotes a CRM refusal in text as well as in JSON', () => {
		const intake = load('06-event-intake.json');
		const message = node(intake, 'Mark failed (CRM refused)').parameters.errorMessage;
		expect(evaluate(message, { statusCode: 422, data: 'Duplicate record' })).toBe(
			'CRM refused the event: HTTP 422 Duplicate record',
		);
		expect(evaluate(message, { statusCode: 422, body: { error: 'bad' } })).toBe(
			'CRM refused the event: HTTP 422 {"error":"bad"}',
		);
		expect(evaluate(message, { statusCode: 400 })).toBe('CRM refused the event: HTTP 400');
	});
});
