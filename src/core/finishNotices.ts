import pg from 'pg';

import type { StoreContext } from './context';
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

/**
 * One connection of its own per pool that sends the finish notices. Borrowing a pooled
 * connection for them made the workers wait for one: single-job drains lost 4–8% (PERFORMANCE.md,
 * twenty-sixth part), and nothing measurable on a connection of their own. It is opened with the
 * pool's settings when a notice is due, closed after NOTICE_CONNECTION_IDLE_MS without one, and
 * like the pool's idle connections (allowExitOnIdle) never keeps the process alive while idle.
 * It is one more connection per process than the pool's Max Connections, while jobs finish.
 */
class NoticeConnection {
	private connection: Promise<pg.Client> | undefined;
	private idleTimer: NodeJS.Timeout | undefined;
	private sending = 0;

	constructor(private readonly pool: pg.Pool) {}

	async send(query: SqlQuery): Promise<void> {
		if (this.pool.ending || this.pool.ended) {
			await this.close();
			return;
		}
		clearTimeout(this.idleTimer);
		this.sending++;
		const connection = this.open();
		try {
			const client = await connection;
			(client as unknown as ReferencedClient).ref();
			await client.query(query);
		} catch (error) {
			this.forget(connection);
			throw error;
		} finally {
			this.sending--;
			if (this.sending === 0 && this.connection === connection) this.idle(connection);
		}
	}

	async close(): Promise<void> {
		clearTimeout(this.idleTimer);
		openConnections.delete(this);
		const connection = this.connection;
		this.connection = undefined;
		if (connection) await endQuietly(connection);
	}

	private open(): Promise<pg.Client> {
		if (this.connection) return this.connection;
		const client = new pg.Client({
			...this.pool.options,
			application_name: NOTICE_APPLICATION_NAME,
		});
		const connection = client.connect().then(() => client);
		// Errors of this client only forget it (the next notice opens another); without a listener
		// an 'error' event would crash the n8n process.
		client.on('error', () => this.forget(connection));
		client.on('end', () => this.forget(connection));
		connection.catch(() => this.forget(connection));
		this.connection = connection;
		openConnections.add(this);
		return connection;
	}

	private idle(connection: Promise<pg.Client>): void {
		void connection.then(
			(client) => (client as unknown as ReferencedClient).unref(),
			() => undefined,
		);
		this.idleTimer = setTimeout(() => void this.close(), NOTICE_CONNECTION_IDLE_MS);
		this.idleTimer.unref();
	}

	private forget(connection: Promise<pg.Client>): void {
		if (this.connection !== connection) return;
		this.connection = undefined;
		clearTimeout(this.idleTimer);
		openConnections.delete(this);
		void endQuietly(connection);
	}
}

async function endQuietly(connection: Promise<pg.Client>): Promise<void> {
	await connection
		.then(
			async (client) => await client.end(),
			() => undefined,
		)
		.catch(() => undefined);
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
			.then(async () => await this.connection.send(finishNoticeQuery(this.channel, queues)))
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
 * `timeoutMs` (a notice waiting for a connection of a pool being closed never is).
 */
export async function finishNoticesSent(timeoutMs = 5_000): Promise<void> {
	const deadline = performance.now() + timeoutMs;
	while (unsent.size > 0 && performance.now() < deadline)
		await new Promise((resolve) => setTimeout(resolve, 10));
}
