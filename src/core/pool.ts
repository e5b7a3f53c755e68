import { createHash } from 'node:crypto';
import pg from 'pg';

import { closeNoticeConnections } from './finishNotices';

export type SslMode = 'disable' | 'require' | 'verify';

export interface ConnectionConfig {
	host: string;
	port: number;
	database: string;
	user: string;
	password?: string;
	ssl?: SslMode;
	/** PEM CA certificate, used with ssl = 'verify'. */
	caCertificate?: string;
	maxConnections?: number;
	connectionTimeoutMs?: number;
	applicationName?: string;
}

interface CachedPool {
	pool: pg.Pool;
	/** When the pool was last asked for or lent a connection (Date.now()). */
	lastUsed: number;
	/** Users that keep the pool for as long as they run (holdPool): it is not closed meanwhile. */
	holders: number;
}

/**
 * Pools nobody asked for or queried in this long, and nobody holds, are closed on the next
 * access (no timers: see sweep).
 */
const POOL_IDLE_TTL_MS = 5 * 60 * 1000;

const pools = new Map<string, CachedPool>();

/**
 * The cache key is a hash of the whole config, because the config holds the password and a
 * plain key would keep the secret in a long-lived map key and in heap dumps.
 */
export function poolKey(config: ConnectionConfig): string {
	const normalized = JSON.stringify([
		config.host,
		config.port,
		config.database,
		config.user,
		config.password ?? '',
		config.ssl ?? 'disable',
		config.caCertificate ?? '',
		config.maxConnections ?? 10,
		config.connectionTimeoutMs ?? 10_000,
		config.applicationName ?? '',
	]);
	return createHash('sha256').update(normalized).digest('hex');
}

export function toPoolConfig(config: ConnectionConfig): pg.PoolConfig {
	let ssl: pg.PoolConfig['ssl'] = false;
	if (config.ssl === 'require') ssl = { rejectUnauthorized: false };
	if (config.ssl === 'verify')
		ssl = { rejectUnauthorized: true, ca: config.caCertificate || undefined };
	return {
		host: config.host,
		port: config.port,
		database: config.database,
		user: config.user,
		password: config.password,
		ssl,
		max: config.maxConnections ?? 10,
		connectionTimeoutMillis: config.connectionTimeoutMs ?? 10_000,
		idleTimeoutMillis: 10_000,
		allowExitOnIdle: true,
		// Probes start after 10 s without traffic instead of the OS default of two hours, so a
		// statement waiting on a connection whose peer vanished (a failover, a NAT dropping it)
		// fails within the OS's probe interval × count (Linux: 75 s × 9) instead of hours; the
		// LISTEN connection does the same.
		keepAlive: true,
		keepAliveInitialDelayMillis: 10_000,
		application_name: config.applicationName ?? 'n8n-nodes-durable-jobs',
	};
}

function sweepIdlePools(now: number): void {
	for (const [key, entry] of pools) {
		const busy = entry.pool.totalCount - entry.pool.idleCount > 0 || entry.pool.waitingCount > 0;
		if (!busy && entry.holders === 0 && now - entry.lastUsed > POOL_IDLE_TTL_MS) {
			pools.delete(key);
			void entry.pool.end().catch(() => undefined);
		}
	}
}

/**
 * One pg.Pool per distinct connection config, shared by every node execution in this process.
 * Idle clients are closed by pg itself (idleTimeoutMillis); whole pools that have not been used
 * for a while are closed lazily on the next call, since timers would keep n8n's process busy.
 */
export function getPool(config: ConnectionConfig, onError?: (error: Error) => void): pg.Pool {
	const now = Date.now();
	sweepIdlePools(now);
	const key = poolKey(config);
	const cached = pools.get(key);
	if (cached) {
		cached.lastUsed = now;
		return cached.pool;
	}
	const pool = newPool(toPoolConfig(config), onError);
	const entry: CachedPool = { pool, lastUsed: now, holders: 0 };
	// A store keeps its pool after asking for it once, so every query counts as a use.
	pool.on('acquire', () => {
		entry.lastUsed = Date.now();
	});
	pools.set(key, entry);
	return pool;
}

/**
 * Keeps a cached pool open for a user that holds on to it for longer than it queries it: an
 * active Job Trigger keeps one store while its queue may stay quiet for hours (its backstop can
 * be a day apart), and a pool closed under it would fail every later lease. Returns the function
 * that lets go (once); the pool idles from then on. A pool that is not cached (closed already,
 * or one of newPool's) is not held.
 */
export function holdPool(pool: pg.Pool): () => void {
	const entry = [...pools.values()].find((cached) => cached.pool === pool);
	if (!entry) return () => undefined;
	entry.holders++;
	let held = true;
	return () => {
		if (!held) return;
		held = false;
		entry.holders--;
		entry.lastUsed = Date.now();
	};
}

/** A pool of its own, not cached: for one task such as the credential test. Close it when done. */
export function newPool(config: pg.PoolConfig, onError?: (error: Error) => void): pg.Pool {
	const pool = new pg.Pool(config);
	// An idle client that loses its connection emits 'error' on the pool; without a listener
	// that would crash the whole n8n process. The broken client is discarded by pg.
	pool.on('error', (error) => onError?.(error));
	return pool;
}

/** Closes every cached pool and the connections that send finish notices (tests, CLI). */
export async function closeAllPools(): Promise<void> {
	const entries = [...pools.values()];
	pools.clear();
	await Promise.all([
		...entries.map(async (entry) => await entry.pool.end().catch(() => undefined)),
		closeNoticeConnections(),
	]);
}

export function cachedPoolCount(): number {
	return pools.size;
}
