import pg from 'pg';

import type { StoreContext } from './context';
import { closeClient } from './closeClient';
import { notifyChannel } from './identifiers';
import { finishNoticeQuery } from './sql/trigger';
import type { SqlQuery } from './sql/types';

/**
 * The least time between two finish notices of one process for one schema. A notice sent inside
 * a completion's own transaction would make every completing commit wait for PostgreSQL's
 * server-wide notify lock (0.60–0.74× the completions per second, PERFORMANCE.md, "What the
 * wake-up notices cost"); one statement of its own at most this often is what PERFORMANCE.md
 * measures ("Finish notices").
 */
export const FINISH_NOTICE_INTERVAL_MS = 200;

/**
 * How long the notice connection stays open after its last notice: as long as an idle pooled
 * connection (pool.ts), so a steady stream of finishes keeps one connection and a quiet
 * process holds none.
 */
export const NOTICE_CONNECTION_IDLE_MS = 10_000;

/** The notice connection's name in pg_stat_activity. */
export const NOTICE_APPLICATION_NAME = 'n8n-nodes-durable-jobs notices';

/** pg.Client's ref/unref of its socket, which @types/pg does not declare. */
interface ReferencedClient {
	ref(): void;
	unref(): void;
}

/** After the notice connection could not be opened, notices are dropped for this long. */
export const NOTICE_RECONNECT_DELAY_MS = 5_000;

/**
 * One connection of its own per pool that sends the finish notices, so they never take a pooled
 * connection from the workers: with notices on the pool, single-job drains measured 4–8% slower
 * than without notices; on a connection of their own, sending none is no quicker (PERFORMANCE.md,
 * twenty-sixth and twenty-seventh parts).
 * It is opened with the pool's settings when a notice is due, closed after
 * NOTICE_CONNECTION_IDLE_MS without one, and like the pool's idle connections (allowExitOnIdle)
 * never keeps the process alive while idle. It is one more connection per process than the
 * pool's Max Connections, while jobs finish. Its notices are sent one after the other.
 */
class NoticeConnection {
	private client: pg.Client | undefined;
	private idleTimer: NodeJS.Timeout | undefined;
	/** The last notice sent or waiting: the next one is sent after it. */
	private tail: Promise<void> = Promise.resolve();
	/** After a connect failed (a wrong password, the server down), no other is tried until then. */
	private refusedUntil = Number.NEGATIVE_INFINITY;
	/** How often close() ran: a connect it ended was not refused. */
	private closes = 0;

	constructor(private readonly pool: pg.Pool) {}

	/** Sends `query` after the notices before it; rejects when it could not be sent. */
	async send(query: SqlQuery): Promise<void> {
		const sent = this.tail.then(async () => await this.sendNow(query));
		this.tail = sent.catch(() => undefined);
		await sent;
	}

	async close(): Promise<void> {
		this.closes++;
		clearTimeout(this.idleTimer);
		const client = this.client;
		this.client = undefined;
		openConnections.delete(this);
		if (client) await closeClient(client);
	}

	private async sendNow(query: SqlQuery): Promise<void> {
		clearTimeout(this.idleTimer);
		if (this.pool.ending || this.pool.ended) {
			await this.close();
			throw new Error('the pool is closed');
		}
		// Opening one connection per notice while the server refuses would take a backend slot
		// each until the server's authentication timeout; the backstop sweep covers the notices.
		if (performance.now() < this.refusedUntil)
			throw new Error('the notice connection was refused a moment ago');
		const client = this.client ?? (await this.open());
		try {
			(client as unknown as ReferencedClient).ref();
			await client.query(query);
		} catch (error) {
			this.forget(client);
			throw error;
		}
		if (this.client !== client) return;
		(client as unknown as ReferencedClient).unref();
		this.idleTimer = setTimeout(() => void this.close(), NOTICE_CONNECTION_IDLE_MS);
		this.idleTimer.unref();
	}

