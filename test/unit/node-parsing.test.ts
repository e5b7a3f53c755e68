import { createHash } from 'node:crypto';

import {
	DurableJobsError,
	canonicalJson,
	classifyHttpStatus,
	fingerprint,
	retryAfterMs,
} from '../../src/core';
import { parseAlsoRetryStatuses } from '../../nodes/JobComplete/JobComplete.node';
import { keyFromFields } from '../../nodes/IdempotencyCheck/IdempotencyCheck.node';
import { deriveEventId, parseQueryParameters } from '../../nodes/OutboxWrite/OutboxWrite.node';
import {
	headerValue,
	isWebhookItem,
	itemPayload,
	optionalNumber,
	parseJsonParameter,
	secondsToMs,
} from '../../nodes/shared/batch';
import { dateParameter } from '../../nodes/shared/dates';
import { webhookItem } from '../helpers/n8n-items';

function thrown(work: () => unknown): DurableJobsError {
	try {
		work();
	} catch (error) {
		expect(error).toBeInstanceOf(DurableJobsError);
		return error as DurableJobsError;
	}
	throw new Error('expected an error');
}

describe('webhook items', () => {
	const webhook = webhookItem(
		{ document: 'a.pdf' },
		{ 'Idempotency-Key': 'key-1', 'X-Multi': ['first', 'second'] as unknown as string },
	);

	it('recognises the Webhook node output shape and nothing else', () => {
		expect(isWebhookItem(webhook)).toBe(true);
		// n8n's Webhook node output for a GET without body still has body: {}.
		expect(isWebhookItem({ headers: {}, params: {}, query: { a: '1' }, body: {} })).toBe(true);
		expect(isWebhookItem({ body: { a: 1 } })).toBe(false);
		expect(isWebhookItem({ headers: 'x', body: {}, query: {} })).toBe(false);
		expect(isWebhookItem({ headers: null, body: {}, query: {} })).toBe(false);
		expect(isWebhookItem({ headers: {}, body: {} })).toBe(false);
		expect(isWebhookItem({ headers: {}, query: {}, params: {} })).toBe(false);
	});

	it('reads headers case-insensitively, first value of repeated headers, only from webhook items', () => {
		expect(headerValue(webhook, 'idempotency-key')).toBe('key-1');
		expect(headerValue(webhook, 'IDEMPOTENCY-KEY')).toBe('key-1');
		expect(headerValue(webhook, 'x-multi')).toBe('first');
		expect(headerValue(webhook, 'x-missing')).toBeUndefined();
		expect(headerValue({ headers: { 'idempotency-key': 'k' } }, 'idempotency-key')).toBeUndefined();
		expect(
			headerValue(webhookItem({}, { 'content-length': 12 as unknown as string }), 'content-length'),
		).toBe('12');
	});

	it('the payload is the request body for webhook items, else the whole item', () => {
		expect(itemPayload(webhook)).toEqual({ document: 'a.pdf' });
		expect(itemPayload({ document: 'b.pdf', body: 'not a webhook' })).toEqual({
			document: 'b.pdf',
			body: 'not a webhook',
		});
	});
});

