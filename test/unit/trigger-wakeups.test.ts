import { WakeUps, type WakeReason } from '../../src/core/trigger/wakeups';

function counters(): Record<WakeReason, number> {
	return { start: 0, connect: 0, notice: 0, timer: 0, backstop: 0, poll: 0, done: 0, retry: 0 };
}

/** Lets every queued microtask (and the ones they queue) run. */
async function flushMicrotasks(): Promise<void> {
	await new Promise((resolve) => setImmediate(resolve));
}

describe('trigger wake-ups', () => {
	it('a wake-up in any microtask after a look ends gets a look of its own', async () => {
		// The look's end settles through a few promise steps; a wake-up landing between them (an
		// execution that ends at that moment) must not be left waiting for the next one.
		for (let depth = 0; depth < 8; depth++) {
			let looks = 0;
			const look = async () => {
				looks++;
				if (looks === 1) {
					let step = Promise.resolve();
					for (let n = 0; n < depth; n++) step = step.then(() => undefined);
					void step.then(() => wakeUps.wake('done'));
				}
			};
			const wakeUps = new WakeUps(look, counters());
			wakeUps.wake('start');
			await flushMicrotasks();
			await flushMicrotasks();
			expect({ depth, looks }).toEqual({ depth, looks: 2 });
			await wakeUps.stop();
		}
	});

	it('a sweep asked for after stop sets no timer (it would keep the trigger in memory)', async () => {
		let looks = 0;
		const wakeUps = new WakeUps(async () => void looks++, counters());
		await wakeUps.stop();
		wakeUps.sweepEvery(5, 'backstop');
		expect(Reflect.get(wakeUps, 'sweepTimer')).toBeUndefined();
		await new Promise((resolve) => setTimeout(resolve, 20));
		expect(looks).toBe(0);
	});

	it('stop waits for a running look, but not for one that hangs', async () => {
		jest.useFakeTimers();
		try {
			const wakeUps = new WakeUps(() => new Promise<void>(() => undefined), counters());
			wakeUps.wake('start');
			let stopped = false;
			const stopping = wakeUps.stop().then(() => (stopped = true));
			await jest.advanceTimersByTimeAsync(9_000);
			expect(stopped).toBe(false);
			await jest.advanceTimersByTimeAsync(1_000);
			await stopping;
			expect(stopped).toBe(true);
		} finally {
			jest.useRealTimers();
		}
	});
});
