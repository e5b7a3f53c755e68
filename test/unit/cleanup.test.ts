/**
 * The cleanup registry of the scripts (scripts/lib/cleanup.ts): a stop that its owner started
 * and a signal's cleanup that asks for it at the same time share one run, and neither the
 * cleanup pass nor the process moves on before that run has finished. The rehearsal's Ctrl-C
 * once left an embedded PostgreSQL's folder behind when its own `finally` had started the
 * server's stop and the cleanup pass, finding the entry already gone, exited under it.
 */
import { pendingCleanups, registerCleanup, runCleanups } from '../../scripts/lib/cleanup';

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void } {
	let resolve!: () => void;
	let reject!: (e: Error) => void;
	const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
	return { promise, resolve, reject };
}

afterEach(async () => {
	await runCleanups({ timeoutMs: 1_000 });
	expect(pendingCleanups()).toEqual([]);
});

it('one run for every caller; the entry stays registered until the run has finished', async () => {
	const release = deferred();
	let stops = 0;
	const handle = registerCleanup('server A', async () => {
		stops++;
		await release.promise;
	});
	const first = handle.run();
	const second = handle.run();
	await Promise.resolve();
	expect(stops).toBe(1);
	expect(pendingCleanups()).toEqual(['server A']);
	release.resolve();
	await Promise.all([first, second]);
	expect(stops).toBe(1);
	expect(pendingCleanups()).toEqual([]);
});

it('a cleanup pass waits for a stop its owner started, and does not run it twice', async () => {
	const release = deferred();
	const order: string[] = [];
	let stops = 0;
	const older = registerCleanup('n8n database', async () => {
		stops++;
		await release.promise;
		order.push('n8n database removed');
	});
	registerCleanup('job database', async () => {
		order.push('job database removed');
	});
	// The owner's own stop (the rehearsal's `finally`) starts first…
	const owners = older.run();
	// …then the signal's cleanup pass runs every entry, newest first.
	let passDone = false;
	const pass = runCleanups({ timeoutMs: 5_000 }).then(() => (passDone = true));
	await new Promise((resolve) => setTimeout(resolve, 20));
	expect(order).toEqual(['job database removed']);
	expect(passDone).toBe(false);
	expect(pendingCleanups()).toEqual(['n8n database']);
	release.resolve();
	await Promise.all([owners, pass]);
	expect(order).toEqual(['job database removed', 'n8n database removed']);
	expect(stops).toBe(1);
});

it('a stop that fails stays registered, and the cleanup pass forces it', async () => {
	let forced = 0;
	const handle = registerCleanup(
		'server B',
		async () => {
			throw new Error('shutdown refused');
		},
		() => {
			forced++;
		},
	);
	await expect(handle.run()).rejects.toThrow('shutdown refused');
	expect(pendingCleanups()).toEqual(['server B']);
	const lines: string[] = [];
	await runCleanups({ timeoutMs: 1_000, log: (line) => lines.push(line) });
	expect(forced).toBe(1);
	expect(lines).toEqual([
		expect.stringMatching(/could not stop server B cleanly \(shutdown refused\)/),
	]);
	expect(pendingCleanups()).toEqual([]);
});

it('a stop that never ends is forced after the timeout', async () => {
	let forced = 0;
	registerCleanup(
		'server C',
		() => new Promise<void>(() => undefined),
		() => {
			forced++;
		},
	);
	const lines: string[] = [];
	await runCleanups({ timeoutMs: 50, log: (line) => lines.push(line) });
	expect(forced).toBe(1);
	expect(lines).toEqual([expect.stringMatching(/server C .*no end after 0\.05 s/)]);
});

it('unregister drops the entry without running anything', async () => {
	let stops = 0;
	const handle = registerCleanup('child 42', async () => {
		stops++;
	});
	handle.unregister();
	expect(pendingCleanups()).toEqual([]);
	await runCleanups();
	expect(stops).toBe(0);
});
