/**
 * `npm run n8n:install` (scripts/install-n8n.ts) stopped by Ctrl-C or SIGTERM while npm
 * downloads n8n: it stops npm and releases the install lock before it exits, so the next run
 * does not wait for it. A second run that starts meanwhile says which process holds the lock,
 * where the lock is and how to remove it, and takes over once the first is gone.
 *
 * Nothing is downloaded: `npm` is a stand-in that waits, and N8N_NODE_BINARY names a stand-in
 * Node 24, in a cache folder of the test's own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
	chmodSync,
	existsSync,
	mkdirSync,
	mkdtempSync,
	readFileSync,
	rmSync,
	writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const REPO_DIR = resolve(__dirname, '..', '..');

/** Resolves once the stand-in npm has been started `count` times. */
async function npmStarted(count: number): Promise<void> {
	const deadline = Date.now() + 30_000;
	const started = () =>
		existsSync(join(dir, 'npm-runs'))
			? readFileSync(join(dir, 'npm-runs'), 'utf8').trim().split('\n').length
			: 0;
	while (started() < count) {
		if (Date.now() > deadline) throw new Error(`npm was not started ${count} times in time`);
		await new Promise((r) => setTimeout(r, 100));
	}
}

/** The stand-in npm processes that still run. */
function npmRunning(): number[] {
	return readFileSync(join(dir, 'npm-runs'), 'utf8')
		.trim()
		.split('\n')
		.map(Number)
		.filter((pid) => {
			try {
				return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
			} catch {
				return false;
			}
		});
}

interface InstallRun {
	child: ChildProcess;
	output(): string;
	waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
	exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

let dir: string;
let cacheDir: string;
let binDir: string;
const runs: InstallRun[] = [];

beforeEach(() => {
	dir = mkdtempSync(join(tmpdir(), 'scripts-install-interrupt-'));
	cacheDir = join(dir, 'cache');
	binDir = join(dir, 'bin');
	mkdirSync(binDir);
	const script = (name: string, body: string) => {
		writeFileSync(join(binDir, name), `#!/bin/sh\n${body}\n`);
		chmodSync(join(binDir, name), 0o755);
	};
	script('node24', 'echo v24.0.0');
	script('npm', `echo "$$" >> '${join(dir, 'npm-runs')}'; exec sleep 60`);
});

afterEach(async () => {
	for (const run of runs.splice(0)) {
		if (run.child.exitCode === null && run.child.signalCode === null) {
			process.kill(-run.child.pid!, 'SIGKILL');
			await run.exited;
		}
	}
	rmSync(dir, { recursive: true, force: true });
});

function startInstall(): InstallRun {
	const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/install-n8n.ts'], {
		cwd: REPO_DIR,
		env: {
			...process.env,
			DURABLE_JOBS_CACHE_DIR: cacheDir,
			N8N_NODE_BINARY: join(binDir, 'node24'),
			PATH: `${binDir}:${process.env.PATH}`,
		},
		detached: true,
		stdio: ['ignore', 'pipe', 'pipe'],
	});
	let output = '';
	child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
	child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
	const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
		child.once('exit', (code, signal) => done({ code, signal })),
	);
	const run: InstallRun = {
		child,
		output: () => output,
		exited,
		waitFor: async (pattern, timeoutMs = 30_000) => {
			const deadline = Date.now() + timeoutMs;
			while (!pattern.test(output)) {
				if (child.exitCode !== null || child.signalCode !== null)
					throw new Error(`install-n8n exited before printing ${pattern}:\n${output}`);
				if (Date.now() > deadline)
					throw new Error(`install-n8n did not print ${pattern} in time:\n${output}`);
				await new Promise((r) => setTimeout(r, 100));
			}
		},
	};
	runs.push(run);
	return run;
}

const lockDir = () => join(cacheDir, 'n8n-2.40.7.lock');

for (const [signal, code] of [
	['SIGINT', 130],
	['SIGTERM', 143],
] as const) {
	it(`${signal} while npm downloads n8n: npm is stopped, the lock released, exit code ${code}`, async () => {
		const run = startInstall();
		await npmStarted(1);
		expect(existsSync(lockDir())).toBe(true);
		process.kill(-run.child.pid!, signal);
		const exit = await run.exited;
		expect(exit, run.output()).toEqual({ code, signal: null });
		expect(run.output()).toMatch(new RegExp(`${signal}: stopping everything this command started`));
		expect(run.output()).toMatch(/Stopped\.\n$/);
		expect(existsSync(lockDir()), 'the install lock is left behind').toBe(false);
		expect(npmRunning()).toEqual([]);
	}, 60_000);
}

it('a second run waits naming the first one and the lock, and takes over once the first is stopped', async () => {
	const first = startInstall();
	await npmStarted(1);
	const second = startInstall();
	await second.waitFor(/waiting for process \d+/);
	expect(second.output()).toContain(`waiting for process ${first.child.pid}`);
	expect(second.output()).toContain(lockDir());
	expect(second.output()).toContain(`rm -rf ${lockDir()}`);
	process.kill(-first.child.pid!, 'SIGINT');
	await first.exited;
	await npmStarted(2);
	process.kill(-second.child.pid!, 'SIGINT');
	expect(await second.exited).toEqual({ code: 130, signal: null });
	expect(existsSync(lockDir())).toBe(false);
	expect(npmRunning()).toEqual([]);
}, 90_000);
