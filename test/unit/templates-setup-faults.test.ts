import { NodeOperationError, type INode } from 'n8n-workflow';

import { dateParameter } from '../../nodes/shared/dates';
import { errorJson } from '../../nodes/shared/errors';
import { classifyHttpStatus } from '../../src/core/classify';
import {
	DurableJobsError,
	EventIdReusedError,
	MigrationWaitsError,
	MigrationsMissingError,
	ValidationError,
} from '../../src/core/errors';
import { validateQueueName, validateSchemaName } from '../../src/core/identifiers';
import { optionalDate, optionalText, serializePayload, validateKey } from '../../src/core/validate';
import {
	XML_BODY_REFUSED,
	driverErrorItem,
	load,
	node,
	parameterValue,
	responseHeaders,
	targets,
	thrownErrorItem,
	type Template,
	type TemplateNode,
} from '../helpers/templates';

/**
 * The answers of the Status endpoint (02), the Event intake (06) and the reconciliation report
 * (09) to a server error, and the Dispatcher's and Worker's (03, 04) reading of the AI answer,
 * read from the templates themselves without an n8n: the If nodes' expressions and the Code
 * nodes' scripts run here on items shaped as n8n gives them, error items made by the nodes' own
 * errorJson from driver errors classified by the core. A fault in the setup (wrong password,
 * missing privileges or migrations) is a 500 without Retry-After and fails the execution, as in
 * the receiver (01, templates-receiver-relays.test.ts); any other server error stays a 503 with
 * Retry-After. test/e2e/hostile-webhooks.test.ts and security.test.ts run the same templates in a
 * real n8n.
 */

type Json = Record<string, unknown>;

const value = parameterValue;

interface Condition {
	leftValue: string;
	rightValue: unknown;
	operator: { type: string; operation: string };
}

/** Whether an If node sends `$json` to its first output (true) or its second (false). */
function passes(ifNode: TemplateNode, $json: Json): boolean {
	const { conditions, combinator } = ifNode.parameters.conditions as {
		conditions: Condition[];
		combinator: string;
	};
	expect(combinator).toBe('and');
	expect(conditions).toHaveLength(1);
	const [condition] = conditions;
	const left = value(condition.leftValue, $json);
	const { type, operation } = condition.operator;
	if (type === 'boolean' && operation === 'true') return left === true;
	if (type === 'number' && operation === 'lt') return Number(left) < Number(condition.rightValue);
	throw new Error(`If node "${ifNode.name}": no test for ${type} ${operation}`);
}

/**
 * The nodes one item goes through from `start`: If nodes by their condition, Code nodes (run
 * once for each item) by their script, Respond to Webhook nodes on to what follows them. It stops
 * at any other node, or where nothing follows; `json` is the item as the last node got it.
 */
function walk(template: Template, start: string, item: Json): { path: string[]; json: Json } {
	const path: string[] = [];
	let json = item;
	for (let name = start; ; ) {
		path.push(name);
		const current = node(template, name);
		let output = 0;
		if (current.type === 'n8n-nodes-base.if') output = passes(current, json) ? 0 : 1;
		else if (current.type === 'n8n-nodes-base.code') {
			expect(current.parameters.mode).toBe('runOnceForEachItem');
			json = (new Function('$json', current.parameters.jsCode as string)(json) as { json: Json })
				.json;
		} else if (current.type !== 'n8n-nodes-base.respondToWebhook') break;
		const next = targets(template, name)[output] ?? [];
		if (next.length === 0) break;
		expect(next).toHaveLength(1);
		name = next[0];
	}
	return { path, json };
}

function responseCode(respond: TemplateNode, $json: Json): unknown {
	return value((respond.parameters.options as { responseCode: unknown }).responseCode, $json);
}

/** The error item Job Status, Idempotency Check or Job Status (Unknown Outcomes) puts out. */
const fromDriver = driverErrorItem;

const SETUP_FAULTS: Array<[string, Json]> = [
	['wrong password', fromDriver({ code: '28P01', message: 'password authentication failed' })],
	[
		'permission denied',
		fromDriver({ code: '42501', message: 'permission denied for schema durable_jobs' }),
	],
	['unknown database', fromDriver({ code: '3D000', message: 'database "jobs" does not exist' })],
	[
		'no password',
		fromDriver({ message: 'SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string' }),
	],
	[
		'migrations missing with Auto-Migrate off',
		errorJson(new MigrationsMissingError('durable_jobs', ['0001_jobs'])),
	],
];

