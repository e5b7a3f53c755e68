import { createHash } from 'node:crypto';

import { ValidationError } from './errors';

export const MAX_KEY_LENGTH = 255;
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;
// eslint-disable-next-line no-control-regex
const NUL = /\u0000/;
// eslint-disable-next-line no-control-regex
const EVERY_NUL = /\u0000/g;
/** Half of a surrogate pair: a high one not followed by a low one, or a low one alone. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const EVERY_LONE_SURROGATE = new RegExp(LONE_SURROGATE.source, 'g');

export function validateKey(value: unknown, field: string): string {
	if (typeof value !== 'string') {
		throw new ValidationError(
			field,
			`must be text, got ${describe(value)}`,
			'Pass the key as a string',
		);
	}
	if (value.trim().length === 0) {
		throw new ValidationError(
			field,
			'is empty or only spaces',
			'Pass a non-blank key, or leave the field unset',
		);
	}
	if (value.length > MAX_KEY_LENGTH) {
		throw new ValidationError(
			field,
			`is ${value.length} characters long; the limit is ${MAX_KEY_LENGTH}`,
			'Shorten the key, e.g. hash long values with SHA-256',
		);
	}
	if (CONTROL_CHARACTERS.test(value)) {
		throw new ValidationError(
			field,
			'contains control characters',
			'Remove tabs, newlines and other control characters from the key',
		);
	}
	if (LONE_SURROGATE.test(value)) {
		throw new ValidationError(
			field,
			'contains half of a UTF-16 surrogate pair, which PostgreSQL cannot store',
			'Repair the key (a value cut in the middle of an emoji, say)',
		);
	}
	return value;
}

export function optionalKey(value: unknown, field: string): string | null {
	if (value === undefined || value === null || value === '') return null;
	return validateKey(value, field);
}

export function validateUuid(value: unknown, field: string): string {
	if (typeof value !== 'string' || !UUID_PATTERN.test(value)) {
		throw new ValidationError(
			field,
			`"${String(value).slice(0, 60)}" is not a valid id`,
			`Pass the ${field} exactly as the node that produced it returned it (a UUID)`,
		);
	}
	return value.toLowerCase();
}

/** Text or a number as text; null for nothing; anything else is refused naming the field. */
function textOrNull(value: unknown, field: string): string | null {
	if (value === undefined || value === null || value === '') return null;
	if (typeof value !== 'string' && typeof value !== 'number') {
		throw new ValidationError(
			field,
			`must be text, got ${describe(value)}`,
			`Pass ${field} as a string`,
		);
	}
	return String(value);
}

export function optionalText(value: unknown, field: string, maxLength = 10_000): string | null {
	const text = textOrNull(value, field);
	if (text === null) return null;
	if (text.length > maxLength) {
		throw new ValidationError(
			field,
			`is ${text.length} characters long; the limit is ${maxLength}`,
			`Shorten ${field}`,
		);
	}
	if (NUL.test(text)) {
		throw new ValidationError(
			field,
			'contains a NUL character (\\u0000), which PostgreSQL cannot store',
			'Remove \\u0000 from the text',
		);
	}
	if (LONE_SURROGATE.test(text)) {
		throw new ValidationError(
			field,
			'contains half of a UTF-16 surrogate pair, which PostgreSQL cannot store',
			'Repair or remove the broken text (a string cut in the middle of an emoji, say)',
		);
	}
	return text;
}

/** The longest error message stored with a failed job or claim. */
export const ERROR_MESSAGE_MAX_LENGTH = 4000;

/**
 * An error message to store with a failure. A failure must be recorded whatever the failing
 * system answered (an HTML error page, a stack trace, bytes), so this never refuses text: a
 * message past `maxLength` keeps its start and says how long it was, and NUL characters, which
 * PostgreSQL cannot store, become U+FFFD. Only a value that is not text is refused.
 */
