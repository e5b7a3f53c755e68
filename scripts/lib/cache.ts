/**
 * Shared helpers for the e2e/demo tool cache (Node 24 and n8n installs).
 *
 * The cache lives outside the repository so a `git clean` or a fresh checkout does not throw
 * away a multi-gigabyte n8n install:
 *   `$DURABLE_JOBS_CACHE_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/n8n-nodes-durable-jobs`.
 * Every install goes into its own folder keyed by version and counts as done only once
 * `.install-complete` exists in it, so an interrupted install is wiped and redone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
	existsSync,
	mkdirSync,
	readFileSync,
	renameSync,
	rmSync,
	statSync,
	writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

import { registerCleanup } from './cleanup';
import { trackChild } from './processes';

export const COMPLETE_MARKER = '.install-complete';

export function cacheRoot(): string {
	if (process.env.DURABLE_JOBS_CACHE_DIR) return process.env.DURABLE_JOBS_CACHE_DIR;
	const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
	return join(base, 'n8n-nodes-durable-jobs');
}

export interface RunResult {
	code: number;
	stdout: string;
	stderr: string;
}

export interface RunOptions {
	cwd?: string;
	env?: NodeJS.ProcessEnv;
	/** Called with every chunk of output (both streams), e.g. to tee into a log. */
	onOutput?: (chunk: string) => void;
	timeoutMs?: number;
	/** Called once the process exists (e.g. to kill it if the caller exits first). */
	onSpawn?: (child: ChildProcess) => void;
}

/** Runs a command to completion and collects its output; never throws on a non-zero exit. */
export async function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
	return await new Promise((resolve, reject) => {
		const child = spawn(cmd, args, {
			cwd: opts.cwd,
			env: opts.env ?? process.env,
			stdio: ['ignore', 'pipe', 'pipe'],
		});
		opts.onSpawn?.(child);
		let stdout = '';
		let stderr = '';
		child.stdout.setEncoding('utf8');
		child.stderr.setEncoding('utf8');
		child.stdout.on('data', (c: string) => {
			stdout += c;
			opts.onOutput?.(c);
		});
		child.stderr.on('data', (c: string) => {
			stderr += c;
			opts.onOutput?.(c);
		});
		const timer =
			opts.timeoutMs !== undefined
				? setTimeout(() => {
						child.kill('SIGKILL');
					}, opts.timeoutMs)
				: undefined;
		child.on('error', (err) => {
			if (timer) clearTimeout(timer);
			reject(err);
		});
		child.on('close', (code, signal) => {
			if (timer) clearTimeout(timer);
			resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr });
		});
	});
}

export async function runOrThrow(
	cmd: string,
	args: string[],
	opts: RunOptions = {},
): Promise<RunResult> {
	const res = await run(cmd, args, opts);
	if (res.code !== 0) {
		throw new Error(
			`\`${cmd} ${args.join(' ')}\` exited with ${res.code}\n${tail(res.stdout + '\n' + res.stderr, 60)}`,
		);
	}
	return res;
}

/** `1.23 GB`, `190 MB`. */
export function formatBytes(bytes: number): string {
	if (bytes >= 1e9) return `${(bytes / 1e9).toFixed(2)} GB`;
	return `${Math.round(bytes / 1e6)} MB`;
}

/** `45 s`, `3 min 05 s`. */
export function formatDuration(ms: number): string {
	const seconds = Math.round(ms / 1000);
	if (seconds < 60) return `${seconds} s`;
	return `${Math.floor(seconds / 60)} min ${String(seconds % 60).padStart(2, '0')} s`;
}

/**
 * Reports every `everyMs` how much an install has written into `dir` so far (`du`, in the
 * background; npm shows no byte progress of its own). Returns the function that stops it.
 */
export function watchInstallSize(
	dir: string,
	what: string,
	expectedBytes: number,
	log: (line: string) => void,
	everyMs = 10_000,
): () => void {
	const started = Date.now();
	let measuring = false;
	const timer = setInterval(() => {
		if (measuring) return;
		measuring = true;
		void run('du', ['-sk', dir])
			.then((result) => {
				const bytes = Number(result.stdout.split('\t')[0]) * 1024;
				if (Number.isFinite(bytes) && bytes > 0)
					log(
						`${what}: ${formatBytes(bytes)} of about ${formatBytes(expectedBytes)} on disk (${formatDuration(Date.now() - started)})`,
					);
			})
			.catch(() => undefined)
			.finally(() => {
				measuring = false;
			});
	}, everyMs);
	timer.unref();
	return () => clearInterval(timer);
}

