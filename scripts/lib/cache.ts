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
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

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

/**
 * Cross-process lock (several vitest workers or a demo may ask for the same install at once).
 * `mkdir` is atomic; a lock whose owner pid is gone is taken over.
 */
export async function withLock<T>(
	lockDir: string,
	fn: () => Promise<T>,
	log: (s: string) => void = () => {},
): Promise<T> {
	const pidFile = join(lockDir, 'pid');
	let announced = false;
	for (;;) {
		try {
			mkdirSync(lockDir);
			writeFileSync(pidFile, String(process.pid));
			break;
		} catch (err) {
			if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
			let owner = NaN;
			try {
				owner = Number(readFileSync(pidFile, 'utf8'));
			} catch {
				// The owner may not have written its pid yet.
			}
			if (Number.isFinite(owner) && owner > 0 && !pidAlive(owner)) {
				rmSync(lockDir, { recursive: true, force: true });
				continue;
			}
			if (!announced) {
				log(`waiting for another process installing into ${lockDir.replace(/\.lock$/, '')}`);
				announced = true;
			}
			await sleep(1000);
		}
	}
	try {
		return await fn();
	} finally {
		rmSync(lockDir, { recursive: true, force: true });
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
