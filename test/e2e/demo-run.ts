/**
 * Runs `scripts/demo.ts` the way `npm run demo` does (node with tsx's loader), in a process group of its
 * own and with a temp folder (TMPDIR) of its own, so that a test can send it the signal a
 * Ctrl-C sends and then check that nothing it started is left: no file in its temp folder, no
 * process it started (every descendant seen while it ran), no process naming its temp folder.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const REPO_DIR = resolve(__dirname, '..', '..');

interface ProcInfo {
	ppid: number;
	start: string;
	zombie: boolean;
}

function readProc(pid: number): ProcInfo | undefined {
	try {
		const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
		const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
		// After "pid (comm) ": state, ppid, …; starttime is field 22 of the whole line.
		return { ppid: Number(fields[1]), start: fields[19], zombie: fields[0] === 'Z' };
	} catch {
		return undefined;
	}
}

function allPids(): number[] {
	return readdirSync('/proc')
		.filter((name) => /^\d+$/.test(name))
		.map(Number);
}

function cmdline(pid: number): string {
	try {
		return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
	} catch {
		return '';
	}
}

export interface DemoRun {
	child: ChildProcess;
	tmpDir: string;
	output(): string;
	stderr(): string;
	/** Resolves once the output matches `pattern`; rejects when the demo exits first. */
	waitFor(pattern: RegExp, timeoutMs: number): Promise<void>;
	/** Sends `signal` to the demo's whole process group, as a terminal's Ctrl-C does. */
	signal(signal: NodeJS.Signals): void;
	exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
	/** Files left in its temp folder (tsx's own compile cache aside), and live processes it started. */
	leftovers(): { files: string[]; processes: string[] };
	/** Removes the temp folder (after the checks). */
	dispose(): void;
}

export function startDemo(
	options: {
		env?: Record<string, string>;
		args?: string[];
		/** The entry point (default the demo; the rehearsal stops the same way). */
		script?: 'scripts/demo.ts' | 'scripts/rehearsal.ts';
	} = {},
): DemoRun {
	const tmpDir = mkdtempSync(join(tmpdir(), 'demo-exit-'));
	// The embedded PostgreSQL runs as the user postgres, which must be able to enter it.
	chmodSync(tmpDir, 0o755);
	const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmpDir, ...options.env };
	if (!options.env || !('DATABASE_URL' in options.env)) delete env.DATABASE_URL;
	// As package.json's "demo" script runs it: one node process, TypeScript through tsx's loader.
	const child = spawn(
		process.execPath,
		['--import', 'tsx', options.script ?? 'scripts/demo.ts', ...(options.args ?? [])],
		{ cwd: REPO_DIR, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
	);
	let output = '';
	let errors = '';
	child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
	child.stderr?.on('data', (chunk: Buffer) => (errors += chunk.toString('utf8')));
	const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
		child.once('exit', (code, signal) => done({ code, signal })),
	);
	let running = true;
	void exited.then(() => (running = false));

	// Every descendant seen while it runs, with its start time (a pid may be reused later).
	const seen = new Map<number, { start: string; command: string }>();
	const collect = () => {
		const infos = new Map(allPids().map((pid) => [pid, readProc(pid)]));
		const family = new Set([child.pid!]);
		for (let grew = true; grew; ) {
			grew = false;
			for (const [pid, info] of infos) {
				if (info && !family.has(pid) && family.has(info.ppid)) {
					family.add(pid);
					grew = true;
				}
			}
		}
		for (const pid of family) {
			const info = infos.get(pid);
			if (info && !seen.has(pid)) seen.set(pid, { start: info.start, command: cmdline(pid) });
		}
	};
	const timer = setInterval(collect, 100);
	void exited.then(() => clearInterval(timer));

	return {
		child,
		tmpDir,
		output: () => output,
		stderr: () => errors,
		waitFor: async (pattern, timeoutMs) => {
			const deadline = Date.now() + timeoutMs;
			while (!pattern.test(output)) {
				if (!running)
					throw new Error(`the demo exited before printing ${pattern}:\n${output}\n${errors}`);
				if (Date.now() > deadline)
					throw new Error(`the demo did not print ${pattern} in time:\n${output}\n${errors}`);
				await new Promise((r) => setTimeout(r, 100));
			}
			collect();
		},
		signal: (signal) => {
			collect();
			process.kill(-child.pid!, signal);
		},
		exited,
		leftovers: () => {
			const files = readdirSync(tmpDir).filter((name) => !name.startsWith('tsx-'));
			const processes: string[] = [];
			for (const [pid, { start, command }] of seen) {
				const info = readProc(pid);
				if (info && !info.zombie && info.start === start) processes.push(`${pid} ${command}`);
			}
			for (const pid of allPids()) {
				const command = cmdline(pid);
				if (command.includes(tmpDir) && !processes.some((p) => p.startsWith(`${pid} `)))
					processes.push(`${pid} ${command}`);
			}
			return { files, processes };
		},
		dispose: () => rmSync(tmpDir, { recursive: true, force: true }),
	};
}