describe('parameter parsing', () => {
	it('parseJsonParameter parses JSON text, passes values through and names the field when invalid', () => {
		expect(parseJsonParameter('{"a": [1, 2]}', 'Custom Payload')).toEqual({ a: [1, 2] });
		expect(parseJsonParameter('  42 ', 'Custom Payload')).toBe(42);
		expect(parseJsonParameter({ already: 'object' }, 'Custom Payload')).toEqual({
			already: 'object',
		});
		expect(parseJsonParameter('   ', 'Custom Payload')).toBeUndefined();
		const error = thrown(() => parseJsonParameter('{"a":', 'Custom Payload'));
		expect(error.field).toBe('Custom Payload');
		expect(error.message).toMatch(/Custom Payload.*not valid JSON/);
		expect(error.fix).toMatch(/valid JSON/);
		expect(error.httpStatus).toBe(400);
	});

	it('secondsToMs converts seconds and rejects negative or non-numeric values with the field name', () => {
		expect(secondsToMs(1.5, 'Delay Seconds')).toBe(1500);
		expect(secondsToMs('2', 'Delay Seconds')).toBe(2000);
		expect(secondsToMs(0, 'Delay Seconds')).toBe(0);
		expect(secondsToMs('', 'Delay Seconds')).toBeUndefined();
		expect(secondsToMs(undefined, 'Delay Seconds')).toBeUndefined();
		expect(secondsToMs(null, 'Delay Seconds')).toBeUndefined();
		for (const bad of [-1, 'soon', Number.NaN, Number.POSITIVE_INFINITY]) {
			const error = thrown(() => secondsToMs(bad, 'Delay Seconds'));
			expect(error.field).toBe('Delay Seconds');
			expect(error.fix).toMatch(/number of seconds/);
		}
	});

	it('optionalNumber gives undefined for nothing, the number at or above its minimum, and else an error with the rule', () => {
		const rule = { min: 1, expected: 'a number of at least 1', fix: 'Set Size to 1 or more' };
		expect(optionalNumber(undefined, 'Size', rule)).toBeUndefined();
		expect(optionalNumber(null, 'Size', rule)).toBeUndefined();
		expect(optionalNumber('', 'Size', rule)).toBeUndefined();
		expect(optionalNumber(1, 'Size', rule)).toBe(1);
		expect(optionalNumber('2.5', 'Size', rule)).toBe(2.5);
		for (const bad of [0.5, 0, -3, 'big', Number.NaN, Number.POSITIVE_INFINITY, {}]) {
			const error = thrown(() => optionalNumber(bad, 'Size', rule));
			expect(error.field).toBe('Size');
			expect(error.message).toMatch(/Size.*must be a number of at least 1/);
			expect(error.fix).toBe('Set Size to 1 or more');
		}
	});

	it('keyFromFields joins dotted field values, canonicalises objects and hashes long keys', () => {
		const item = {
			body: { source: 'shop', order: { id: 7, lines: { b: 2, a: 1 } }, status: 'paid' },
		};
		expect(keyFromFields(item, ['body.source', 'body.order.id', 'body.status'])).toBe(
			'shop:7:paid',
		);
		expect(keyFromFields(item, ['body.order.lines'])).toBe('{"a":1,"b":2}');
		const long = { text: 'x'.repeat(300) };
		expect(keyFromFields(long, ['text'])).toBe(
			`sha256:${createHash('sha256').update('x'.repeat(300)).digest('hex')}`,
		);
		expect(keyFromFields(long, ['text']).length).toBeLessThanOrEqual(255);
		for (const missing of ['body.nope', 'body.order.id.deeper']) {
			const error = thrown(() => keyFromFields(item, [missing]));
			expect(error.field).toBe('keyFields');
			expect(error.message).toContain(missing);
		}
		expect(thrown(() => keyFromFields({ a: '' }, ['a'])).field).toBe('keyFields');
		// 0 and false are values, not missing.
		expect(keyFromFields({ a: 0, b: false }, ['a', 'b'])).toBe('0:false');
	});

	it('keyFromFields: different values of several fields never give one key (":" and "\\" escaped)', () => {
		const key = (a: string, b: string) => keyFromFields({ a, b }, ['a', 'b']);
		expect(key('x:y', 'z')).not.toBe(key('x', 'y:z'));
		expect(key('x\\', ':z')).not.toBe(key('x\\:', 'z'));
		expect(key('x:y', 'z')).toBe('x\\:y:z');
		expect(key('x\\', 'z')).toBe('x\\\\:z');
		// Keys of values without ':' or '\\' are as before, and one field is never escaped.
		expect(key('shop', 'paid')).toBe('shop:paid');
		expect(keyFromFields({ a: 'x:y' }, ['a'])).toBe('x:y');
		expect(keyFromFields({ a: { k: 1 } }, ['a'])).toBe('{"k":1}');
		const combos = [
			['a:b', 'c'],
			['a', 'b:c'],
			['a\\', 'b'],
			['a', '\\:b'],
			['a\\', ':b'],
			['a\\:', 'b'],
		];
		const keys = combos.map(([a, b]) => key(a, b));
		expect(new Set(keys).size).toBe(keys.length);
	});

	it('deriveEventId is stable and never random: event_id, else type + id, else type + payload hash', () => {
		expect(deriveEventId('order.paid', { event_id: 'evt-1', id: 9 })).toBe('evt-1');
		expect(deriveEventId('order.paid', { id: 9 })).toBe('order.paid:9');
		expect(deriveEventId('order.paid', { id: 'ord_1' })).toBe('order.paid:ord_1');
		const hashed = deriveEventId('order.paid', { b: 1, a: 2 });
		expect(hashed).toBe(`order.paid:sha256:${fingerprint({ a: 2, b: 1 })}`);
		expect(deriveEventId('order.paid', { a: 2, b: 1 })).toBe(hashed);
		expect(deriveEventId('order.paid', { id: { nested: true } })).toMatch(
			/^order\.paid:sha256:[0-9a-f]{64}$/,
		);
		expect(deriveEventId('order.paid', ['x'])).toBe(`order.paid:sha256:${fingerprint(['x'])}`);
		expect(deriveEventId('order.paid', 'text')).toBe(`order.paid:sha256:${fingerprint('text')}`);
		expect(deriveEventId('order.paid', { id: 9 })).not.toBe(
			deriveEventId('order.shipped', { id: 9 }),
		);
	});

	it('parseQueryParameters accepts arrays, JSON arrays and comma-separated text', () => {
		expect(parseQueryParameters(['paid', 7])).toEqual(['paid', 7]);
		expect(parseQueryParameters('["paid", 7, null]')).toEqual(['paid', 7, null]);
		expect(parseQueryParameters('paid, 7')).toEqual(['paid', '7']);
		expect(parseQueryParameters('')).toEqual([]);
		expect(parseQueryParameters(undefined)).toEqual([]);
		expect(parseQueryParameters(7)).toEqual([7]);
		expect(thrown(() => parseQueryParameters('[1, 2')).field).toBe('Query Parameters');
	});
});

