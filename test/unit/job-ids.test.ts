import { newJobId } from '../../src/core/ids';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('newJobId', () => {
	it('gives UUIDv7 text carrying the current Unix milliseconds', () => {
		const before = Date.now();
		const id = newJobId();
		const after = Date.now();
		expect(id).toMatch(UUID_V7);
		const ms = parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
		expect(ms).toBeGreaterThanOrEqual(before);
		expect(ms).toBeLessThanOrEqual(after);
	});

	it('gives unique ids that sort in the order they were made, within a millisecond too', () => {
		const ids = Array.from({ length: 20_000 }, () => newJobId());
		for (const id of ids.slice(0, 1000)) expect(id).toMatch(UUID_V7);
		expect(new Set(ids).size).toBe(ids.length);
		expect([...ids].sort()).toEqual(ids);
	});

	it('keeps counting when the clock goes back', () => {
		const now = jest.spyOn(Date, 'now');
		try {
			now.mockReturnValue(Date.UTC(2030, 0, 1));
			const first = newJobId();
			now.mockReturnValue(Date.UTC(2029, 0, 1));
			const second = newJobId();
			expect(second > first).toBe(true);
			expect(second.slice(0, 13)).toBe(first.slice(0, 13));
		} finally {
			now.mockRestore();
		}
	});
});