	private async open(): Promise<pg.Client> {
		const client = new pg.Client({
			...this.pool.options,
			// pg-pool keeps the password as a property that a spread does not copy.
			password: this.pool.options.password,
			application_name: NOTICE_APPLICATION_NAME,
		});
		// Errors of this client only forget it (the next notice opens another); without a listener
		// an 'error' event would crash the n8n process.
		client.on('error', () => this.forget(client));
		client.on('end', () => this.forget(client));
		this.client = client;
		openConnections.add(this);
		const closesBefore = this.closes;
		try {
			await new Promise<void>((resolve, reject) => {
				// pg never settles a connect that client.end() interrupted (close() meanwhile).
				client.once('end', () => reject(new Error('the notice connection ended')));
				client.connect().then(() => resolve(), reject);
			});
		} catch (error) {
			// Not when close() ended it meanwhile: that refused nothing. A server that hangs up
			// without an answer is a refusal too, though pg's 'end' has forgotten the client.
			if (this.closes === closesBefore)
				this.refusedUntil = performance.now() + NOTICE_RECONNECT_DELAY_MS;
			this.forget(client);
			throw error;
		}
		return client;
	}

	/** `client` failed or ended: closed, and the next notice opens another. */
	private forget(client: pg.Client): void {
		// Another client, or none: close() or an earlier forget() has closed this one.
		if (this.client !== client) return;
		this.client = undefined;
		clearTimeout(this.idleTimer);
		openConnections.delete(this);
		void closeClient(client);
	}
}

const noticeConnections = new WeakMap<pg.Pool, NoticeConnection>();
/** The notice connections that are open or being opened (closeNoticeConnections). */
const openConnections = new Set<NoticeConnection>();

function noticeConnectionOf(pool: pg.Pool): NoticeConnection {
	let connection = noticeConnections.get(pool);
	if (!connection) noticeConnections.set(pool, (connection = new NoticeConnection(pool)));
	return connection;
}

/** Closes every notice connection of this process (closeAllPools). */
export async function closeNoticeConnections(): Promise<void> {
	await Promise.all([...openConnections].map(async (connection) => await connection.close()));
}

/**
 * Tells the Job Triggers of other n8n instances (and this one's) that jobs of a queue finished,
 * so that jobs held back by a concurrency limit or an ordering key start without waiting for
 * the trigger's backstop sweep. The notice is sent after the completion committed, in its own
 * statement on the pool's notice connection, for every queue that had a job finish since the last
 * one: at once when none was sent within the interval, else at its end, so the last finish of a
 * burst is always announced.
 * A notice that cannot be sent is dropped: the backstop sweep finds the freed jobs.
 */
class FinishNotices {
	private readonly queues = new Set<string>();
	private timer: NodeJS.Timeout | undefined;
	private sending: Promise<void> | undefined;
	private lastSentAt = Number.NEGATIVE_INFINITY;

	constructor(
		private readonly connection: NoticeConnection,
		private readonly channel: string,
	) {}

	get idle(): boolean {
		return this.timer === undefined && this.sending === undefined;
	}

	announce(queues: Iterable<string | null>): void {
		for (const queue of queues) if (queue !== null) this.queues.add(queue);
		this.schedule();
	}

	/** Sets the timer of the next notice, unless one is set or a notice is being sent. */
	private schedule(): void {
		// While a notice is being sent (its connection opening, say), the next waits for it: at
		// most one statement per interval, never a backlog sent back to back.
		if (this.queues.size === 0 || this.timer !== undefined || this.sending !== undefined) return;
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
			.then(async () => await this.connection.send(finishNoticeQuery(this.channel, queues)))
			.then(
				() => undefined,
				() => undefined,
			)
			.finally(() => {
				this.sending = undefined;
				this.schedule();
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
	if (!notices)
		bySchema.set(
			schema,
			(notices = new FinishNotices(noticeConnectionOf(pool), notifyChannel(schema))),
		);
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
 * `timeoutMs` (a notice waits for its connection to open, up to the pool's connection timeout).
 */
export async function finishNoticesSent(timeoutMs = 5_000): Promise<void> {
	const deadline = performance.now() + timeoutMs;
	while (unsent.size > 0 && performance.now() < deadline)
		await new Promise((resolve) => setTimeout(resolve, 10));
}
