import pg from 'pg';

import { closeClient } from '../closeClient';
import { classifyDatabaseError } from '../errors';
import { quoteIdentifier } from '../identifiers';
import { toPoolConfig, type ConnectionConfig } from '../pool';

export interface TriggerLogger {
	debug(message: string): void;
	info(message: string): void;
	warn(message: string): void;
	error(message: string): void;
}

export const silentLogger: TriggerLogger = {
	debug: () => undefined,
	info: () => undefined,
	warn: () => undefined,
	error: () => undefined,
};

export interface ListenerOptions {
	/** Connection settings; the listener opens one connection of its own, outside any pool. */
	connection: ConnectionConfig;
	channel: string;
	/** A notice arrived on the channel (its payload). */
	onNotice: (payload: string) => void;
	/** LISTEN is in place (first connect and every reconnect): time to catch up. */
	onConnected: () => void;
	/** The connection was lost; a reconnect is scheduled. */
	onLost?: (error: Error) => void;
	/** Application name of the connection (visible in pg_stat_activity). */
	applicationName?: string;
	/** How often an idle connection is checked with a round trip (default 30 s). */
	keepAliveMs?: number;
	/** A check that takes longer than this counts as a lost connection (default 10 s). */
	keepAliveTimeoutMs?: number;
	/** First reconnect delay; it doubles up to `reconnectMaxMs`, with jitter (default 500 ms). */
	reconnectInitialMs?: number;
	reconnectMaxMs?: number;
	logger?: TriggerLogger;
}

const DEFAULT_KEEP_ALIVE_MS = 30_000;
const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 10_000;
const DEFAULT_RECONNECT_INITIAL_MS = 500;
const DEFAULT_RECONNECT_MAX_MS = 30_000;

/**
 * One dedicated connection that LISTENs on a channel, and keeps doing so.
 *
 * It is watched three ways: the driver's `error` and `end` events, TCP keep-alive, and a
 * `SELECT 1` round trip when the connection has been idle for `keepAliveMs` (a connection whose
 * peer vanished without a FIN, e.g. behind a NAT or a failed-over load balancer, is only noticed
 * by sending something). On loss it reconnects by itself with exponential backoff and jitter,
 * forever, and calls `onConnected` after every successful LISTEN so the owner can claim what
 * it missed: NOTIFY has no replay.
 */
export class NotificationListener {
	private client: pg.Client | undefined;
	private stopped = false;
	private attempt = 0;
	private reconnectTimer: NodeJS.Timeout | undefined;
	private keepAliveTimer: NodeJS.Timeout | undefined;
	private lastActivity = 0;
	private pid: number | null = null;
	private readonly logger: TriggerLogger;
	/** Connections made so far (the first one included); for observability and tests. */
	connects = 0;

	constructor(private readonly options: ListenerOptions) {
		this.logger = options.logger ?? silentLogger;
	}

	/** Backend pid of the live LISTEN connection, or null while disconnected. */
	get backendPid(): number | null {
		return this.pid;
	}

	get connected(): boolean {
		return this.pid !== null;
	}

	/**
	 * Connects and LISTENs once; a failure is thrown (the caller decides whether to keep trying
	 * in the background with `startReconnecting`).
	 */
	async start(): Promise<void> {
		await this.connect();
	}

	/** Keep trying to connect in the background, with backoff (after a failed `start`). */
	startReconnecting(): void {
		this.scheduleReconnect();
	}

	async stop(): Promise<void> {
		this.stopped = true;
		clearTimeout(this.reconnectTimer);
		clearInterval(this.keepAliveTimer);
		this.reconnectTimer = undefined;
		this.keepAliveTimer = undefined;
		const client = this.client;
		this.client = undefined;
		this.pid = null;
		if (client) await closeClient(client);
	}

