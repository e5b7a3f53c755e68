/**
 * A Redis for n8n's queue mode in the end-to-end tests, decided before the tests are collected
 * (`findRedis`, synchronous, so a test file can skip its queue-mode suite with a message) and
 * started or reused when they run (`startRedis`):
 *
 * 1. `REDIS_URL` set: that Redis and no other (unavailable when it does not answer PING);
 * 2. else the `redis-server` binary (`REDIS_SERVER`, else from PATH): a private server on a free
 *    port with a temp folder, stopped and removed afterwards;
 * 3. else a Redis answering on 127.0.0.1:6379;
 * 4. else none: the reason says what to install or set.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

import { registerCleanup } from './cleanup';
import { freePort } from './postgres';
import { sleep, spawnGroup, stopGroup } from './processes';

export type RedisPlan =
	| { available: true; kind: 'url' | 'running'; host: string; port: number; description: string }
	| { available: true; kind: 'server'; binary: string; description: string }
	| { available: false; reason: string };

export interface RunningRedis {
	host: string;
	port: number;
	description: string;
	/** The private server's temp folder (removed by stop()). */
	dir?: string;
	stop(): Promise<void>;
}

const PING_SCRIPT = `
const socket = require('node:net').createConnection({ host: process.argv[1], port: Number(process.argv[2]) });
socket.setTimeout(2000, () => process.exit(1));
socket.on('error', () => process.exit(1));
socket.on('connect', () => socket.write('PING\\r\\n'));
socket.on('data', (data) => process.exit(String(data).startsWith('+PONG') ? 0 : 1));`;

/** True when a Redis at host:port answers PING (synchronously: a short node child process). */
export function answersPing(host: string, port: number): boolean {
	const result = spawnSync(process.execPath, ['-e', PING_SCRIPT, host, String(port)], {
		timeout: 5_000,
		stdio: 'ignore',
	});
	return result.status === 0;
}

function findExecutable(name: string, path: string | undefined): string | undefined {
	for (const dir of (path ?? '').split(delimiter).filter(Boolean)) {
		const candidate = join(dir, name);
		try {
			accessSync(candidate, constants.X_OK);
			return candidate;
		} catch {
			// Not here.
		}
	}
	return undefined;
}

export function findRedis(
	env: NodeJS.ProcessEnv = process.env,
	fallback: { host: string; port: number } = { host: '127.0.0.1', port: 6379 },
): RedisPlan {
	if (env.REDIS_URL) {
		let url: URL;
		try {
			url = new URL(env.REDIS_URL);
		} catch {
			return {
				available: false,
				reason: `REDIS_URL=${env.REDIS_URL} is not a URL (redis://host:port)`,
			};
		}
		const host = url.hostname || '127.0.0.1';
		const port = Number(url.port || 6379);
		if (!answersPing(host, port))
			return {
				available: false,
				reason: `REDIS_URL=${env.REDIS_URL} does not answer PING (start that Redis, or unset REDIS_URL to let the tests start redis-server)`,
			};
		return { available: true, kind: 'url', host, port, description: `REDIS_URL ${host}:${port}` };
	}
	const binary = env.REDIS_SERVER ?? findExecutable('redis-server', env.PATH);
	if (binary) {
		try {
			accessSync(binary, constants.X_OK);
			return { available: true, kind: 'server', binary, description: `${binary} on a free port` };
		} catch {
			// REDIS_SERVER names nothing runnable: fall through to a running Redis.
		}
	}
	if (answersPing(fallback.host, fallback.port))
		return {
			available: true,
			kind: 'running',
			host: fallback.host,
			port: fallback.port,
			description: `the Redis on ${fallback.host}:${fallback.port}`,
		};
	return {
		available: false,
		reason: `no Redis: ${binary ? `${binary} cannot be run` : 'redis-server is not installed'} and nothing answers on ${fallback.host}:${fallback.port} (install redis-server, e.g. apt-get install redis-server, or set REDIS_URL)`,
	};
}

async function waitForPing(host: string, port: number, isDead: () => boolean): Promise<void> {
	const deadline = Date.now() + 20_000;
	for (;;) {
		const ok = await new Promise<boolean>((resolve) => {
			const socket = createConnection({ host, port }, () => socket.write('PING\r\n'));
			socket.setTimeout(1_000, () => (socket.destroy(), resolve(false)));
			socket.once('error', () => resolve(false));
			socket.once('data', (data) => (socket.destroy(), resolve(String(data).startsWith('+PONG'))));
		});
		if (ok) return;
		if (isDead()) throw new Error(`redis-server exited before answering on ${host}:${port}`);
		if (Date.now() > deadline) throw new Error(`redis-server did not answer on ${host}:${port}`);
		await sleep(100);
	}
}

/** The Redis of a plan: reused as it is, or a private redis-server that `stop()` ends. */
export async function startRedis(plan: RedisPlan): Promise<RunningRedis> {
	if (!plan.available) throw new Error(plan.reason);
	if (plan.kind !== 'server')
		return {
			host: plan.host,
			port: plan.port,
			description: plan.description,
			stop: async () => {},
		};
	const dir = mkdtempSync(join(tmpdir(), 'durable-jobs-redis-'));
	const port = await freePort();
	const proc = spawnGroup(
		plan.binary,
		[
			'--port',
			String(port),
			'--bind',
			'127.0.0.1',
			'--save',
			'',
			'--appendonly',
			'no',
			'--dir',
			dir,
		],
		process.env,
		dir,
		join(dir, 'redis.log'),
		'redis-server',
	);
	const remove = () => rmSync(dir, { recursive: true, force: true });
	const cleanup = registerCleanup(
		`redis-server on port ${port}`,
		async () => {
			await stopGroup(proc, 'SIGTERM', 10_000);
			remove();
		},
		remove,
	);
	const stop = () => cleanup.run();
	try {
		await waitForPing('127.0.0.1', port, () => proc.done);
	} catch (error) {
		await stop();
		throw error;
	}
	return { host: '127.0.0.1', port, description: `redis-server on 127.0.0.1:${port}`, dir, stop };
}
