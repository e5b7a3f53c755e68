/**
 * The Redis of the queue-mode end-to-end tests (scripts/lib/redis.ts): which one is chosen, the
 * "no Redis" answer that makes them skip with a reason, and a private redis-server that is
 * really started and leaves nothing behind. The "no Redis" cases point the lookup at a port
 * where nothing listens and at a binary that does not exist, so a Redis this machine runs is
 * neither needed nor disturbed.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';

import { freePort } from '../../scripts/lib/postgres';
import { answersPing, findRedis, startRedis } from '../../scripts/lib/redis';

async function deadPort(): Promise<number> {
	return await freePort();
}

describe('findRedis', () => {
	it('without redis-server and without a Redis on the fallback port: unavailable, saying what to install or set', async () => {
		const port = await deadPort();
		const plan = findRedis(
			{ PATH: '/nonexistent-bin', REDIS_SERVER: '/nonexistent/redis-server' },
			{ host: '127.0.0.1', port },
		);
		expect(plan).toEqual({
			available: false,
			reason: `no Redis: /nonexistent/redis-server cannot be run and nothing answers on 127.0.0.1:${port} (install redis-server, e.g. apt-get install redis-server, or set REDIS_URL)`,
		});
		expect(findRedis({ PATH: '' }, { host: '127.0.0.1', port })).toMatchObject({
			available: false,
			reason: expect.stringContaining('redis-server is not installed'),
		});
	});

	it('REDIS_URL that does not answer: unavailable, naming it; REDIS_URL wins over a binary', async () => {
		const port = await deadPort();
		const plan = findRedis({ REDIS_URL: `redis://127.0.0.1:${port}`, PATH: process.env.PATH });
		expect(plan.available).toBe(false);
		expect(!plan.available && plan.reason).toMatch(
			new RegExp(`^REDIS_URL=redis://127\\.0\\.0\\.1:${port} does not answer PING`),
		);
	});

	it('a port that accepts connections but is no Redis does not count', async () => {
		// In a child process: answersPing blocks this one while it waits.
		const server = spawn(
			process.execPath,
			[
				'-e',
				"const s = require('node:net').createServer((c) => c.end('HTTP/1.1 400 Bad Request\\r\\n\\r\\n')); s.listen(0, '127.0.0.1', () => console.log(s.address().port));",
			],
			{ stdio: ['ignore', 'pipe', 'ignore'] },
		);
		try {
			const port = await new Promise<number>((resolve) =>
				server.stdout.once('data', (data: Buffer) => resolve(Number(String(data).trim()))),
			);
			expect(answersPing('127.0.0.1', port)).toBe(false);
		} finally {
			server.kill();
		}
	});
});

const binary = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].find(existsSync);

(binary ? describe : describe.skip)('a private redis-server', () => {
	it('starts on a free port, answers PING, and stop() ends it and removes its folder', async () => {
		const plan = findRedis(
			{ PATH: '', REDIS_SERVER: binary },
			{ host: '127.0.0.1', port: await deadPort() },
		);
		expect(plan).toMatchObject({ available: true, kind: 'server' });
		const redis = await startRedis(plan);
		expect(redis.port).not.toBe(6379);
		expect(answersPing(redis.host, redis.port)).toBe(true);
		expect(redis.dir && existsSync(redis.dir)).toBe(true);
		await redis.stop();
		expect(answersPing(redis.host, redis.port)).toBe(false);
		expect(existsSync(redis.dir!)).toBe(false);
	});
});
