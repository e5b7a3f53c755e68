import { DurableJobsError, ValidationError } from '../../src/core';
import {
	fingerprint,
	optionalDate,
	optionalText,
	serializePayload,
	storableMessage,
	validateKey,
} from '../../src/core/validate';

function refusal(action: () => unknown): ValidationError {
	try {
		action();
	} catch (error) {
		if (error instanceof ValidationError) return error;
		throw error;
	}
	throw new Error('expected a ValidationError');
}

const oneMegabyte = { bytes: 1e6, raisedBy: null };

describe('what PostgreSQL jsonb cannot store is refused before it is sent, naming the field', () => {
	it('a NUL character is refused; the text "\\u0000" (an escaped backslash) is stored as it is', () => {
		expect(
			refusal(() => serializePayload({ a: 'x\u0000y' }, 'payload', oneMegabyte)).message,
		).toMatch(/^payload: contains a NUL character/);
		for (const text of ['C:\\u0000dir', '\\\\u0000', 'x\\\\\\\\u0000']) {
			expect(JSON.parse(serializePayload({ text }, 'payload', oneMegabyte))).toEqual({ text });
		}
		expect(refusal(() => serializePayload({ a: '\\\u0000' }, 'payload', oneMegabyte)).field).toBe(
			'payload',
		);
	});

	it('half of a surrogate pair is refused; whole pairs and the escaped text are stored', () => {
		for (const broken of ['\ud83d', 'end \ude00', 'x\ud800y', '\\\ud83d']) {
			const error = refusal(() => serializePayload({ note: broken }, 'result', oneMegabyte));
			expect(error.field).toBe('result');
			expect(error.message).toMatch(/half of a UTF-16 surrogate pair \(\\ud[89a-f][0-9a-f]{2}\)/i);
		}
		for (const fine of ['😀', 'a😀b', '\\ud83d', 'ü€']) {
			expect(JSON.parse(serializePayload({ note: fine }, 'result', oneMegabyte))).toEqual({
				note: fine,
			});
		}
	});

	it('a payload nested too deeply to fingerprint is a ValidationError, not a database error', () => {
		let deep: unknown = 1;
		for (let level = 0; level < 20_000; level++) deep = [deep];
		const error = refusal(() => fingerprint(deep, 'payload'));
		expect(error).toBeInstanceOf(DurableJobsError);
		expect(error.message).toMatch(/^payload: is nested too deeply/);
		expect(fingerprint([[[1]]])).toMatch(/^[0-9a-f]{64}$/);
	});

	it('dates outside the years 1 to 9999 are refused by name', () => {
		for (const value of ['0000-01-01T00:00:00Z', new Date(8.64e15), '+010000-01-01T00:00:00Z']) {
			expect(refusal(() => optionalDate(value, 'runAt')).message).toMatch(
				/^runAt: .* dates run from the year 1 to 9999/,
			);
		}
		expect(optionalDate('9999-12-31T23:59:59Z', 'runAt')?.getUTCFullYear()).toBe(9999);
		expect(optionalDate('0001-01-01T00:00:00Z', 'runAt')?.getUTCFullYear()).toBe(1);
	});

	it('text with a time of day but no time zone is refused by name; a date alone, Z, an offset and a named zone are read as such', () => {
		for (const value of [
			'2030-01-31T10:00:00',
			'2030-01-31 10:00',
			'2030-01-31T10:00:00.123',
			'Jan 31 2030 10:00',
			'01/31/2030',
			// Each of these ends like an offset or an ISO date, and JavaScript reads it in the
			// process's zone all the same.
			'01-31-2030',
			'31-Jan-2030',
			'2030-1-31',
			'+2030-01-31',
			'02030-01-31',
			'10:00 2030-01-31',
			'Jan 31 2030 10:00 PM',
		]) {
			const error = refusal(() => optionalDate(value, 'runAt'));
			expect(error.field).toBe('runAt');
			expect(error.message).toMatch(/^runAt: .* has no time zone/);
		}
		const read = (value: string) => optionalDate(value, 'runAt')?.toISOString();
		expect(read('2030-01-31')).toBe('2030-01-31T00:00:00.000Z');
		expect(read('2030-01-31T10:00:00Z')).toBe('2030-01-31T10:00:00.000Z');
		expect(read('2030-01-31T10:00:00+01:00')).toBe('2030-01-31T09:00:00.000Z');
		expect(read('2030-01-31T10:00:00-0500')).toBe('2030-01-31T15:00:00.000Z');
		expect(read('2030-01-31 10:00:00.5 +00:00')).toBe('2030-01-31T10:00:00.500Z');
		expect(read('Thu, 31 Jan 2030 10:00:00 GMT')).toBe('2030-01-31T10:00:00.000Z');
		expect(read('Jan 31 2030 10:00 EST')).toBe('2030-01-31T15:00:00.000Z');
		expect(read('2030-01-31 10:00:00+05:30')).toBe('2030-01-31T04:30:00.000Z');
		expect(read('2030-01-31 10:00 UTC+1')).toBe('2030-01-31T09:00:00.000Z');
		expect(read('Thu, 31 Jan 2030 10:00:00 +0200 (CEST)')).toBe('2030-01-31T08:00:00.000Z');
		expect(read('2030')).toBe('2030-01-01T00:00:00.000Z');
		expect(read('Jan 31 2030 10:00 PM EST')).toBe('2030-02-01T03:00:00.000Z');
		expect(read('+002030-01-31')).toBe('2030-01-31T00:00:00.000Z');
		expect(read(new Date(Date.UTC(2030, 0, 31, 10)).toString())).toBe('2030-01-31T10:00:00.000Z');
	});

	it('a day its month does not have is refused, not moved into the next month', () => {
		for (const value of ['2024-02-30', '2023-02-29T10:00:00Z', '2030-04-31 12:00']) {
			expect(refusal(() => optionalDate(value, 'from')).message).toMatch(/^from: .* names day/);
		}
		expect(optionalDate('2024-02-29T10:00:00Z', 'from')?.toISOString()).toBe(
			'2024-02-29T10:00:00.000Z',
		);
		expect(optionalDate('2030-12-31', 'from')?.getUTCDate()).toBe(31);
	});

	it('text with half of a surrogate pair: keys and ids are refused by name, an error message is stored with U+FFFD', () => {
		expect(refusal(() => validateKey('order-\ud83d', 'idempotencyKey')).message).toMatch(
			/^idempotencyKey: contains half of a UTF-16 surrogate pair/,
		);
		expect(refusal(() => optionalText('corr-\ude00', 'correlationId')).field).toBe('correlationId');
		expect(storableMessage('boom \ud83d', 'errorMessage')).toBe('boom \ufffd');
		expect(storableMessage('ok 😀 \ude00x', 'errorMessage')).toBe('ok 😀 \ufffdx');
		expect(validateKey('order-😀', 'idempotencyKey')).toBe('order-😀');
	});
});

