/**
 * Everything the scripts start or create (servers, process groups, temp folders) registers how
 * to undo it here, so that nothing outlives the process, whichever way it ends:
 *
 * - `registerCleanup(name, stop, stopNow)`: `stop` is the graceful, asynchronous way (stop n8n,
 *   shut PostgreSQL down, drop a database, remove a folder); `stopNow` the synchronous last
 *   resort that still works inside `process.on('exit')` (SIGKILL a process group, rmSync a
 *   folder). The returned handle's `run()` is the one way to call `stop`: however many callers
 *   (the owner's own stop, a signal's cleanup) ask at once, `stop` runs once, every caller
 *   waits for that same run, and the entry stays registered until it has finished, so a
 *   process that ends meanwhile still gets `stopNow`. `unregister()` drops the entry once the
 *   thing is gone by other means (a child that exited by itself).
 * - `exitCleanly(...)` for entry points (demo, rehearsal): SIGINT, SIGTERM and SIGHUP run every
 *   graceful cleanup, newest first, then exit with 128 + the signal number (output into a pipe
 *   that closed meanwhile is dropped); a second signal
 *   (2 s or more after the first: npm and the terminal both deliver the first Ctrl-C)
 *   skips to the synchronous ones. `runCleanups()` is the same for the error path.
 * - Without `exitCleanly` (a library inside a test runner), a signal runs the synchronous
 *   cleanups and is then re-raised when nobody else listens for it.
 * - On `exit`, whatever is still registered gets its synchronous cleanup.
 */
type Log = (line: string) => void;

interface Entry {
	name: string;
	run: () => Promise<void>;
	stopNow?: () => void;
}

export interface CleanupHandle {
	/** Runs the graceful stop (once, whoever asks first); the entry is dropped when it has finished. */
	run(): Promise<void>;
	/** Drops the entry without running anything. */
	unregister(): void;
}

const entries: Entry[] = [];
let hooksInstalled = false;
let graceful: { log: Log; onExit?: (code: number) => void } | undefined;
let cleaning: Promise<void> | undefined;

const SIGNALS = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 } as const;
type HandledSignal = keyof typeof SIGNALS;

function remove(entry: Entry): boolean {
	const index = entries.indexOf(entry);
	if (index < 0) return false;
	entries.splice(index, 1);
	return true;
}

function runSyncCleanups(): void {
	for (const entry of entries.splice(0).reverse()) {
		try {
			entry.stopNow?.();
		} catch {
			// Best effort: the process is going away.
		}
	}
}

function installHooks(): void {
	if (hooksInstalled) return;
	hooksInstalled = true;
	process.on('exit', runSyncCleanups);
	for (const signal of Object.keys(SIGNALS) as HandledSignal[]) {
		const handler = () => {
			if (graceful) {
				void onGracefulSignal(signal);
				return;
			}
			runSyncCleanups();
			// Only decide the exit ourselves when nobody else listens for this signal.
			if (process.listenerCount(signal) === 1) {
				process.removeListener(signal, handler);
				process.kill(process.pid, signal);
			}
		};
		process.on(signal, handler);
	}
}

/** How long an error waits for a signal that may have caused it (see failAndExit). */
const SIGNAL_GRACE_MS = 300;

let signalled = 0;
let firstSignalAt = 0;
async function onGracefulSignal(signal: HandledSignal): Promise<void> {
	const code = 128 + SIGNALS[signal];
	signalled++;
	if (signalled > 1) {
		// npm forwards the terminal's Ctrl-C to its child, which gets it from the terminal too:
		// only a signal that comes later is a second Ctrl-C.
		if (Date.now() - firstSignalAt < 2_000) return;
		graceful?.log(`${signal} again: stopping at once`);
		runSyncCleanups();
		process.exit(code);
	}
	firstSignalAt = Date.now();
	graceful?.log(`${signal}: stopping everything this command started…`);
	await runCleanups();
	graceful?.onExit?.(code);
	process.exit(code);
}

