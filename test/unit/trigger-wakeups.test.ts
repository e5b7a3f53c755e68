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

	it('a hold-off: wake-ups meanwhile start no look, one look runs when it ends, a shorter one does not cut it, stop clears it', async () => {
		jest.useFakeTimers();
		try {
			let looks = 0;
			const wakes = counters();
			const wakeUps = new WakeUps(async () => void looks++, wakes);
			wakeUps.holdOff(2_000);
			wakeUps.holdOff(500);
			expect(wakeUps.isHeldOff).toBe(true);
			wakeUps.wake('notice');
			wakeUps.wake('done');
			await jest.advanceTimersByTimeAsync(1_900);
			expect(looks).toBe(0);
			await jest.advanceTimersByTimeAsync(100);
			expect(looks).toBe(1);
			expect(wakeUps.isHeldOff).toBe(false);
			expect(wakes).toMatchObject({ notice: 1, done: 1, retry: 1 });

			wakeUps.holdOff(1_000);
			await wakeUps.stop();
			await jest.advanceTimersByTimeAsync(5_000);
			expect(looks).toBe(1);
			expect(jest.getTimerCount()).toBe(0);
		} finally {
			jest.useRealTimers();
		}
	});
});