describe('a value over the size limit', () => {
	it('is refused with its size and a fix that names the setting that raises the limit', () => {
		const error = refusal(() =>
			serializePayload({ text: 'x'.repeat(3000) }, 'payload', {
				bytes: 2048,
				raisedBy: 'Max Payload Size (KB) in Options (now 2)',
			}),
		);
		expect(error.message).toBe('payload: is 3011 bytes; the limit is 2048');
		expect(error.httpStatus).toBe(413);
		expect(error.fix).toBe(
			'Send a smaller payload (store large documents elsewhere and pass a reference), or raise Max Payload Size (KB) in Options (now 2)',
		);
	});

	it('a result gets a fix about storing a reference; where nothing raises the limit, none is offered', () => {
		const error = refusal(() =>
			serializePayload('é'.repeat(600), 'result', { bytes: 1000, raisedBy: null }),
		);
		expect(error.message).toBe('result: is 1202 bytes; the limit is 1000');
		expect(error.fix).toBe(
			'Store a smaller result (keep large documents elsewhere and store a reference)',
		);
	});

	it('counts bytes of UTF-8, not characters', () => {
		expect(
			serializePayload('é'.repeat(499), 'payload', { bytes: 1000, raisedBy: null }),
		).toHaveLength(501);
	});
});
