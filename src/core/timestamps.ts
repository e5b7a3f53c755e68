import pg from 'pg';

const TIMESTAMPTZ_OID = 1184;
const ZERO = 48;
const defaultTimestamptzParser = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text') as (
	text: string,
) => unknown;

function digits(text: string, start: number, count: number): number {
	let value = 0;
	for (let index = start; index < start + count; index++) {
		const digit = text.charCodeAt(index) - ZERO;
		if (digit < 0 || digit > 9) return Number.NaN;
		value = value * 10 + digit;
	}
	return value;
}

/**
 * The Date of a `timestamptz` in PostgreSQL's text form, e.g. `2026-12-03 08:54:19.123456+00`,
 * read by position instead of the driver's regular expressions (a tenth of the client's time in
 * a batch drain went there). The result is exactly what node-postgres returns (the same
 * millisecond truncation); any other form (years before 1000, BC, infinity, an unusual
 * DateStyle) goes to the driver's own parser.
 */
export function parseTimestamptz(text: string): unknown {
	const length = text.length;
	if (
		length < 22 ||
		text.charCodeAt(4) !== 45 ||
		text.charCodeAt(7) !== 45 ||
		text.charCodeAt(10) !== 32 ||
		text.charCodeAt(13) !== 58 ||
		text.charCodeAt(16) !== 58 ||
		text.charCodeAt(0) === ZERO
	)
		return defaultTimestamptzParser(text);
	const year = digits(text, 0, 4);
	const month = digits(text, 5, 2);
	const day = digits(text, 8, 2);
	const hour = digits(text, 11, 2);
	const minute = digits(text, 14, 2);
	const second = digits(text, 17, 2);
	let position = 19;
	let milliseconds = 0;
	if (text.charCodeAt(position) === 46) {
		let end = position + 1;
		while (end < length && text.charCodeAt(end) >= ZERO && text.charCodeAt(end) <= ZERO + 9) end++;
		if (end === position + 1) return defaultTimestamptzParser(text);
		milliseconds = 1000 * parseFloat(text.slice(position, end));
		position = end;
	}
	const sign = text.charCodeAt(position);
	if (sign !== 43 && sign !== 45) return defaultTimestamptzParser(text);
	const rest = length - position - 1;
	let offsetSeconds: number;
	if (rest === 2) offsetSeconds = digits(text, position + 1, 2) * 3600;
	else if (rest === 5 && text.charCodeAt(position + 3) === 58)
		offsetSeconds = digits(text, position + 1, 2) * 3600 + digits(text, position + 4, 2) * 60;
	else if (
		rest === 8 &&
		text.charCodeAt(position + 3) === 58 &&
		text.charCodeAt(position + 6) === 58
	)
		offsetSeconds =
			digits(text, position + 1, 2) * 3600 +
			digits(text, position + 4, 2) * 60 +
			digits(text, position + 7, 2);
	else return defaultTimestamptzParser(text);
	const utc = Date.UTC(year, month - 1, day, hour, minute, second, milliseconds);
	if (Number.isNaN(utc) || Number.isNaN(offsetSeconds)) return defaultTimestamptzParser(text);
	return new Date(sign === 45 ? utc + offsetSeconds * 1000 : utc - offsetSeconds * 1000);
}

/**
 * The result parsers of the core's statements: node-postgres's, except for `timestamptz` while
 * the process still uses the driver's own parser for it (postgres-date's `parseDate`; a parser
 * an application registered stays in force). Passed with each query, so the process-wide
 * parsers of `pg` (which n8n and other packages share) are not touched.
 */
export const RESULT_TYPES: pg.CustomTypesConfig = {
	getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
		const parser = pg.types.getTypeParser(oid, format);
		return oid === TIMESTAMPTZ_OID &&
			format !== 'binary' &&
			parser === defaultTimestamptzParser &&
			parser.name === 'parseDate'
			? parseTimestamptz
			: parser;
	}) as pg.CustomTypesConfig['getTypeParser'],
};