export function registerCleanup(
	name: string,
	stop: () => Promise<void>,
	stopNow?: () => void,
): CleanupHandle {
	installHooks();
	let running: Promise<void> | undefined;
	const run = () =>
		(running ??= stop().then(() => {
			// Dropped only now: a stop that fails or never ends leaves the entry to its
			// synchronous fallback.
			remove(entry);
		}));
	const entry: Entry = { name, run, stopNow };
	entries.push(entry);
	return {
		run,
		unregister: () => {
			remove(entry);
		},
	};
}

/**
 * Runs every registered graceful cleanup, newest first (n8n before the database it uses), each
 * given `timeoutMs` before its synchronous fallback runs instead. Safe to call twice.
 */
export async function runCleanups(options: { timeoutMs?: number; log?: Log } = {}): Promise<void> {
	if (cleaning) return await cleaning;
	const log = options.log ?? graceful?.log ?? (() => undefined);
	const timeoutMs = options.timeoutMs ?? 60_000;
	cleaning = (async () => {
		for (let entry = entries.at(-1); entry; entry = entries.at(-1)) {
			let timer: NodeJS.Timeout | undefined;
			const outcome = await Promise.race([
				entry.run().then(
					() => 'done' as const,
					(error: unknown) => error,
				),
				new Promise<'timeout'>((resolve) => {
					timer = setTimeout(() => resolve('timeout'), timeoutMs);
				}),
			]);
			clearTimeout(timer);
			// A finished run has dropped its entry; one that failed or timed out is forced.
			if (outcome === 'done' || !remove(entry)) continue;
			log(
				`could not stop ${entry.name} cleanly (${outcome === 'timeout' ? `no end after ${timeoutMs / 1000} s` : String((outcome as Error)?.message ?? outcome).split('\n')[0]}); forcing it`,
			);
			try {
				entry.stopNow?.();
			} catch {
				// Nothing more to try.
			}
		}
	})();
	try {
		await cleaning;
	} finally {
		cleaning = undefined;
	}
}

/**
 * For entry points: a signal stops everything registered, gracefully, then exits with
 * 128 + signal. `onExit` runs right before that exit (e.g. to print a last line).
 */
export function exitCleanly(options: { log: Log; onExit?: (code: number) => void }): void {
	installHooks();
	graceful = options;
	// Output piped into another program (`npm run demo | tee demo.log`): the same Ctrl-C ends
	// that program too, and the next line written into the closed pipe raises EPIPE. Unhandled,
	// that error ended the process in the middle of its cleanup.
	for (const stream of [process.stdout, process.stderr]) stream.on('error', ignoreClosedPipe);
}

function ignoreClosedPipe(error: NodeJS.ErrnoException): void {
	if (error.code !== 'EPIPE') throw error;
}

/** True once a signal started the graceful stop (errors it causes are not news). */
export function stopRequested(): boolean {
	return signalled > 0;
}

/** How many cleanups are registered (for tests). */
export function pendingCleanups(): string[] {
	return entries.map((entry) => entry.name);
}

/**
 * The end of an entry point that failed: prints the error (a DatabaseUrlError is one line: its
 * stack is its message; `stack: false` prints any error's message alone), stops everything
 * registered and exits with 1. Nothing to do when a signal already started the stop: the error
 * is the interrupted step's and no news.
 */
export async function failAndExit(
	error: unknown,
	options: { stack?: boolean } = {},
): Promise<void> {
	// A Ctrl-C or SIGTERM to the process group also reaches the children (npm installing n8n,
	// initdb, n8n): one that dies of it can be noticed before our own signal handler has run.
	// Give that handler a moment before calling the error a failure of its own.
	await new Promise((resolve) => setTimeout(resolve, SIGNAL_GRACE_MS));
	if (stopRequested()) return;
	const text =
		error instanceof Error
			? ((options.stack === false ? undefined : error.stack) ?? error.message)
			: String(error);
	process.stderr.write(`\n${text}\n`);
	await runCleanups({ log: (line) => process.stderr.write(`${line}\n`) });
	process.exit(1);
}
