import { ratioTarget } from '../../bench/lib/targets';

describe("the benchmark's throughput targets", () => {
	it('are met on the exact ratio, not on the rounded figure, which then shows four decimals', () => {
		// 2,032 against 2,033 jobs/s is 0.9995: two decimals would show 1 and count the aim met.
		expect(ratioTarget('work', 'aim', 1, 2032, 2033)).toEqual({
			id: 'work',
			description: 'aim',
			required: '>= 1x',
			actual: '0.9995x',
			met: false,
		});
		// 1.4997× of graphile-worker with 8 workers misses 1.5×.
		expect(ratioTarget('w8', '8 workers', 1.5, 4496, 2998)).toMatchObject({
			actual: '1.4997x',
			met: false,
		});
	});

	it('show two decimals where they agree with the verdict', () => {
		expect(ratioTarget('w8', '8 workers', 1.5, 3505, 2154)).toMatchObject({
			actual: '1.63x',
			met: true,
		});
		expect(ratioTarget('w8', '8 workers', 1.5, 3000, 2000)).toMatchObject({
			actual: '1.5x',
			met: true,
		});
		expect(ratioTarget('batch', 'batch', 1, 2200, 2300)).toMatchObject({
			actual: '0.96x',
			met: false,
		});
	});

	it('show as many decimals as it takes to stay on the side of the target the ratio is on', () => {
		expect(ratioTarget('w8', '8 workers', 1.5, 149_996, 100_000)).toMatchObject({
			actual: '1.49996x',
			met: false,
		});
	});

	it('count no jobs at all as a miss, and have no verdict when a library has no figure', () => {
		expect(ratioTarget('x', 'x', 1, 0, 1000)).toMatchObject({ actual: '0x', met: false });

		expect(ratioTarget('x', 'x', 1, 1000, null)).toMatchObject({ actual: null, met: null });
		expect(ratioTarget('x', 'x', 1, null, 1000)).toMatchObject({ actual: null, met: null });
	});
});