	private async connect(): Promise<void> {
		const client = new pg.Client(this.clientConfig());
		// Errors of this client are handled through `lost`; without a listener an 'error' event
		// would crash the n8n process.
		client.on('error', (error) => this.lost(client, error));
		client.on('end', () => this.lost(client, new Error('Connection terminated')));
		client.on('notification', (message) => {
			this.lastActivity = Date.now();
			if (message.channel === this.options.channel) this.options.onNotice(message.payload ?? '');
		});
		this.client = client;
		let timer: NodeJS.Timeout | undefined;
		try {
			const listening = (async () => {
				await client.connect();
				await client.query(`LISTEN ${quoteIdentifier(this.options.channel)}`);
				return (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
			})();
			listening.catch(() => undefined);
			// pg bounds the login only, and leaves a connect that stop() interrupts pending for
			// ever: without this, a server that stops answering after the login, or a test run
			// cancelled while connecting, would keep the trigger's start waiting.
			// A connection timeout of 0 is pg's "no limit", and stays one.
			const loginMs = this.options.connection.connectionTimeoutMs ?? 10_000;
			const limitMs =
				loginMs > 0
					? loginMs + (this.options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS)
					: null;
			const abandoned = new Promise<never>((_, reject) => {
				if (limitMs !== null)
					timer = setTimeout(
						() =>
							reject(
								Object.assign(
									new Error(`no answer within ${limitMs} ms while starting to listen`),
									{
										code: 'ETIMEDOUT',
									},
								),
							),
						limitMs,
					);
				client.once('end', () => reject(new Error('Connection terminated')));
			});
			const pid = await Promise.race([listening, abandoned]);
			if (this.stopped || this.client !== client) {
				await closeClient(client);
				return;
			}
			this.pid = pid;
		} catch (error) {
			if (this.client === client) this.client = undefined;
			await closeClient(client);
			if (this.stopped) return;
			throw classifyDatabaseError(error);
		} finally {
			clearTimeout(timer);
		}
		this.connects++;
		this.attempt = 0;
		this.lastActivity = Date.now();
		this.startKeepAlive(client);
		this.options.onConnected();
	}

	private clientConfig(): pg.ClientConfig {
		const {
			max: _max,
			idleTimeoutMillis: _idle,
			allowExitOnIdle: _exit,
			...config
		} = toPoolConfig(this.options.connection);
		return {
			...config,
			keepAlive: true,
			keepAliveInitialDelayMillis: 10_000,
			application_name: this.options.applicationName ?? 'n8n-nodes-durable-jobs listener',
		};
	}

	private startKeepAlive(client: pg.Client): void {
		clearInterval(this.keepAliveTimer);
		const interval = this.options.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS;
		const timeout = this.options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS;
		let checking = false;
		this.keepAliveTimer = setInterval(
			() => {
				if (checking || this.client !== client || Date.now() - this.lastActivity < interval) return;
				checking = true;
				let timer: NodeJS.Timeout | undefined;
				const timedOut = new Promise<never>((_, reject) => {
					timer = setTimeout(
						() => reject(new Error(`no answer to a keep-alive query within ${timeout} ms`)),
						timeout,
					);
				});
				Promise.race([client.query('SELECT 1'), timedOut])
					.then(() => {
						this.lastActivity = Date.now();
					})
					.catch((error: unknown) => this.lost(client, error as Error))
					.finally(() => {
						clearTimeout(timer);
						checking = false;
					});
			},
			Math.max(50, Math.min(interval, 5_000)),
		);
		this.keepAliveTimer.unref();
	}

	/** The connection `client` is gone (or must be given up): drop it and reconnect. */
	private lost(client: pg.Client, error: Error): void {
		if (this.client !== client) return;
		this.client = undefined;
		this.pid = null;
		clearInterval(this.keepAliveTimer);
		this.keepAliveTimer = undefined;
		void closeClient(client);
		if (this.stopped) return;
		this.logger.warn(
			`Durable Jobs: the LISTEN connection was lost (${classifyDatabaseError(error).message}); reconnecting`,
		);
		this.options.onLost?.(error);
		this.scheduleReconnect();
	}

	private scheduleReconnect(): void {
		if (this.stopped || this.reconnectTimer) return;
		const initial = this.options.reconnectInitialMs ?? DEFAULT_RECONNECT_INITIAL_MS;
		const max = this.options.reconnectMaxMs ?? DEFAULT_RECONNECT_MAX_MS;
		const base = Math.min(max, initial * 2 ** Math.min(this.attempt, 20));
		// Full jitter on the upper half, so listeners of many n8n instances do not reconnect in step.
		const delay = Math.round(base / 2 + (Math.random() * base) / 2);
		this.attempt++;
		this.reconnectTimer = setTimeout(() => {
			this.reconnectTimer = undefined;
			if (this.stopped) return;
			this.connect().then(
				() => {
					if (this.connected) this.logger.info('Durable Jobs: LISTEN connection restored');
				},
				(error: unknown) => {
					if (this.stopped) return;
					this.logger.warn(
						`Durable Jobs: could not reconnect the LISTEN connection (${(error as Error).message}); next try in up to ${Math.round(Math.min(max, initial * 2 ** this.attempt) / 1000)} s`,
					);
					this.scheduleReconnect();
				},
			);
		}, delay);
		this.reconnectTimer.unref();
	}
}
