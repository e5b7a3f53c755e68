import { tryToParseDateTime } from 'n8n-workflow';

import { daysInMonth, optionalDate } from '../../src/core';

/**
 * A date, or a date and time, in ISO 8601's extended form or as SQL writes it, without a zone
 * ("2026-12-05", "2026-12-05T10", "2026-12-05T10:00:00", "2026-12-05 10:00:00.5"): a wall
 * time, as the editor's date picker stores it and as sources often send it.
 */
const WALL_TIME =
	/^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2})(?::(\d{2})(?::(\d{2})(?:[.,]\d+)?)?)?)?$/;

/** Whether the parts of a WALL_TIME match name a day its month has and a time its day has. */
function isRealWallTime(parts: RegExpExecArray): boolean {
	const [year, month, day, hour = 0, minute = 0, second = 0] = parts
		.slice(1)
		.map((part) => (part === undefined ? undefined : Number(part))) as number[];
	return (
		month >= 1 &&
		month <= 12 &&
		day >= 1 &&
		day <= daysInMonth(year, month) &&
		hour <= 23 &&
		minute <= 59 &&
		second <= 59
	);
}

/**
 * A wall time (WALL_TIME) in `timeZone` as a UTC ISO instant, read by n8n's own parser as
 * n8n's nodes (Wait, for one) read it; null for anything else. Only well-formed wall times are
 * handed to the parser: for other text it falls back to JavaScript's, which reads it in the
 * n8n process's time zone and moves 30 February into March.
 */
function wallTimeInZone(text: string, timeZone: string): string | null {
	const parts = WALL_TIME.exec(text);
	if (!parts || !isRealWallTime(parts)) return null;
	try {
		const parsed = tryToParseDateTime(text, timeZone);
		return parsed.isValid ? parsed.toUTC().toISO() : null;
	} catch {
		return null;
	}
}

/** What a node's error says to do about a date parameter it refuses. */
const DATE_FIX =
	"Pick a date and time, or give an ISO 8601 value such as 2030-01-31T12:00:00Z (without an offset it is in the workflow's time zone)";

/**
 * A date parameter as an instant, or null when nothing is given. Epoch milliseconds, a Date or
 * a Luxon DateTime (an expression such as {{ $now }}) keep their instant; a wall time without a
 * zone ("2026-12-05T10:00:00", a date alone at midnight) is in `timeZone`, the workflow's;
 * other text must name its zone. Anything else is refused by `field`, the parameter's display
 * name, with the fix a node's user can act on, before anything is written.
 */
export function dateParameter(value: unknown, timeZone: string, field: string): Date | null {
	if (value === undefined || value === null || value === '') return null;
	const instant =
		typeof value === 'string'
			? (wallTimeInZone(value.trim(), timeZone) ?? value)
			: typeof value === 'number' || value instanceof Date
				? value
				: (instantOfObject(value) ?? String(value));
	return optionalDate(instant, field, DATE_FIX);
}

/** The instant of a Luxon DateTime (n8n's $now and date expressions), without importing Luxon. */
function instantOfObject(value: unknown): Date | null {
	const toMillis = (value as { toMillis?: unknown } | null)?.toMillis;
	if (typeof toMillis !== 'function') return null;
	const millis = toMillis.call(value) as unknown;
	return typeof millis === 'number' && Number.isFinite(millis) ? new Date(millis) : null;
}

/**
 * A database row as item JSON: its timestamps (Date objects) as ISO strings, as every other
 * output item has them and as n8n keeps them in saved and pinned data, so an expression that
 * reads one works alike in a live run and on saved data.
 */
export function datesAsIso(row: Record<string, unknown>): Record<string, unknown> {
	return Object.fromEntries(
		Object.entries(row).map(([key, value]) => [
			key,
			value instanceof Date ? value.toISOString() : value,
		]),
	);
}