export function tail(text: string, lines: number): string {
	return text.split('\n').slice(-lines).join('\n');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function pidAlive(pid: number): boolean {
	try {
		process.kill(pid, 0);
		return true;
	} catch (err) {
		return (err as NodeJS.ErrnoException).code === 'EPERM';
	}
}

/** The file in a lock folder that names its owner: `<pid> <token>`. */
const OWNER_FILE = 'pid';
/**
 * A lock folder without a readable owner (an older version of this code created the folder
 * first and wrote the owner next) is stale once it is this old.
 */
const OWNERLESS_STALE_MS = 30_000;
/** Takeovers are synchronous and last microseconds: only a SIGKILL inside one leaves this. */
const TAKEOVER_STALE_MS = 10_000;
/** How often a waiter says again whom it waits for. */
const WAIT_REMINDER_MS = 60_000;

/** The locks this process holds: a lock naming our own pid and not among these is stale. */
const heldLocks = new Set<string>();

export type LockState =
	| { held: false }
	| {
			held: true;
			/** The owner's pid, when the lock names one. */
			pid: number | undefined;
			/** True when the owner is gone (or is this process's pid reused, see withLock). */
			stale: boolean;
	  };

function errorCode(error: unknown): string | undefined {
	return (error as NodeJS.ErrnoException).code;
}

function ageMs(path: string): number | undefined {
	try {
		return Date.now() - statSync(path).mtimeMs;
	} catch {
		return undefined;
	}
}

/** Who holds `lockDir`, and whether that owner is gone. */
export function inspectLock(lockDir: string): LockState {
	let content: string | undefined;
	try {
		content = readFileSync(join(lockDir, OWNER_FILE), 'utf8');
	} catch (error) {
		if (errorCode(error) !== 'ENOENT' && errorCode(error) !== 'ENOTDIR') throw error;
	}
	const pid = Number(content?.trim().split(/\s+/)[0]);
	if (content === undefined || !Number.isInteger(pid) || pid <= 0) {
		const age = ageMs(lockDir);
		if (age === undefined) return { held: false };
		return { held: true, pid: undefined, stale: age > OWNERLESS_STALE_MS };
	}
	// Our own pid in a lock we do not hold: written by an earlier container whose pids started
	// over, or by this process before a crash it did not survive.
	const stale = pid === process.pid ? !heldLocks.has(lockDir) : !pidAlive(pid);
	return { held: true, pid, stale };
}

/**
 * Creates `lockDir` with its owner file in one step: the folder is prepared under another name
 * and renamed into place, which fails while a lock folder (never empty) is there.
 */
function tryCreateLock(lockDir: string, owner: string): boolean {
	const staging = `${lockDir}.${process.pid}-${randomBytes(4).toString('hex')}`;
	mkdirSync(staging);
	try {
		writeFileSync(join(staging, OWNER_FILE), owner);
		renameSync(staging, lockDir);
		return true;
	} catch (error) {
		if (errorCode(error) === 'ENOTEMPTY' || errorCode(error) === 'EEXIST') return false;
		throw error;
	} finally {
		rmSync(staging, { recursive: true, force: true });
	}
}

/**
 * Removes `lockDir` when its owner is gone, and says who holds it otherwise. Two waiters that
 * both found the same stale lock must not both remove it: the second would remove the lock
 * the first has created since. So the owner is read again, and the lock removed, only while
 * holding `<lockDir>.takeover` (created by mkdir, which only one of them can do).
 */
export function removeLockIfStale(lockDir: string): LockState {
	const takeover = `${lockDir}.takeover`;
	try {
		mkdirSync(takeover);
	} catch (error) {
		if (errorCode(error) !== 'EEXIST') throw error;
		if ((ageMs(takeover) ?? 0) > TAKEOVER_STALE_MS)
			rmSync(takeover, { recursive: true, force: true });
		const state = inspectLock(lockDir);
		// Another waiter is deciding right now; ask again on the next round.
		return state.held ? { ...state, stale: false } : state;
	}
	try {
		const state = inspectLock(lockDir);
		if (!state.held || !state.stale) return state;
		rmSync(lockDir, { recursive: true, force: true });
		return { held: false };
	} finally {
		rmSync(takeover, { recursive: true, force: true });
	}
}

/** Removes `lockDir` if it is still the one `owner` created (never another process's lock). */
function releaseLock(lockDir: string, owner: string): void {
	heldLocks.delete(lockDir);
	let content: string | undefined;
	try {
		content = readFileSync(join(lockDir, OWNER_FILE), 'utf8');
	} catch {
		return;
	}
	if (content === owner) rmSync(lockDir, { recursive: true, force: true });
}

function shellQuote(text: string): string {
	return /^[\w./+-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

function waitingMessage(lockDir: string, pid: number | undefined, waitedMs: number): string {
	const owner = pid === undefined ? 'a process that did not write its pid' : `process ${pid}`;
	const check =
		pid === undefined ? '' : ` (\`ps -p ${pid}\` shows none, or not an install of this project)`;
	return (
		`${waitedMs > 0 ? `still waiting (${formatDuration(waitedMs)})` : 'waiting'} for ${owner}, ` +
		`which holds the lock ${lockDir} while it installs into ${lockDir.replace(/\.lock$/, '')}; ` +
		`if no such process runs${check}, remove the lock: rm -rf ${shellQuote(lockDir)}`
	);
}

/**
 * Cross-process lock (several jest workers or a demo may ask for the same install at once).
 * The lock folder appears with its owner's pid in one rename; a lock whose owner is gone is
 * taken over (see removeLockIfStale). The lock is released when `fn` ends and, through the
 * cleanup registry, when the process is stopped by a signal or exits first.
 */
export async function withLock<T>(
	lockDir: string,
	fn: () => Promise<T>,
	log: (s: string) => void = () => {},
): Promise<T> {
	const owner = `${process.pid} ${randomBytes(8).toString('hex')}\n`;
	const waitStarted = Date.now();
	let announced: { pid: number | undefined; at: number } | undefined;
	for (;;) {
		const heldHere = heldLocks.has(lockDir);
		if (!heldHere && tryCreateLock(lockDir, owner)) break;
		const state: LockState = heldHere
			? { held: true, pid: process.pid, stale: false }
			: removeLockIfStale(lockDir);
		if (!state.held) continue;
		const now = Date.now();
		if (!announced || announced.pid !== state.pid || now - announced.at >= WAIT_REMINDER_MS) {
			log(waitingMessage(lockDir, state.pid, announced ? now - waitStarted : 0));
			announced = { pid: state.pid, at: now };
		}
		await sleep(1000);
	}
	heldLocks.add(lockDir);
	const release = () => releaseLock(lockDir, owner);
	const cleanup = registerCleanup(`install lock ${lockDir}`, async () => release(), release);
	try {
		return await fn();
	} finally {
		cleanup.unregister();
		release();
	}
}

/**
 * Ensures `dir` holds a complete install: reuses it when the marker exists, otherwise wipes it,
 * runs `install(dir)` and writes the marker only after it succeeded.
 */
export async function ensureInstalled(
	dir: string,
	install: (dir: string) => Promise<void>,
	log: (s: string) => void = () => {},
): Promise<void> {
	const marker = join(dir, COMPLETE_MARKER);
	if (existsSync(marker)) return;
	mkdirSync(join(dir, '..'), { recursive: true });
	await withLock(
		`${dir}.lock`,
		async () => {
			if (existsSync(marker)) return;
			rmSync(dir, { recursive: true, force: true });
			mkdirSync(dir, { recursive: true });
			await install(dir);
			writeFileSync(marker, new Date().toISOString() + '\n');
		},
		log,
	);
}

/**
 * `npm install <spec>` into an empty cache folder `dir`, saying up front what it downloads and
 * how much, then its size on disk every 10 s, then how long it took.
 */
export async function npmInstallIntoCache(
	dir: string,
	options: {
		spec: string;
		/** What is installed, for the progress lines ("n8n 2.40.7"). */
		what: string;
		expectedBytes: number;
		npmArgs: string[];
		log: (line: string) => void;
	},
): Promise<void> {
	const { spec, what, log } = options;
	log(
		`downloading ${what} from npm into ${dir} (about ${formatBytes(options.expectedBytes)}, first run only)`,
	);
	writeFileSync(
		join(dir, 'package.json'),
		JSON.stringify({ name: 'durable-jobs-cache', private: true }) + '\n',
	);
	const started = Date.now();
	const stopWatching = watchInstallSize(dir, what, options.expectedBytes, log);
	try {
		await runOrThrow('npm', ['install', spec, '--no-audit', '--no-fund', ...options.npmArgs], {
			cwd: dir,
			onSpawn: (child) => trackChild(child, `npm install ${spec}`),
		});
	} finally {
		stopWatching();
	}
	log(`${what} installed in ${formatDuration(Date.now() - started)}`);
}
