import { tryToParseDateTime } from 'n8n-workflow';

/**
 * The UTC ISO instant n8n reads `value` as, with text without an offset read in `timeZone`
 * (the workflow's), as n8n's own nodes (Wait, for one) read it, instead of in the n8n
 * process's time zone; null when it is not a date. A value with an offset, a Date or a Luxon
 * DateTime keeps its instant.
 */
export function isoInstant(value: unknown, timeZone: string): string | null {
	try {
		const parsed = tryToParseDateTime(value, timeZone);
		return parsed.isValid ? parsed.toUTC().toISO() : null;
	} catch {
		return null;
	}
}

/**
 * A date parameter for the core: nothing given is null, epoch milliseconds a Date, a date n8n
 * can read its instant (see isoInstant). Anything else is passed on as given, for the core to
 * refuse by the field's name.
 */
export function dateParameter(value: unknown, timeZone: string): Date | string | null {
	if (value === undefined || value === null || value === '') return null;
	if (typeof value === 'number') return new Date(value);
	return isoInstant(value, timeZone) ?? String(value);
}