export function storableMessage(
	value: unknown,
	field: string,
	maxLength = ERROR_MESSAGE_MAX_LENGTH,
): string | null {
	const raw = textOrNull(value, field);
	if (raw === null) return null;
	const text = raw.replace(EVERY_NUL, '\uFFFD').replace(EVERY_LONE_SURROGATE, '\uFFFD');
	if (text.length <= maxLength) return text;
	const note = ` … [cut from ${text.length} characters]`;
	let end = maxLength - note.length;
	// Not between the two halves of a surrogate pair.
	const last = text.charCodeAt(end - 1);
	if (last >= 0xd800 && last <= 0xdbff) end--;
	return text.slice(0, end) + note;
}

export function integerInRange(
	value: unknown,
	field: string,
	min: number,
	max: number,
	fallback: number,
): number {
	if (value === undefined || value === null || value === '') return fallback;
	const number = typeof value === 'string' ? Number(value) : value;
	if (typeof number !== 'number' || !Number.isInteger(number) || number < min || number > max) {
		throw new ValidationError(
			field,
			`must be a whole number from ${min} to ${max}, got ${describe(value)}`,
			`Set ${field} to a whole number between ${min} and ${max}`,
		);
	}
	return number;
}

/** integerInRange over one of the ranges in defaults.ts. */
export function inRange(
	value: unknown,
	field: string,
	range: { readonly min: number; readonly max: number; readonly default: number },
): number {
	return integerInRange(value, field, range.min, range.max, range.default);
}

/** An optional whole number: undefined and null stay null; anything else goes through inRange. */
export function optionalInRange(
	value: unknown,
	field: string,
	range: { readonly min: number; readonly max: number; readonly default?: number },
): number | null {
	if (value === undefined || value === null) return null;
	return integerInRange(value, field, range.min, range.max, range.default ?? range.min);
}

/** An optional flag: undefined and null give `fallback`; anything but a boolean is refused. */
export function optionalBoolean(value: unknown, field: string, fallback: boolean): boolean {
	if (value === undefined || value === null) return fallback;
	if (typeof value !== 'boolean') {
		throw new ValidationError(
			field,
			`"${String(value).slice(0, 40)}" is not true or false`,
			`Set ${field} to true or false`,
		);
	}
	return value;
}

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})(?:$|[T ])/;

/** The days of `month` (1–12) of `year`, leap years counted. */
export function daysInMonth(year: number, month: number): number {
	const lastDay = new Date(0);
	lastDay.setUTCFullYear(year, month, 0);
	return lastDay.getUTCDate();
}

/**
 * A year, a year and month, or a date, in the forms JavaScript reads as UTC (four digits, or a
 * sign and six).
 */
const ISO_DATE_ONLY = /^(?:\d{4}|[+-]\d{6})(?:-\d{2}(?:-\d{2})?)?$/;

/**
 * A time of day (with AM or PM or not) followed by its zone: Z, an offset (+01:00, -0500, +01), GMT, UTC or UT (with
 * an offset after it or not), or one of the North American zones JavaScript knows by name;
 * then, as RFC 2822 and Date.prototype.toString write it, an optional name in parentheses.
 */
const TIME_WITH_ZONE =
	/\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:[ap]m\s+)?(?:z|(?:(?:gmt|utc?)\s*)?[+-]\d{1,2}(?::?\d{2})?|gmt|utc?|[ecmp][sd]t)(?:\s*\([^)]*\))?$/i;

/**
 * Whether JavaScript reads `text` in the time zone of the process that parses it: a time of
 * day, or a date in a form other than ISO 8601, without a zone. The same text would then be
 * another instant on a server in another zone.
 */
function readInProcessZone(text: string): boolean {
	const trimmed = text.trim();
	return !ISO_DATE_ONLY.test(trimmed) && !TIME_WITH_ZONE.test(trimmed);
}

