/**
 * The lock around an install into the cache (scripts/lib/cache.ts, `withLock`): a lock that
 * names this process's own pid without being held by it is stale (a new container starts its
 * pids over); a waiter says whom it waits for, where the lock is and how to remove it; a
 * waiter that found a stale lock never removes the lock another waiter has created since; and
 * a release never removes a lock that is no longer its own.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { withLock } from '../../scripts/lib/cache';

/** Runs once after the next read of a lock's owner file, before the reader sees the content. */
let afterOwnerRead: ((path: string) => void) | undefined;

jest.mock('node:fs', () => {
	const actual = jest.requireActual<typeof fs>('node:fs');
	return {
		...actual,
		readFileSync: (...args: Parameters<typeof actual.readFileSync>) => {
			const content = actual.readFileSync(...args);
			const hook = afterOwnerRead;
			if (hook && typeof args[0] === 'string' && args[0].endsWith('.lock/pid')) {
				afterOwnerRead = undefined;
				hook(args[0]);
			}
			return content;
		},
	};
});

let dir: string;
let lockDir: string;
const children: ChildProcess[] = [];

beforeEach(() => {
	dir = mkdtempSync(join(tmpdir(), 'scripts-install-lock-'));
	lockDir = join(dir, 'n8n-2.40.7.lock');
});

afterEach(() => {
	afterOwnerRead = undefined;
	for (const child of children.splice(0)) child.kill('SIGKILL');
	rmSync(dir, { recursive: true, force: true });
});

/** A lock as another process (or an earlier version of the scripts, which wrote the pid alone) leaves it. */
function writeLock(pid: number): void {
	mkdirSync(lockDir);
	writeFileSync(join(lockDir, 'pid'), String(pid));
}

function liveProcess(): number {
	const child = spawn('sleep', ['30'], { stdio: 'ignore' });
	children.push(child);
	return child.pid!;
}

function deadPid(): number {
	return spawnSync('true').pid;
}

function lockContent(): string | undefined {
	try {
		return readFileSync(join(lockDir, 'pid'), 'utf8');
	} catch {
		return undefined;
	}
}

it('takes over a lock that names our own pid, which this process does not hold (pid reused in a new container)', async () => {
	writeLock(process.pid);
	const started = Date.now();
	let ran = false;
	await withLock(lockDir, async () => {
		ran = true;
		expect(lockContent()).toMatch(new RegExp(`^${process.pid} `));
	});
	expect(ran).toBe(true);
	expect(Date.now() - started).toBeLessThan(3_000);
	expect(lockContent()).toBeUndefined();
});

it('while waiting, names the owner pid and the lock path, and says how to remove the lock', async () => {
	const owner = liveProcess();
	writeLock(owner);
	const lines: string[] = [];
	const waiting = withLock(
		lockDir,
		async () => 'ran',
		(line) => lines.push(line),
	);
	await new Promise((resolve) => setTimeout(resolve, 300));
	expect(lines).toHaveLength(1);
	expect(lines[0]).toContain(`waiting for process ${owner}`);
	expect(lines[0]).toContain(lockDir);
	expect(lines[0]).toContain('if no such process runs');
	expect(lines[0]).toContain(`rm -rf ${lockDir}`);
	children[0].kill('SIGKILL');
	await expect(waiting).resolves.toBe('ran');
	expect(lockContent()).toBeUndefined();
});

it('a waiter that found a stale lock does not remove the lock another waiter created since', async () => {
	writeLock(deadPid());
	const other = liveProcess();
	let otherHolds = false;
	// Between this waiter's read of the dead owner and what it does next, another waiter that
	// found the same dead owner takes the lock over, when the protocol lets it (nobody is
	// deciding about this lock right now).
	afterOwnerRead = () => {
		if (fs.existsSync(`${lockDir}.takeover`)) return;
		rmSync(lockDir, { recursive: true, force: true });
		writeLock(other);
		otherHolds = true;
		setTimeout(() => {
			otherHolds = false;
			rmSync(lockDir, { recursive: true, force: true });
		}, 1_500);
	};
	let overlapped: boolean | undefined;
	await withLock(lockDir, async () => {
		overlapped = otherHolds || lockContent() === String(other);
	});
	expect(overlapped, 'both waiters held the lock at once').toBe(false);
});

it('a release leaves a lock that another process holds by now', async () => {
	await withLock(lockDir, async () => {
		rmSync(lockDir, { recursive: true, force: true });
		writeLock(liveProcess());
	});
	expect(lockContent()).toBe(String(children[0].pid));
});

it('two installs in this process take turns: a lock this process holds is not stale', async () => {
	const events: string[] = [];
	const install = (name: string) =>
		withLock(lockDir, async () => {
			events.push(`${name} starts`);
			await new Promise((resolve) => setTimeout(resolve, 200));
			events.push(`${name} ends`);
		});
	await Promise.all([install('first'), install('second')]);
	expect(events).toEqual(['first starts', 'first ends', 'second starts', 'second ends']);
});