describe('core helpers the nodes rely on', () => {
	it('classifyHttpStatus: 2xx succeeded; 408/425/429/5xx/no answer retry; other 4xx failed (needs_mapping)', () => {
		expect(classifyHttpStatus(200)).toEqual({
			outcome: 'succeeded',
			errorClass: null,
			errorCode: null,
		});
		expect(classifyHttpStatus(204).outcome).toBe('succeeded');
		for (const status of [408, 425, 429, 500, 502, 503, 504]) {
			expect(classifyHttpStatus(status), String(status)).toEqual({
				outcome: 'retry',
				errorClass: 'retryable',
				errorCode: `http_${status}`,
			});
		}
		for (const status of [0, null, undefined, Number.NaN]) {
			expect(classifyHttpStatus(status)).toEqual({
				outcome: 'retry',
				errorClass: 'retryable',
				errorCode: 'http_no_response',
			});
		}
		for (const status of [400, 401, 403, 404, 409, 422]) {
			expect(classifyHttpStatus(status), String(status)).toEqual({
				outcome: 'failed',
				errorClass: 'needs_mapping',
				errorCode: `http_${status}`,
			});
		}
		expect(classifyHttpStatus(302)).toEqual({
			outcome: 'failed',
			errorClass: 'needs_manual_review',
			errorCode: 'http_302',
		}); // Told to, a 4xx retries: 409 for a request with an Idempotency-Key.
		expect(classifyHttpStatus(409, [409])).toEqual({
			outcome: 'retry',
			errorClass: 'retryable',
			errorCode: 'http_409',
		});
		expect(classifyHttpStatus(422, [409]).outcome).toBe('failed');
		expect(classifyHttpStatus(200, [409]).outcome).toBe('succeeded');
	});

	it('retryAfterMs: delay-seconds or an HTTP date (RFC 9110), undefined for anything else', () => {
		const now = Date.parse('2026-12-07T10:00:00.000Z');
		expect(retryAfterMs('120', now)).toBe(120_000);
		expect(retryAfterMs(' 0 ', now)).toBe(0);
		expect(retryAfterMs(30, now)).toBe(30_000);
		expect(retryAfterMs(['7', '9'], now)).toBe(7_000);
		expect(retryAfterMs('Mon, 07 Dec 2026 10:01:30 GMT', now)).toBe(90_000);
		// A date rounds up to whole seconds; one that has passed asks for no wait.
		expect(retryAfterMs('Mon, 07 Dec 2026 10:00:00 GMT', now - 200)).toBe(1_000);
		expect(retryAfterMs('Mon, 07 Dec 2026 09:00:00 GMT', now)).toBe(0);
		// The two older forms of an HTTP date (RFC 850, asctime).
		expect(retryAfterMs('Monday, 07-Dec-26 10:00:30 GMT', now)).toBe(30_000);
		expect(retryAfterMs('Mon Dec  7 10:00:45 2026', now)).toBe(45_000);
		for (const unreadable of [
			undefined,
			null,
			'',
			' ',
			'1.5',
			'-3',
			'+5',
			'10s',
			'soon',
			'try again in 3000',
			'2026-12-07T10:05:00Z',
			'Mon, 07 Dec 2026 10:01:30',
			1.5,
			-1,
			{},
		])
			expect(retryAfterMs(unreadable, now), JSON.stringify(unreadable)).toBeUndefined();
	});

	it('parseAlsoRetryStatuses: 4xx codes, comma-separated, or a number or array from an expression', () => {
		expect(parseAlsoRetryStatuses('')).toEqual([]);
		expect(parseAlsoRetryStatuses(undefined)).toEqual([]);
		expect(parseAlsoRetryStatuses('409')).toEqual([409]);
		expect(parseAlsoRetryStatuses(' 409, 423 ,')).toEqual([409, 423]);
		expect(parseAlsoRetryStatuses(409)).toEqual([409]);
		expect(parseAlsoRetryStatuses([409, '423'])).toEqual([409, 423]);
		for (const bad of [
			'abc',
			'409;423',
			'200',
			'302',
			'500',
			'4090',
			'40',
			'409.5',
			-409,
			[409, 'x'],
		])
			expect(thrown(() => parseAlsoRetryStatuses(bad)).field, JSON.stringify(bad)).toBe(
				'Also Retry Statuses',
			);
	});

	it('canonicalJson sorts keys at every depth and drops undefined members; fingerprint follows it', () => {
		expect(canonicalJson({ b: 1, a: { d: [3, { f: 1, e: 2 }], c: undefined } })).toBe(
			'{"a":{"d":[3,{"e":2,"f":1}]},"b":1}',
		);
		expect(canonicalJson([undefined, 1])).toBe('[null,1]');
		expect(canonicalJson(null)).toBe('null');
		expect(canonicalJson('x')).toBe('"x"');
		expect(fingerprint({ a: 1, b: 2 })).toBe(fingerprint({ b: 2, a: 1 }));
		expect(fingerprint({ a: 1 })).not.toBe(fingerprint({ a: '1' }));
		expect(fingerprint({ a: [1, 2] })).not.toBe(fingerprint({ a: [2, 1] }));
		expect(fingerprint({ a: 1 })).toBe(createHash('sha256').update('{"a":1}').digest('hex'));
	});

	it('canonicalJson writes a Date (anything with toJSON) as JSON.stringify does, so payloads differing only in one differ', () => {
		expect(canonicalJson({ at: new Date(0), n: 1 })).toBe(
			'{"at":"1970-01-01T00:00:00.000Z","n":1}',
		);
		expect(canonicalJson([new Date(0)])).toBe(JSON.stringify([new Date(0)]));
		expect(fingerprint({ at: new Date(0) })).not.toBe(fingerprint({ at: new Date(1) }));
		// toJSON is called once: what it returns is written as it is.
		const selfish = { toJSON: () => ({ b: 2, a: 1 }) };
		expect(canonicalJson({ x: selfish })).toBe('{"x":{"a":1,"b":2}}');
	});
});