/**
 * An optional instant: nothing given is null; a Date, epoch milliseconds or text JavaScript
 * reads the same in every time zone is that instant. Anything else is refused by `field`,
 * with `fix` when the caller knows better what its user should do.
 */
export function optionalDate(value: unknown, field: string, fix?: string): Date | null {
	if (value === undefined || value === null || value === '') return null;
	const date =
		value instanceof Date ? value : new Date(typeof value === 'number' ? value : String(value));
	if (Number.isNaN(date.getTime())) {
		throw new ValidationError(
			field,
			`"${String(value).slice(0, 60)}" is not a date and time`,
			fix ?? `Pass ${field} as an ISO 8601 timestamp, e.g. 2030-01-31T12:00:00Z`,
		);
	}
	// JavaScript reads 2024-02-30 as 1 March; a day its month does not have is a typo.
	const written = typeof value === 'string' ? ISO_DATE.exec(value.trim()) : null;
	if (written) {
		const day = Number(written[3]);
		const days = daysInMonth(Number(written[1]), Number(written[2]));
		if (day < 1 || day > days) {
			throw new ValidationError(
				field,
				`"${String(value).slice(0, 60)}" names day ${day} of a month with ${days} days`,
				fix ?? `Pass ${field} as an ISO 8601 timestamp, e.g. 2030-01-31T12:00:00Z`,
			);
		}
	}
	const year = date.getUTCFullYear();
	if (year < 1 || year > 9999) {
		throw new ValidationError(
			field,
			`"${String(value).slice(0, 60)}" is in the year ${year}; dates run from the year 1 to 9999`,
			fix ?? `Pass ${field} as an ISO 8601 timestamp, e.g. 2030-01-31T12:00:00Z`,
		);
	}
	if (typeof value === 'string' && readInProcessZone(value)) {
		throw new ValidationError(
			field,
			`"${value.slice(0, 60)}" has no time zone, so it would be read in the time zone of the process that runs it`,
			fix ?? `Add Z for UTC or an offset, e.g. 2030-01-31T12:00:00Z or 2030-01-31T13:00:00+01:00`,
		);
	}
	return date;
}

export function optionalUrl(value: unknown, field: string): string | null {
	const text = optionalText(value, field, 2048);
	if (text === null) return null;
	let url: URL;
	try {
		url = new URL(text);
	} catch {
		throw new ValidationError(
			field,
			`"${text.slice(0, 80)}" is not a URL`,
			`Pass an absolute http(s) URL, e.g. https://example.com/hooks/jobs`,
		);
	}
	if (url.protocol !== 'http:' && url.protocol !== 'https:') {
		throw new ValidationError(
			field,
			`uses ${url.protocol}; only http and https are delivered`,
			'Use an http:// or https:// URL',
		);
	}
	return url.toString();
}

/** The largest payload or result a store accepts, and how its user raises it. */
export interface PayloadLimit {
	/** In bytes of JSON. */
	readonly bytes: number;
	/** Named in the fix of a value over the limit (StoreOptions.payloadLimitSetting); null: none. */
	readonly raisedBy: string | null;
}

/**
 * Validates that a payload is JSON-serialisable, within the size limit and free of NUL
 * characters (jsonb cannot hold \u0000), and returns its serialised form.
 */
