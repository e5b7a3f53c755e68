import pg from 'pg';

import { parseTimestamptz } from '../../src/core';
import { RESULT_TYPES } from '../../src/core/timestamps';

const driverParser = pg.types.getTypeParser(1184, 'text') as (text: string) => unknown;

function pad(value: number, width = 2): string {
	return String(value).padStart(width, '0');
}

/** Text as PostgreSQL writes a timestamptz (DateStyle ISO) for a session at `offsetMinutes`. */
function postgresText(
	ms: number,
	fraction: string,
	offsetMinutes: number,
	offsetSeconds = 0,
): string {
	const local = new Date(
		ms + offsetMinutes * 60_000 + Math.sign(offsetMinutes || 1) * offsetSeconds * 1000,
	);
	const sign = offsetMinutes < 0 ? '-' : '+';
	const hours = Math.floor(Math.abs(offsetMinutes) / 60);
	const minutes = Math.abs(offsetMinutes) % 60;
	let zone = `${sign}${pad(hours)}`;
	if (minutes || offsetSeconds) zone += `:${pad(minutes)}`;
	if (offsetSeconds) zone += `:${pad(offsetSeconds)}`;
	return (
		`${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())} ` +
		`${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}${fraction}${zone}`
	);
}

describe('parseTimestamptz', () => {
	it('returns exactly what the driver returns for the forms PostgreSQL writes', () => {
		let seed = 42;
		const random = () => {
			seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
			return seed / 2 ** 31;
		};
		const fractions = ['', '.5', '.123', '.123456', '.999999', '.000001', '.29', '.291'];
		const offsets = [0, 60, -300, 330, -570, 765, 14 * 60, -12 * 60];
		for (let i = 0; i < 5000; i++) {
			const ms = Math.floor(random() * 4_000_000_000_000) - 1_000_000_000_000;
			const fraction = fractions[i % fractions.length];
			const offset = offsets[Math.floor(random() * offsets.length)];
			const text = postgresText(ms - (ms % 1000), fraction, offset, i % 97 === 0 ? 17 : 0);
			const expected = driverParser(text) as Date;
			const actual = parseTimestamptz(text) as Date;
			expect(actual, text).toBeInstanceOf(Date);
			expect(actual.getTime(), text).toBe(expected.getTime());
		}
	});

	it.each([
		'infinity',
		'-infinity',
		'0044-03-15 12:00:00+00',
		'0001-01-01 00:00:00+00 BC',
		'2026-12-03 08:54:19.123+00 BC',
		'12026-12-03 08:54:19+00',
		'2026-12-03T08:54:19Z',
		'2026-12-03 08:54:19.+00',
		'2026-12-03 08:54:19+0',
		'2026-12-03',
	])('hands %s to the driver parser unchanged', (text) => {
		const expected = driverParser(text);
		const actual = parseTimestamptz(text);
		if (expected instanceof Date) expect((actual as Date).getTime()).toEqual(expected.getTime());
		else expect(actual).toEqual(expected);
	});

	it('reads a timestamptz from PostgreSQL as the driver does', () => {
		expect(parseTimestamptz('2026-12-03 08:54:19.123456+00')).toEqual(
			new Date('2026-12-03T08:54:19.123Z'),
		);
		expect(parseTimestamptz('2026-12-03 10:24:19.5+01:30')).toEqual(
			new Date('2026-12-03T08:54:19.500Z'),
		);
	});
});

describe('RESULT_TYPES', () => {
	afterEach(() => {
		pg.types.setTypeParser(1184, driverParser);
	});

	it('reads timestamptz with the fast parser while the driver parser is in force', () => {
		expect(RESULT_TYPES.getTypeParser(1184, 'text')).toBe(parseTimestamptz);
		expect(RESULT_TYPES.getTypeParser(25, 'text')).toBe(pg.types.getTypeParser(25, 'text'));
	});

	it('keeps a timestamptz parser the application registered', () => {
		const asText = (text: string) => text;
		pg.types.setTypeParser(1184, asText);
		expect(RESULT_TYPES.getTypeParser(1184, 'text')).toBe(asText);
	});
});
