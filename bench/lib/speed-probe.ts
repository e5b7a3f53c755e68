import type pg from 'pg';

import { log, now, round } from './util';

/** How fast the server and this process ran a fixed piece of work, in ms (lower is faster). */
export interface MachineSpeed {
	serverMs: number;
	nodeMs: number;
}

/**
 * The time of a fixed piece of work in the server (a sum over a million-row series) and in
 * Node.js (a fixed arithmetic loop): best of three each. Machines of one kind differ in it by
 * half and more, and a drain whose statements are unchanged follows it (docs/PERFORMANCE.md,
 * "Eighteenth part"), so a report with it tells a slower machine from slower code.
 */
export async function speedProbe(admin: pg.Pool): Promise<MachineSpeed> {
	let serverMs = Infinity;
	let nodeMs = Infinity;
	for (let attempt = 0; attempt < 3; attempt++) {
		let started = now();
		await admin.query('SELECT sum(i) FROM generate_series(1, 1000000) AS i');
		serverMs = Math.min(serverMs, now() - started);
		started = now();
		let sink = 0;
		for (let i = 0; i < 20_000_000; i++) sink = (sink + i * 7) % 1_000_003;
		if (sink < 0) log('unreachable');
		nodeMs = Math.min(nodeMs, now() - started);
	}
	return { serverMs: round(serverMs, 1), nodeMs: round(nodeMs, 1) };
}
