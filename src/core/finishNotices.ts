import type pg from 'pg';

import type { StoreContext } from './context';
import { notifyChannel } from './identifiers';
import { finishNoticeQuery } from './sql/trigger';

/**
 * The least time between two finish notices of one process for one schema. A notice sent inside
 * a completion's own transaction would make every completing commit wait for PostgreSQL's
 * server-wide notify lock (0.60–0.74× the completions per second, PERFORMANCE.md, "What the
 * wake-up notices cost"); one statement of its own at most this often is what PERFORMANCE.md
 * measures ("Finish notices").
 */
export const FINISH_NOTICE_INTERVAL_MS = 200;

/**
 * Tells the Job Triggers of other n8n instances (and this one's) that jobs of a queue finished,
 * so that jobs held back by a concurrency limit or an ordering key start without waiting for
 * the trigger's backstop sweep. The notice is sent after the completion committed, in its own
 * statement, for every queue that had a job finish since the last one: at once when none was
 * sent within the interval, else at its end, so the last finish of a burst is always announced.
 * A notice that cannot be sent is dropped: the backstop sweep finds the freed jobs.
 */
class FinishNotices {
	private readonly queues = new Set<string>();
	private timer: NodeJS.Timeout | undefined;
	private sending: Promise<void> | undefined;
	private lastSentAt = Number.NEGATIVE_INFINITY;

	constructor(
		private readonly pool: pg.Pool,
		private readonly channel: string,
	) {}

	get idle(): boolean {
		return this.timer === undefined && this.sending === undefined;
	}

	announce(queues: Iterable<string | null>): void {
		for (const queue of queues) if (queue !== null) this.queues.add(queue);
		if (this.queues.size === 0 || this.timer !== undefined) return;
		// Sent from a timer even when due at once: never inside the completing call.
		// A monotonic clock: a wall clock set back would hold every notice for as long.
		const wait = Math.max(0, this.lastSentAt + FINISH_NOTICE_INTERVAL_MS - performance.now());
		this.timer = setTimeout(() => this.send(), wait);
		// A pending notice never keeps a process alive.
		this.timer.unref();
		unsent.add(this);
	}

	private send(): void {
		this.timer = undefined;
		this.lastSentAt = performance.now();
		const queues = [...this.queues];
		this.queues.clear();
		const sent = Promise.resolve()
			.then(async () => await this.pool.query(finishNoticeQuery(this.channel, queues)))
			.then(
				() => undefined,
				() => undefined,
			)
			.finally(() => {
				if (this.sending === sent) this.sending = undefined;
				if (this.idle) unsent.delete(this);
			});
		this.sending = sent;
	}
}

const noticesByPool = new WeakMap<pg.Pool, Map<string, FinishNotices>>();
/** The notices that wait for their timer or are being sent. */
const unsent = new Set<FinishNotices>();

function noticesOf(pool: pg.Pool, schema: string): FinishNotices {
	let bySchema = noticesByPool.get(pool);
	if (!bySchema) noticesByPool.set(pool, (bySchema = new Map()));
	let notices = bySchema.get(schema);
	if (!notices) bySchema.set(schema, (notices = new FinishNotices(pool, notifyChannel(schema))));
	return notices;
}

/**
 * Announces that jobs of these queues finished (done, failed or cancelled; see FinishNotices).
 * A null (a row that finished no job) is skipped.
 */
export function announceFinished(ctx: StoreContext, queues: Iterable<string | null>): void {
	noticesOf(ctx.db.pool, ctx.schema).announce(queues);
}

/**
 * Resolves once every finish notice of this process has been sent or dropped, or after
 * `timeoutMs` (a notice waiting for a connection of a pool being closed never is).
 */
export async function finishNoticesSent(timeoutMs = 5_000): Promise<void> {
	const deadline = performance.now() + timeoutMs;
	while (unsent.size > 0 && performance.now() < deadline)
		await new Promise((resolve) => setTimeout(resolve, 10));
}
