/** Why the trigger looked for work; counted in `stats.wakes`. */
export type WakeReason =
	| 'start'
	| 'connect'
	| 'notice'
	| 'timer'
	| 'backstop'
	| 'poll'
	| 'done'
	| 'retry';

/** Fired this long after the earliest run_at, so the lease's `run_at <= now()` holds. */
const TIMER_MARGIN_MS = 5;
/** Longest delay setTimeout accepts. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const RETRY_INITIAL_MS = 1_000;
const RETRY_MAX_MS = 30_000;

/** The backoff after `failures` failures in a row: 1 s, doubling, at most 30 s. */
export function backoffMs(failures: number): number {
	return Math.min(RETRY_MAX_MS, RETRY_INITIAL_MS * 2 ** (Math.max(1, failures) - 1));
}
/** How long stopping waits for a running look (see stop). */
const STOP_WAIT_MS = 10_000;

/**
 * When the trigger looks for work. Every wake-up only asks for a look; looks are coalesced:
 * one runs at a time, and a wake-up during a look makes it run once more when it ends. The
 * timers that wake it (the earliest run_at, the retry after a failure, the backstop or poll
 * sweep) live here, so stopping clears them all in one place.
 */
export class WakeUps {
	private stopped = false;
	private pending = false;
	private looking: Promise<void> | undefined;
	private dueTimer: NodeJS.Timeout | undefined;
	private retryTimer: NodeJS.Timeout | undefined;
	private sweepTimer: NodeJS.Timeout | undefined;
	private holdOffTimer: NodeJS.Timeout | undefined;
	private holdOffEndsAt = 0;
	private consecutiveFailures = 0;

	/**
	 * @param look one look for work (it must not throw)
	 * @param wakes the count of wake-ups by reason, kept up to date here
	 */
	constructor(
		private readonly look: () => Promise<void>,
		private readonly wakes: Record<WakeReason, number>,
	) {}

	get isStopped(): boolean {
		return this.stopped;
	}

	/** Whether a look is running (or about to run once more). */
	get isLooking(): boolean {
		return this.looking !== undefined;
	}

	/** Whether looks wait for a hold-off to end (see holdOff). */
	get isHeldOff(): boolean {
		return this.holdOffTimer !== undefined;
	}

	/** Look for work now (coalesced with any look already running), or when a hold-off ends. */
	wake(reason: WakeReason): void {
		if (this.stopped) return;
		this.wakes[reason]++;
		this.pending = true;
		if (!this.looking && !this.isHeldOff) this.startLooking();
	}

	/**
	 * No look starts for `delayMs` (a running one ends at its next check of isHeldOff); wake-ups
	 * meanwhile are kept, and a look runs when the hold-off ends. A longer hold-off already set
	 * is kept.
	 */
	holdOff(delayMs: number): void {
		if (this.stopped) return;
		const endsAt = performance.now() + delayMs;
		if (this.holdOffTimer && endsAt <= this.holdOffEndsAt) return;
		clearTimeout(this.holdOffTimer);
		this.holdOffEndsAt = endsAt;
		this.holdOffTimer = setTimeout(() => {
			this.holdOffTimer = undefined;
			this.wake('retry');
		}, delayMs);
		this.holdOffTimer.unref();
	}

	private startLooking(): void {
		this.looking = this.lookWhilePending().finally(() => {
			this.looking = undefined;
			// A wake-up between the loop's last check and this callback found a look running and
			// only set pending; without this it would wait for the next wake-up.
			if (this.pending && !this.stopped && !this.isHeldOff) this.startLooking();
		});
	}

	private async lookWhilePending(): Promise<void> {
		while (this.pending && !this.stopped && !this.isHeldOff) {
			this.pending = false;
			await this.look();
		}
	}

	/** Wakes every `intervalMs` for `reason` (the backstop, or the poll instead of LISTEN). */
	sweepEvery(intervalMs: number, reason: 'backstop' | 'poll'): void {
		clearInterval(this.sweepTimer);
		// A trigger closed while it was starting (a test run cancelled at once) sets no timer.
		if (this.stopped) return;
		this.sweepTimer = setInterval(() => this.wake(reason), intervalMs);
		this.sweepTimer.unref();
	}

	/**
	 * Wakes when the earliest future job is due, `dueInMs` from now as the database computed it;
	 * null: no job waits, so no timer. Replaces the timer armed before.
	 */
	wakeWhenDue(dueInMs: number | null): void {
		if (this.stopped) return;
		clearTimeout(this.dueTimer);
		this.dueTimer = undefined;
		if (dueInMs === null) return;
		const delay = Math.min(MAX_TIMER_MS, Math.max(0, dueInMs) + TIMER_MARGIN_MS);
		this.dueTimer = setTimeout(() => {
			this.dueTimer = undefined;
			this.wake('timer');
		}, delay);
		this.dueTimer.unref();
	}

	/**
	 * After a failed look: wakes again with backoff from 1 s to 30 s (one retry timer at a time).
	 * Returns how many looks failed in a row and the delay, for the caller's log line.
	 */
	retryAfterFailure(): { failures: number; delayMs: number } {
		this.consecutiveFailures++;
		const delayMs = backoffMs(this.consecutiveFailures);
		if (!this.stopped && !this.retryTimer) {
			this.retryTimer = setTimeout(() => {
				this.retryTimer = undefined;
				this.wake('retry');
			}, delayMs);
			this.retryTimer.unref();
		}
		return { failures: this.consecutiveFailures, delayMs };
	}

	/** A look succeeded: the next failure starts the backoff from the beginning. */
	resetBackoff(): void {
		this.consecutiveFailures = 0;
	}

	/**
	 * No more wake-ups: clears every timer and waits for a running look to end, for at most
	 * STOP_WAIT_MS. A look whose connection hangs (a peer gone without a word, noticed only by
	 * TCP keep-alive) must not hold up n8n closing the trigger; when it returns, the jobs it
	 * leased are released (the engine releases whatever a lease returns after the stop).
	 */
	async stop(): Promise<void> {
		this.stopped = true;
		clearTimeout(this.dueTimer);
		clearTimeout(this.retryTimer);
		clearInterval(this.sweepTimer);
		clearTimeout(this.holdOffTimer);
		this.dueTimer = this.retryTimer = this.sweepTimer = this.holdOffTimer = undefined;
		if (!this.looking) return;
		let timer: NodeJS.Timeout | undefined;
		const waited = new Promise<void>((resolve) => {
			timer = setTimeout(resolve, STOP_WAIT_MS);
			timer.unref();
		});
		await Promise.race([this.looking, waited]);
		clearTimeout(timer);
	}
}