describe('date parameters', () => {
	const asIso = (value: unknown, timeZone: string) =>
		dateParameter(value, timeZone, 'Occurred At')?.toISOString() ?? null;

	it("a wall time without a zone is in the workflow's time zone, a date alone at its midnight", () => {
		// Kathmandu is UTC+5:45 all year, New York UTC-5 in December: neither is a process's
		// usual zone, and a reading in the process's zone gives another instant.
		expect(asIso('2030-12-05T10:00:00', 'Asia/Kathmandu')).toBe('2030-12-05T04:15:00.000Z');
		expect(asIso('2030-12-05 10:00:00.5', 'America/New_York')).toBe('2030-12-05T15:00:00.500Z');
		expect(asIso(' 2030-12-05T10:00 ', 'America/New_York')).toBe('2030-12-05T15:00:00.000Z');
		expect(asIso('2030-12-05', 'Asia/Kathmandu')).toBe('2030-12-04T18:15:00.000Z');
		// ISO 8601's other spellings of the extended form: a lower-case t, the hour alone, a
		// decimal comma, more than nine decimals.
		expect(asIso('2030-12-05t10:00', 'Asia/Kathmandu')).toBe('2030-12-05T04:15:00.000Z');
		expect(asIso('2030-12-05T10', 'Asia/Kathmandu')).toBe('2030-12-05T04:15:00.000Z');
		expect(asIso('2030-12-05T10:00:00,5', 'Asia/Kathmandu')).toBe('2030-12-05T04:15:00.500Z');
		expect(asIso('2030-12-05 10:00:00.1234567891', 'Asia/Kathmandu')).toBe(
			'2030-12-05T04:15:00.123Z',
		);
	});

	it('an instant stays the instant it is, text that names its zone is read in it; nothing given is null', () => {
		const instant = new Date(Date.UTC(2030, 11, 5, 10));
		expect(asIso(instant, 'Asia/Kathmandu')).toBe('2030-12-05T10:00:00.000Z');
		expect(asIso(instant.getTime(), 'Asia/Kathmandu')).toBe('2030-12-05T10:00:00.000Z');
		const luxonLike = { toMillis: () => instant.getTime(), toString: () => 'not read' };
		expect(asIso(luxonLike, 'Asia/Kathmandu')).toBe('2030-12-05T10:00:00.000Z');
		expect(asIso('2030-12-05T12:00:00+02:00', 'Asia/Kathmandu')).toBe('2030-12-05T10:00:00.000Z');
		expect(asIso('2030-12-05T10:00:00Z', 'Asia/Kathmandu')).toBe('2030-12-05T10:00:00.000Z');
		expect(asIso('Thu, 05 Dec 2030 10:00:00 GMT', 'Asia/Kathmandu')).toBe(
			'2030-12-05T10:00:00.000Z',
		);
		for (const nothing of [undefined, null, ''])
			expect(dateParameter(nothing, 'UTC', 'Occurred At')).toBeNull();
	});

	it("other text is refused by the parameter's display name, with what to give instead", () => {
		const fix =
			"Pick a date and time, or give an ISO 8601 value such as 2030-01-31T12:00:00Z (without an offset it is in the workflow's time zone)";
		// n8n's parser would read the first two in the process's zone, and move the third into March.
		const refusals: Array<[unknown, RegExp]> = [
			['Dec 5 2030 10:00', /^Occurred At: "Dec 5 2030 10:00" has no time zone/],
			['12/05/2030', /^Occurred At: "12\/05\/2030" has no time zone/],
			['2024-02-30', /^Occurred At: "2024-02-30" names day 30 of a month with 29 days$/],
			['2030-12-05T24:30:00', /^Occurred At: "2030-12-05T24:30:00" is not a date and time$/],
			['soon', /^Occurred At: "soon" is not a date and time$/],
			[Number.NaN, /^Occurred At: "NaN" is not a date and time$/],
			[{ toMillis: () => Number.NaN }, /^Occurred At: "\[object Object\]" is not a date and time$/],
		];
		for (const [value, message] of refusals) {
			const error = thrown(() => dateParameter(value, 'Asia/Kathmandu', 'Occurred At'));
			expect(error.message).toMatch(message);
			expect(error).toMatchObject({
				code: 'invalid_input',
				field: 'Occurred At',
				fix,
				httpStatus: 400,
			});
		}
	});
});