const OUTAGES: Array<[string, Json]> = [
	[
		'connection refused (ECONNREFUSED)',
		fromDriver({ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:5432' }),
	],
	[
		'server shutting down (57P01)',
		fromDriver({ code: '57P01', message: 'terminating connection due to administrator command' }),
	],
	[
		'unknown host (ENOTFOUND)',
		fromDriver({ code: 'ENOTFOUND', message: 'getaddrinfo ENOTFOUND db' }),
	],
	[
		'a migration that waits',
		errorJson(
			new MigrationWaitsError('durable_jobs', { id: 16, name: '0016_x' }, 'Migration 0016 waits', {
				applied: [],
			}),
		),
	],
	['any other database error', fromDriver({ code: 'XX000', message: 'internal error' })],
	['an error item without http_status', { error: 'Node failed', details: { code: 'x' } }],
];

/** n8n's own error item on an error output (a node that throws as a whole): no details. */
const NODE_FAILED: [string, Json] = ['an error item without details', { error: 'Node failed' }];

const SECRET_WORDS = /password|PostgreSQL|credential|permission|privilege|denied|migration/i;

interface Endpoint {
	file: string;
	/** The node the error item comes out of, and the output it takes. */
	source: string;
	output: number;
	/** The item as n8n hands it on (the error output merges the input item into it). */
	item: (error: Json) => Json;
	unavailable: string;
	/** Where a 4xx goes: its own answer, or none (02: every 4xx it can get is the operator's). */
	refused?: string;
	/** The 4xx error items this endpoint can get from what the request sent. */
	refusals: Array<[string, Json]>;
	/**
	 * The 4xx error items of the node's own settings (the credential's schema, a fixed queue or
	 * limit): nothing the caller can fix, so a fault in the setup. None: every refusal is one (02).
	 */
	settings?: Array<[string, Json]>;
	/** Server errors of this endpoint only, answered 503. */
	outages: Array<[string, Json]>;
	failPrefix: string;
}

const webhookItem = (query: Json, body: unknown = {}) => ({
	headers: { host: 'n8n.example.com' },
	params: {},
	query,
	body,
	webhookUrl: 'https://n8n.example.com/webhook/x',
	executionMode: 'production',
});

const status = load('02-status.json');
const intake = load('06-event-intake.json');
const report = load('09-reconciliation.json');

const ENDPOINTS: Endpoint[] = [
	{
		file: '02-status.json',
		source: 'Job Status',
		output: 2,
		item: (error) => ({ ...webhookItem({ job_id: 'a', token: 'b' }), ...error }),
		unavailable: 'Respond 503',
		refusals: [
			// A malformed job id or token is Not Found (404), never an error item (src/core/status.ts);
			// what can come is a refusal of the node's own settings: the operator's fault, answered
			// as one, with nothing about the settings for the anonymous caller.
			[
				'an invalid schema name in the credential',
				thrownErrorItem(() => validateSchemaName('Jobs')),
			],
			[
				'no credential (n8n refuses to run the node)',
				errorJson(
					new NodeOperationError(
						node(status, 'Job Status') as unknown as INode,
						'Node does not have any credentials set',
					),
				),
			],
		],
		outages: [NODE_FAILED],
		failPrefix: 'Answered 500, no job status given: ',
	},
	{
		file: '06-event-intake.json',
		source: 'Claim event',
		output: 5,
		item: (error) => ({
			...webhookItem({}, { source: 'shop' }),
			valid: true,
			envelope: { event_id: 'shop:o-1:paid:2026-01-01T00:00:00Z' },
			...error,
		}),
		unavailable: 'Respond 503 unavailable',
		refused: 'Respond claim error',
		refusals: [
			['a key too long', errorJson(new ValidationError('key', 'is too long', 'Use at most 255'))],
			['an entity key too long', thrownErrorItem(() => validateKey('e'.repeat(256), 'entityKey'))],
			[
				'an occurred_at the node cannot read',
				thrownErrorItem(() => optionalDate('10000-01-01T00:00:00Z', 'Occurred At')),
			],
		],
		settings: [
			[
				'an invalid schema name in the credential',
				thrownErrorItem(() => validateSchemaName('Jobs')),
			],
			['a blank scope', thrownErrorItem(() => validateKey(' ', 'scope'))],
			[
				'a Claim Timeout Seconds out of range',
				errorJson(
					new ValidationError('Claim Timeout Seconds', 'must be at least 1', 'Set it to 1 or more'),
				),
			],
			[
				'a parameter whose expression failed',
				errorJson(
					new DurableJobsError('invalid_parameter', 'invalid syntax', {
						field: 'key',
						httpStatus: 400,
					}),
				),
			],
		],
		outages: [NODE_FAILED],
		failPrefix: 'Answered 500, event not recorded: ',
	},
	{
		file: '09-reconciliation.json',
		source: 'Unknown Outcomes',
		output: 0,
		item: (error) => error,
		unavailable: 'Respond 503',
		refused: 'Respond error',
		refusals: [['a bad queue', thrownErrorItem(() => validateQueueName('bad queue!'))]],
		settings: [
			[
				'an invalid schema name in the credential',
				thrownErrorItem(() => validateSchemaName('Jobs')),
			],
			[
				'a refusal that names no field',
				errorJson(new DurableJobsError('invalid_input', 'bad', { httpStatus: 400 })),
			],
		],
		// Unknown Outcomes continues on its regular output: Failed? takes only items with details.
		outages: [],
		failPrefix: 'Answered 500, no report: ',
	},
];

describe.each(ENDPOINTS)(
	'$file: a fault in the setup is a 500, any other server error a 503',
	(endpoint) => {
		const template = load(endpoint.file);
		const start = () => targets(template, endpoint.source)[endpoint.output][0];
		const answer = (error: Json) => walk(template, start(), endpoint.item(error)).path;

		it('the error goes through Store unavailable? (and Request refused?, where a 4xx has an answer of its own), as in the receiver', () => {
			expect(targets(template, 'Store unavailable?')).toEqual([
				[endpoint.unavailable],
				[endpoint.refused ? 'Request refused?' : 'Respond 500'],
			]);
			if (endpoint.refused)
				expect(targets(template, 'Request refused?')).toEqual([
					[endpoint.refused],
					['Respond 500'],
				]);
			expect(targets(template, 'Respond 500')).toEqual([['Fail: setup error']]);
			expect(node(template, 'Fail: setup error').type).toBe('n8n-nodes-base.stopAndError');
		});

		it.each(SETUP_FAULTS)('%s → 500, then the execution fails', (_, error) => {
			expect(error.details).toMatchObject({ setup_fault: true });
			expect(answer(error).slice(-2)).toEqual(['Respond 500', 'Fail: setup error']);
		});

		it.each([...OUTAGES, ...endpoint.outages])('%s → 503 with Retry-After', (_, error) => {
			expect((error.details as Json | undefined)?.setup_fault).not.toBe(true);
			expect(answer(error).at(-1)).toBe(endpoint.unavailable);
			expect(responseHeaders(node(template, endpoint.unavailable))['Retry-After']).toBe('5');
			// setup_fault decides, not the code or the status: the same item marked as one is a 500.
			const marked = { ...error, details: { ...(error.details as Json), setup_fault: true } };
			expect(answer(marked).at(-1)).toBe('Fail: setup error');
		});

		it('a 4xx keeps its status, without Retry-After, or is a fault in the setup (02)', () => {
			for (const [name, error] of endpoint.refusals) {
				const item = endpoint.item(error);
				if (!endpoint.refused) {
					expect(answer(error).slice(-2), name).toEqual(['Respond 500', 'Fail: setup error']);
					const body = value(node(template, 'Respond 500').parameters.responseBody, item) as Json;
					expect(JSON.stringify(body), name).not.toContain(String(error.error));
					continue;
				}
				expect(answer(error).at(-1), name).toBe(endpoint.refused);
				const respond = node(template, endpoint.refused);
				const status = (error.details as { http_status: number }).http_status;
				expect(status, name).toBeGreaterThanOrEqual(400);
				expect(status, name).toBeLessThan(500);
				expect(responseCode(respond, item), name).toBe(status);
				expect(value(respond.parameters.responseBody, item), name).toMatchObject({
					status,
					detail: error.error,
				});
				expect(responseHeaders(respond)).toEqual({ 'Content-Type': 'application/problem+json' });
			}
		});

		it.each(endpoint.settings ?? endpoint.refusals)(
			'a refusal of its own settings (%s) is a fault in the setup: 500, the execution fails naming it',
			(_, error: Json) => {
				expect(answer(error).slice(-2)).toEqual(['Respond 500', 'Fail: setup error']);
				const item = endpoint.item(error);
				const body = value(node(template, 'Respond 500').parameters.responseBody, item) as Json;
				expect(JSON.stringify(body)).not.toContain(String(error.error));
				const fix = (error.details as { fix: string | null }).fix;
				expect(value(node(template, 'Fail: setup error').parameters.errorMessage, item)).toBe(
					`${endpoint.failPrefix}${String(error.error)}${fix ? `. Fix: ${fix}` : ''}`,
				);
			},
		);

		it('the 500 is problem+json without Retry-After and without internal detail; the failed execution names the reason and the fix', () => {
			const respond = node(template, 'Respond 500');
			const error = fromDriver({ code: '28P01', message: 'password authentication failed' });
			const item = endpoint.item(error);
			expect(responseCode(respond, item)).toBe(500);
			expect(responseHeaders(respond)).toEqual({ 'Content-Type': 'application/problem+json' });
			const body = value(respond.parameters.responseBody, item) as Json;
			expect(body).toMatchObject({ status: 500, title: 'Internal server error' });
			expect(body.detail).toMatch(/will not help until/);
			expect(JSON.stringify(body)).not.toMatch(SECRET_WORDS);
			// The type of the template's other answers (02: about:blank).
			const unavailable = value(node(template, endpoint.unavailable).parameters.responseBody, item);
			expect(body.type).toBe((unavailable as Json).type);
			expect(value(node(template, 'Fail: setup error').parameters.errorMessage, item)).toBe(
				`${endpoint.failPrefix}PostgreSQL rejected the user name or password. Fix: Check User and Password in the Durable Jobs Postgres credential`,
			);
		});
	},
);

describe('Status (02)', () => {
	it('Found → 200; Not Found (a malformed job id or token too) → 404; an error → the two checks', () => {
		expect(targets(status, 'Job Status')).toEqual([
			['Respond 200'],
			['Respond 404'],
			['Store unavailable?'],
		]);
	});

	it('answers in its own about:blank style, and has no answer that would quote a 4xx to the caller', () => {
		expect(status.nodes.map((entry) => entry.name)).not.toContain('Respond error');
		expect(
			value(
				node(status, 'Respond 500').parameters.responseBody,
				fromDriver({ code: '42501', message: 'x' }),
			),
		).toMatchObject({ type: 'about:blank' });
	});
});

describe('Reconciliation report (09)', () => {
	it('the 500 names the error code, as the 503 does', () => {
		const error = fromDriver({ code: '42501', message: 'permission denied for table jobs' });
		expect(walk(report, 'Failed?', error).path).toEqual([
			'Failed?',
			'Store unavailable?',
			'Request refused?',
			'Respond 500',
			'Fail: setup error',
		]);
		const body = value(node(report, 'Respond 500').parameters.responseBody, error) as Json;
		expect(body).toMatchObject({ code: 'permission_denied', status: 500 });
		expect(body.detail).toContain('(permission_denied)');
	});
});

describe('Event intake (06): a setup fault of Outbox Write after the CRM call', () => {
	/** Mark failed's item: Outbox Write's error item (its input, the CRM answer, merged in) and the settled claim. */
	const markFailed = (error: Json) => ({
		statusCode: 201,
		headers: {},
		body: { id: 'crm-1' },
		...error,
		idempotency: { scope: 'events', key: 'evt-1', status: 'failed', settled: true },
	});

	it('the claim is failed first, then a setup fault answers 500 and fails the execution; anything else 503 retry_later', () => {
		expect(targets(intake, 'Outbox Write')[1]).toEqual(['Mark failed']);
		expect(targets(intake, 'Mark failed')).toEqual([
			['Outbox setup fault?'],
			['Outbox setup fault?'],
		]);
		const permission = markFailed(
			fromDriver({ code: '42501', message: 'permission denied for table jobs' }),
		);
		expect(walk(intake, 'Outbox setup fault?', permission).path).toEqual([
			'Outbox setup fault?',
			'Respond 500 (outbox)',
			'Fail: setup error (outbox)',
		]);
		for (const [name, error] of OUTAGES)
			expect(walk(intake, 'Outbox setup fault?', markFailed(error)).path.at(-1), name).toBe(
				'Respond 503 retry',
			);
		// The CRM down or busy, or no answer from it: never a setup fault of this service.
		for (const item of [
			{ statusCode: 503, body: {}, idempotency: { key: 'evt-1' } },
			{ error: { message: 'connect ECONNREFUSED 10.0.0.9:443' }, idempotency: { key: 'evt-1' } },
		])
			expect(walk(intake, 'Outbox setup fault?', item).path.at(-1)).toBe('Respond 503 retry');

		const respond = node(intake, 'Respond 500 (outbox)');
		expect(responseCode(respond, permission)).toBe(500);
		expect(responseHeaders(respond)).toEqual({ 'Content-Type': 'application/problem+json' });
		const body = value(respond.parameters.responseBody, permission) as Json;
		expect(body).toMatchObject({ status: 500, title: 'Internal server error', event_id: 'evt-1' });
		expect(body.detail).toMatch(/will not help until .*not answered as a duplicate/);
		expect(JSON.stringify(body)).not.toMatch(SECRET_WORDS);
		expect(
			value(node(intake, 'Fail: setup error (outbox)').parameters.errorMessage, permission),
		).toBe(
			'Answered 500, event "evt-1" applied to the CRM but not written to the outbox: PostgreSQL denied access: permission denied for table jobs. Fix: Grant the runtime role the privileges listed in the README (section "Database privileges")',
		);
	});

	/** The way of an event Outbox Write refuses: the 422 after the failed claim, then the failed execution. */
	const OUTBOX_REFUSED = [
		'Outbox setup fault?',
		'Outbox refused the event?',
		'Respond 422 (outbox)',
		'Fail: event refused (outbox)',
	];
	/** Respond 422 (outbox)'s body for Mark failed's item, the event's body read through $('Claim event'). */
	const outboxAnswer = (item: Json, body: Json): Json =>
		value(node(intake, 'Respond 422 (outbox)').parameters.responseBody, item, {
			'Claim event': { body },
		}) as Json;

	// What Outbox Write's own validators throw for the event's data (Build envelope refuses every
	// such case it knows of before the claim; these are the ones it would not foresee).
	const EVENT_REFUSALS: Array<[string, Json, string]> = [
		['a blank event type', thrownErrorItem(() => validateKey(' ', 'eventType')), 'event_type'],
		[
			'an over-long event id',
			thrownErrorItem(() => validateKey('e'.repeat(256), 'eventId')),
			'event_id',
		],
		[
			'a source that is an object',
			thrownErrorItem(() => optionalText({}, 'source', 255)),
			'source',
		],
		[
			'a time it cannot read',
			thrownErrorItem(() => dateParameter('soon', 'UTC', 'Occurred At')),
			'occurred_at',
		],
		[
			'NUL in the payload',
			thrownErrorItem(() =>
				serializePayload({ data: 'a\u0000b' }, 'payload', { bytes: 1024 * 1024, raisedBy: null }),
			),
			'body',
		],
	];
	// Refusals of the flow's own settings: nothing the sender can fix.
	const SETTING_REFUSALS: Array<[string, Json]> = [
		['a queue name it refuses', thrownErrorItem(() => validateQueueName('Outbox!', 'queue'))],
		["the credential's schema name", thrownErrorItem(() => validateSchemaName('Jobs'))],
		[
			'a failing expression (invalid_parameter)',
			// n8n names the parameter whose expression failed, here one of the event's fields.
			errorJson(
				new DurableJobsError('invalid_parameter', 'eventType: bad expression', {
					field: 'eventType',
					httpStatus: 400,
				}),
			),
		],
	];

	it.each(EVENT_REFUSALS)(
		'Outbox Write refusing the event itself (%s): the claim is failed, 422 outbox_rejected naming the request field, and the execution fails',
		(_name, error, requestField) => {
			expect(error.details).toMatchObject({ http_status: expect.any(Number) });
			const item = markFailed(error);
			expect(walk(intake, 'Outbox setup fault?', item).path).toEqual(OUTBOX_REFUSED);
			const respond = node(intake, 'Respond 422 (outbox)');
			expect(responseCode(respond, item)).toBe(422);
			expect(responseHeaders(respond)).toEqual({ 'Content-Type': 'application/problem+json' });
			const body = outboxAnswer(item, { event_type: 'x' });
			expect(body).toMatchObject({
				status: 422,
				code: 'outbox_rejected',
				field: requestField,
				event_id: 'evt-1',
			});
			expect(body.detail).toContain(String(error.error));
			expect(body.detail).toMatch(/applied to the CRM.*refused again/);
			expect(body.fix).toMatch(/not answered as a duplicate/);
			expect(
				value(node(intake, 'Fail: event refused (outbox)').parameters.errorMessage, item),
			).toMatch(
				new RegExp(
					`^Answered 422, event "evt-1" applied to the CRM but refused by Outbox Write, so no outbox event was written: .*\\. Fix: `,
				),
			);
		},
	);

	it('an event id the outbox still holds for another event (kept longer than its claim): 422 event_id_reused with the existing event, and the execution fails', () => {
		const item = markFailed(errorJson(new EventIdReusedError('evt-1', 'job-9')));
		expect(walk(intake, 'Outbox setup fault?', item).path).toEqual(OUTBOX_REFUSED);
		const body = outboxAnswer(item, { event_id: 'evt-1' });
		expect(body).toMatchObject({
			status: 422,
			code: 'event_id_reused',
			field: 'event_id',
			event_id: 'evt-1',
			existing_job_id: 'job-9',
		});
		expect(body.fix).toMatch(/its own event_id/);
		// Only this refusal names an existing event.
		const [, other] = EVENT_REFUSALS[0];
		expect(outboxAnswer(markFailed(other), { event_type: ' ' })).not.toHaveProperty(
			'existing_job_id',
			expect.anything(),
		);
	});

	it('an event type made from the status is named as status', () => {
		const [, error] = EVENT_REFUSALS[0];
		const body = outboxAnswer(markFailed(error), { status: ' ' });
		expect(body.field).toBe('status');
	});

	it.each(SETTING_REFUSALS)(
		'Outbox Write refusing a setting of the flow (%s) is a setup fault: 500 and a failed execution',
		(_name, error) => {
			expect(walk(intake, 'Outbox setup fault?', markFailed(error)).path).toEqual([
				'Outbox setup fault?',
				'Respond 500 (outbox)',
				'Fail: setup error (outbox)',
			]);
		},
	);
});

describe('Event intake (06): a body not sent as application/json is a 415, before anything is claimed', () => {
	const code = node(intake, 'Build envelope').parameters.jsCode as string;
	const event = {
		source: 'shop',
		external_id: 'o-1',
		status: 'paid',
		occurred_at: '2026-01-01T00:00:00Z',
	};
	const request = (body: unknown, headers: Json) => ({ ...webhookItem({}, body), headers });
	const answer = (body: unknown, headers: Json) =>
		walk(intake, 'Build envelope', request(body, headers));

	it.each([
		// n8n turns a form into fields: this one reads like a valid event.
		['a form', 'application/x-www-form-urlencoded', event, /must be application\/json/],
		['XML (n8n makes it a document)', 'application/xml', { event }, /must be application\/json/],
		['XML as text/xml', 'text/xml; charset=utf-8', { event }, /must be application\/json/],
		['text', 'text/plain', {}, /must be application\/json \(got "text\/plain"\)/],
		['multipart', 'multipart/form-data; boundary=x', event, /must be application\/json/],
		[
			'a +json type (n8n leaves it unread)',
			'application/vnd.api+json',
			{},
			/n8n reads the body only when/,
		],
	])('%s → 415 naming Content-Type', (_, type, body, message) => {
		const { path, json } = answer(body, { 'content-type': type });
		expect(path).toEqual(['Build envelope', 'Valid?', 'Content-Type JSON?', 'Respond 415']);
		expect(json).toMatchObject({ valid: false, unsupported_media_type: true });
		expect(json.problems).toEqual([
			{ field: 'Content-Type', message: expect.stringMatching(message) },
		]);
	});

	it('no Content-Type → 415, saying it is missing (n8n reads no body without one)', () => {
		const { path, json } = answer({}, {});
		expect(path.at(-1)).toBe('Respond 415');
		expect(json.problems).toEqual([
			{
				field: 'Content-Type',
				message: expect.stringMatching(/^is missing: send the body as JSON/),
			},
		]);
	});

	it.each(['application/json', 'application/json; charset=utf-8', 'Application/JSON'])(
		'%s is read: the event is claimed (the same fields as a form are not)',
		(type) => {
			const { path, json } = answer(event, { 'content-type': type });
			expect(path).toEqual(['Build envelope', 'Valid?', 'Claim event']);
			expect(json).toMatchObject({ valid: true, problems: [] });
			const form = answer(event, { 'content-type': 'application/x-www-form-urlencoded' });
			expect(form.path).not.toContain('Claim event');
		},
	);

	it('JSON with missing fields is still a 400; the 415 is problem+json like the receiver’s', () => {
		expect(answer({ data: 1 }, { 'content-type': 'application/json' }).path.at(-1)).toBe(
			'Respond 400',
		);
		const refused = new Function('$json', code)(
			request({}, { 'content-type': 'application/xml' }),
		) as { json: Json };
		const respond = node(intake, 'Respond 415');
		expect(responseCode(respond, refused.json)).toBe(415);
		expect(responseHeaders(respond)).toEqual({ 'Content-Type': 'application/problem+json' });
		expect(value(respond.parameters.responseBody, refused.json)).toEqual(XML_BODY_REFUSED);
	});
});

describe('Event intake (06): what Outbox Write would refuse after the CRM call is a 400 before anything is claimed', () => {
	const event = {
		source: 'shop',
		external_id: 'o-1',
		status: 'paid',
		occurred_at: '2026-01-01T00:00:00Z',
	};
	const answer = (body: Json) =>
		walk(intake, 'Build envelope', {
			...webhookItem({}, body),
			headers: { 'content-type': 'application/json' },
		});
	const limit = { bytes: 1024 * 1024, raisedBy: null };
	/** What Outbox Write's own checks (src/core/outbox.ts) say of the envelope Build envelope made. */
	function outboxRefuses(envelope: Json): boolean {
		try {
			validateKey(envelope.event_id, 'eventId');
			validateKey(envelope.event_type, 'eventType');
			optionalText(envelope.source, 'source', 255);
			serializePayload(envelope, 'payload', limit);
			return false;
		} catch {
			return true;
		}
	}

	it.each([
		['a blank event_id', { ...event, event_id: '  ' }, 'event_id', /must not be blank/],
		[
			'an event_id of 256 characters',
			{ ...event, event_id: 'e'.repeat(256) },
			'event_id',
			/at most 255/,
		],
		['an event_id with a tab', { ...event, event_id: 'a\tb' }, 'event_id', /control characters/],
		[
			'a derived event id over 255 characters',
			{ ...event, external_id: 'x'.repeat(230) },
			'event_id',
			/at most 255 characters \(source, external_id, status and occurred_at together\)/,
		],
		['a blank event_type', { ...event, event_type: '' }, 'event_type', /non-blank text/],
		[
			'an event_type that is an object',
			{ ...event, event_type: { a: 1 } },
			'event_type',
			/non-blank text/,
		],
		[
			'a status that makes an event_type over 255 characters',
			{ ...event, event_id: 'e-1', status: 's'.repeat(250) },
			'status',
			/entity\.<status>/,
		],
		[
			'a source that is an object',
			{ ...event, event_id: 'e-1', source: { a: 1 } },
			'source',
			/at most 255/,
		],
		[
			'a source of 256 characters',
			{ ...event, event_id: 'e-1', source: 's'.repeat(256), external_id: undefined },
			'source',
			/at most 255/,
		],
		['NUL in the data', { ...event, data: { note: 'a\u0000b' } }, 'body', /NUL/],
		[
			'half of a surrogate pair in the data',
			{ ...event, data: { note: 'a\ud800b' } },
			'body',
			/surrogate/,
		],
		['data over 1 MiB', { ...event, data: { text: 'x'.repeat(1024 * 1024) } }, 'data', /too large/],
		[
			'data over 1 MiB of UTF-8 in fewer characters',
			{ ...event, data: { text: 'é'.repeat(600_000) } },
			'data',
			/the event is \d+ bytes/,
		],
	])(
		'%s → 400 naming the field; Outbox Write would refuse the same envelope',
		(_, body, field, message) => {
			const { path, json } = answer(body as Json);
			expect(path).toEqual(['Build envelope', 'Valid?', 'Content-Type JSON?', 'Respond 400']);
			expect(json.problems).toEqual([{ field, message: expect.stringMatching(message) }]);
			// Build envelope makes the envelope whatever its checks find: one Outbox Write refuses.
			expect(outboxRefuses(json.envelope as Json)).toBe(true);
		},
	);

	it.each([
		['the usual event', event],
		['an emoji in the data (a whole surrogate pair)', { ...event, data: { note: 'paid 👍' } }],
		[
			'a numeric source and a 255-character event_id',
			{ ...event, source: 7, event_id: 'e'.repeat(255) },
		],
		['data just under 1 MiB', { ...event, data: { text: 'x'.repeat(1024 * 1024 - 200) } }],
		['a 255-character event_type', { ...event, event_type: 't'.repeat(255) }],
	])('%s is claimed, and Outbox Write takes its envelope', (_, body) => {
		const { path, json } = answer(body as Json);
		expect(json.problems).toEqual([]);
		expect(path).toEqual(['Build envelope', 'Valid?', 'Claim event']);
		expect(outboxRefuses(json.envelope as Json)).toBe(false);
	});
});

describe.each(['03-dispatcher.json', '04-worker.json'])(
	'%s: the AI answer is read as JSON whatever its Content-Type; an unreadable one is retried',
	(file) => {
		const template = load(file);
		const fields = { name: 'Ada', email: 'ada@example.com', amount: 7 };
		const config = {
			job_id: 'job-1',
			crm_timeout_ms: 30000,
			payload: { document: { id: 'doc-1' } },
		};

		/** The item Call AI puts out for a 2xx answer, and where it goes after AI answered 2xx?. */
		function afterAnswer(answer: Json) {
			const item = { statusCode: 200, statusMessage: 'OK', ...answer };
			expect(walk(template, 'AI answered 2xx?', item).path.slice(0, 2)).toEqual([
				'AI answered 2xx?',
				targets(template, 'AI answered 2xx?')[0][0],
			]);
			return { item, ...walk(template, targets(template, 'AI answered 2xx?')[0][0], item) };
		}

		/** What AI failed (Job Complete, From HTTP Status) records for an item. */
		function aiFailed(item: Json) {
			const parameters = node(template, 'AI failed').parameters;
			expect(parameters.outcome).toBe('httpStatus');
			const status = Number(value(parameters.httpStatus, item));
			const classified = classifyHttpStatus(status);
			return {
				outcome: classified.outcome,
				errorCode: (value(parameters.errorCode, item) as string) || classified.errorCode,
				errorMessage: value(parameters.errorMessage, item),
			};
		}

		/** The fields Create CRM record sends (and Finish job keeps) for an answer that got there. */
		function sentFields(item: Json, json: Json) {
			const upstream = { 'Call AI': item, 'Read AI answer': json, Config: config };
			const crm = JSON.parse(
				value(node(template, 'Create CRM record').parameters.jsonBody, {}, upstream) as string,
			) as Json;
			const result = value(
				node(template, 'Finish job').parameters.result,
				{ body: { id: 'crm-1' } },
				upstream,
			) as Json;
			return { crm: crm.fields, result: result.fields };
		}

		it('Call AI takes every answer as text (Response Format: Text): Read AI answer reads it', () => {
			expect(
				(node(template, 'Call AI').parameters.options as { response: { response: Json } }).response
					.response,
			).toEqual({ fullResponse: true, neverError: true, responseFormat: 'text' });
		});

		const json = (type: string, data: string) => ({ data, headers: { 'content-type': type } });

		it.each([
			['application/json', json('application/json; charset=utf-8', JSON.stringify({ fields }))],
			['text/plain', json('text/plain; charset=utf-8', JSON.stringify({ fields }))],
			['application/vnd.api+json', json('application/vnd.api+json', JSON.stringify({ fields }))],
			[
				'Application/JSON, with spaces around',
				json('Application/JSON', ` ${JSON.stringify({ fields })}\n`),
			],
			['no Content-Type', { data: JSON.stringify({ fields }), headers: {} }],
		])('JSON with fields sent as %s → the CRM record is created from its fields', (_, answer) => {
			const { item, path, json: read } = afterAnswer(answer);
			expect(path.at(-1)).toBe('Checkpoint: CRM request');
			expect(sentFields(item, read)).toEqual({ crm: fields, result: fields });
			// The text is not carried on: the parsed answer is.
			expect(read).not.toHaveProperty('data');
		});

		it.each([
			['application/json without fields', json('application/json', '{"model":"m"}')],
			['text/plain JSON without fields', json('text/plain', '{"model":"m"}')],
			['JSON that is not an object', json('application/json', '[1, 2]')],
			// n8n parses a JSON answer itself (the request is JSON) and hands a scalar on as is.
			['the JSON number 42', { data: 42, headers: { 'content-type': 'application/json' } }],
			['JSON null', { data: null, headers: { 'content-type': 'application/json' } }],
			['JSON false', { data: false, headers: { 'content-type': 'application/json' } }],
			['{}', json('application/json', '{}')],
			// Go's encoder ends its JSON with a newline; a gzip or chunked {} arrives as {} too.
			['{} and a newline', json('application/json', '{}\n')],
		])('%s → Failed at once (ai_contract)', (_, answer) => {
			expect(afterAnswer(answer).path.at(-1)).toBe('AI answer unusable');
			expect(node(template, 'AI answer unusable').parameters).toMatchObject({
				outcome: 'failed',
				errorCode: 'ai_contract',
			});
		});

		it.each([
			[
				'application/json cut short',
				json('application/json', '{"fields": {"name": "Ad'),
				/a body that is not JSON \(Content-Type: application\/json\)/,
			],
			['application/json empty', json('application/json', ''), /no body to read as JSON/],
			['only white space', json('application/json', ' \n'), /no body to read as JSON/],
			[
				'text that is not JSON',
				json('text/plain', 'upstream connect error'),
				/a body that is not JSON \(Content-Type: text\/plain\)/,
			],
			['an HTML page', json('text/html', '<html>Bad gateway</html>'), /not JSON/],
			[
				'no body at all (n8n gives no data)',
				{ headers: {} },
				/no body to read as JSON \(Content-Type: none\)/,
			],
		])('%s → AI failed: Retry (ai_unreadable), never ai_contract', (_, answer, message) => {
			const { path, json: read } = afterAnswer(answer);
			expect(path.at(-1)).toBe('AI failed');
			const recorded = aiFailed(read);
			expect(recorded).toMatchObject({ outcome: 'retry', errorCode: 'ai_unreadable' });
			expect(recorded.errorMessage).toMatch(/^AI endpoint answered HTTP 200 with /);
			expect(recorded.errorMessage).toMatch(message);
		});

		it('AI failed still reads other answers by their status, and no answer as no answer', () => {
			expect(aiFailed({ statusCode: 503, body: {} })).toMatchObject({
				outcome: 'retry',
				errorCode: 'http_503',
			});
			expect(aiFailed({ statusCode: 400, body: {} })).toMatchObject({
				outcome: 'failed',
				errorCode: 'http_400',
			});
			expect(aiFailed({ error: { message: 'timeout' } })).toEqual({
				outcome: 'retry',
				errorCode: 'http_no_response',
				errorMessage: 'AI endpoint did not answer: timeout',
			});
		});
	},
);
