/**
 * Child processes that must not outlive this one. Long-running servers (n8n and its task
 * runner, n8n workers) start in a process group of their own (`spawnGroup`) so that the whole
 * group can be signalled; short CLI runs are tracked (`trackChild`). Both are registered with
 * the cleanup registry, whose synchronous fallback SIGKILLs them when the process exits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';

import { registerCleanup } from './cleanup';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const pause = new Int32Array(new SharedArrayBuffer(4));
/** Blocks the thread (for the synchronous exit path only). */
export function sleepSync(ms: number): void {
	Atomics.wait(pause, 0, 0, ms);
}

/** True when `pid` no longer runs (gone, or a zombie waiting to be reaped). */
export function processGone(pid: number): boolean {
	try {
		const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
		return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
	} catch {
		if (process.platform === 'linux') return true;
	}
	try {
		process.kill(pid, 0);
		return false;
	} catch (error) {
		return (error as NodeJS.ErrnoException).code !== 'EPERM';
	}
}

/** Signals a whole process group (a leader started by `spawnGroup` and its children). */
export function killGroup(pid: number, signal: NodeJS.Signals): void {
	try {
		process.kill(-pid, signal);
	} catch {
		// The group is already gone.
	}
}

/** A short-lived child (an n8n CLI run, npm): SIGKILLed if this process ends first. */
export function trackChild(child: ChildProcess, name = 'child process'): void {
	const cleanup = registerCleanup(
		`${name} ${child.pid ?? ''}`.trim(),
		async () => {
			if (child.exitCode !== null || child.signalCode !== null) return;
			const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
			child.kill('SIGTERM');
			await Promise.race([exited, sleep(10_000).then(() => child.kill('SIGKILL'))]);
		},
		() => {
			child.kill('SIGKILL');
		},
	);
	child.once('exit', cleanup.unregister);
}

export interface GroupProcess {
	child: ChildProcess;
	exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
	done: boolean;
}

/** Starts `cmd` as the leader of a new process group, output appended to `logFile`. */
export function spawnGroup(
	cmd: string,
	args: string[],
	env: NodeJS.ProcessEnv,
	cwd: string,
	logFile: string,
	name = cmd,
): GroupProcess {
	const fd = openSync(logFile, 'a');
	const child = spawn(cmd, args, { cwd, env, detached: true, stdio: ['ignore', fd, fd] });
	closeSync(fd);
	const pid = child.pid;
	if (pid === undefined) throw new Error(`could not start ${cmd}`);
	const proc: GroupProcess = {
		child,
		done: false,
		exited: new Promise((resolveExit) => {
			child.on('exit', (code, signal) => {
				proc.done = true;
				resolveExit({ code, signal });
			});
			child.on('error', () => {
				proc.done = true;
				resolveExit({ code: null, signal: null });
			});
		}),
	};
	const cleanup = registerCleanup(
		`${name} (process group ${pid})`,
		() => stopGroup(proc, 'SIGTERM', 20_000),
		() => killGroup(pid, 'SIGKILL'),
	);
	// Also reap the rest of the group (a task runner) once the leader is gone.
	void proc.exited.then(() => {
		killGroup(pid, 'SIGKILL');
		cleanup.unregister();
	});
	return proc;
}

/** Sends `signal` to the group, SIGKILL after `graceMs`, and waits for the leader to exit. */
export async function stopGroup(
	proc: GroupProcess | undefined,
	signal: NodeJS.Signals,
	graceMs: number,
): Promise<void> {
	if (!proc || proc.done || proc.child.pid === undefined) return;
	killGroup(proc.child.pid, signal);
	let timer: NodeJS.Timeout | undefined;
	const timedOut = await Promise.race([
		proc.exited.then(() => false),
		new Promise<boolean>((resolve) => {
			timer = setTimeout(() => resolve(true), graceMs);
		}),
	]);
	// A pending grace timer would keep a test runner's process alive after the last test.
	clearTimeout(timer);
	if (timedOut) {
		killGroup(proc.child.pid, 'SIGKILL');
		await proc.exited;
	}
}

/** Runs `fn` over `items`, at most `size` at a time. */
export async function inPool<T>(
	items: T[],
	size: number,
	fn: (item: T) => Promise<unknown>,
): Promise<void> {
	const queue = [...items];
	await Promise.all(
		Array.from({ length: Math.min(size, queue.length) }, async () => {
			for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
		}),
	);
}