export function serializePayload(value: unknown, field: string, limit: PayloadLimit): string {
	if (value === undefined) {
		throw new ValidationError(field, 'is missing', `Pass a JSON object or value as ${field}`);
	}
	let json: string;
	try {
		json = JSON.stringify(value);
	} catch (error) {
		throw new ValidationError(
			field,
			`is not JSON-serialisable (${(error as Error).message})`,
			'Pass plain JSON data (no circular references or BigInt values)',
		);
	}
	if (json === undefined) {
		throw new ValidationError(field, 'is not JSON', `Pass a JSON object or value as ${field}`);
	}
	// A UTF-16 unit is at most 3 bytes of UTF-8: most payloads need no byte count at all.
	const bytes = json.length * 3 <= limit.bytes ? 0 : Buffer.byteLength(json, 'utf8');
	if (bytes > limit.bytes) {
		throw new ValidationError(
			field,
			`is ${bytes} bytes; the limit is ${limit.bytes}`,
			`${field === 'result' ? 'Store a smaller result (keep large documents elsewhere and store a reference)' : `Send a smaller ${field} (store large documents elsewhere and pass a reference)`}${limit.raisedBy === null ? '' : `, or raise ${limit.raisedBy}`}`,
			413,
		);
	}
	// JSON.stringify writes NUL and a lone surrogate (half of an emoji cut off, say) as \u
	// escapes, which jsonb refuses; an escaped backslash before "u" is text, not an escape.
	if (json.includes('\\u')) {
		if (UNSTORABLE_NUL.test(json)) {
			throw new ValidationError(
				field,
				'contains a NUL character (\\u0000), which PostgreSQL jsonb cannot store',
				'Remove \\u0000 from the payload',
			);
		}
		const surrogate = UNSTORABLE_SURROGATE.exec(json);
		if (surrogate) {
			throw new ValidationError(
				field,
				`contains half of a UTF-16 surrogate pair (${surrogate[2]}), which PostgreSQL jsonb cannot store`,
				'Repair or remove the broken text (a string cut in the middle of an emoji, say)',
			);
		}
	}
	return json;
}

/** An escape (after an even number of backslashes) of NUL or of a lone surrogate, in JSON text. */
const UNSTORABLE_NUL = /(?<!\\)(\\\\)*\\u0000/;
const UNSTORABLE_SURROGATE = /(?<!\\)(\\\\)*(\\ud[89a-f][0-9a-f]{2})/i;

/** JSON with object keys sorted, so equal payloads hash equally whatever their key order. */
export function canonicalJson(value: unknown): string {
	return canonical(value, false);
}

function canonical(value: unknown, converted: boolean): string {
	// As JSON.stringify does (and so as the payload is stored): a Date, a Luxon DateTime or a
	// Buffer is written as what its toJSON gives, once, not as an object without keys.
	if (!converted && typeof (value as { toJSON?: unknown } | null)?.toJSON === 'function')
		return canonical((value as { toJSON: () => unknown }).toJSON(), true);
	if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
	if (Array.isArray(value))
		return `[${value.map((entry) => canonical(entry === undefined ? null : entry, false)).join(',')}]`;
	const record = value as Record<string, unknown>;
	const keys = Object.keys(record)
		.filter((key) => record[key] !== undefined)
		.sort();
	return `{${keys.map((key) => `${JSON.stringify(key)}:${canonical(record[key], false)}`).join(',')}}`;
}

export function fingerprint(value: unknown, field = 'payload'): string {
	let canonicalText: string;
	try {
		canonicalText = canonicalJson(value);
	} catch (error) {
		if (!(error instanceof RangeError)) throw error;
		throw new ValidationError(
			field,
			'is nested too deeply to fingerprint',
			'Send a flatter payload (a few hundred levels of nesting at most)',
		);
	}
	return createHash('sha256').update(canonicalText).digest('hex');
}

function describe(value: unknown): string {
	if (value === null) return 'null';
	if (Array.isArray(value)) return 'an array';
	if (typeof value === 'string') return `"${value.slice(0, 40)}"`;
	return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

/** A checkpoint name: 1–100 printable characters; blank means none. */
export function validateCheckpoint(value: unknown): string | null {
	const text = optionalText(typeof value === 'string' ? value.trim() : value, 'checkpoint', 100);
	if (text !== null && CONTROL_CHARACTERS.test(text)) {
		throw new ValidationError(
			'checkpoint',
			'contains a control character',
			'Use a short name such as crm_request (letters, digits, punctuation, spaces)',
		);
	}
	return text;
}
