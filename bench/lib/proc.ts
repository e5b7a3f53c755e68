import { readdirSync, readFileSync } from 'node:fs';

/** CPU time and minor page faults of a set of processes, read from /proc. */
export interface ProcessUsage {
	/** User + system CPU time, in ms (clock ticks of 10 ms: USER_HZ = 100). */
	cpuMs: number;
	/** Minor page faults (a page mapped on first touch, no disk read). */
	minorFaults: number;
}

/**
 * The usage of the processes named `postgres` on this machine (server and backends together),
 * or null where /proc cannot be read. It means something only when the server runs here and
 * nothing else uses it.
 */
export function postgresUsage(): ProcessUsage | null {
	let entries: string[];
	try {
		entries = readdirSync('/proc');
	} catch {
		return null;
	}
	const usage: ProcessUsage = { cpuMs: 0, minorFaults: 0 };
	for (const pid of entries) {
		if (!/^\d+$/.test(pid)) continue;
		let stat: string;
		try {
			stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
		} catch {
			continue; // the process ended between the listing and the read
		}
		const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
		if (!name.startsWith('postgres')) continue;
		// Fields after the name: state is the first, minflt the 8th, utime the 12th, stime the 13th.
		const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
		usage.minorFaults += Number(fields[7]);
		usage.cpuMs += (Number(fields[11]) + Number(fields[12])) * 10;
	}
	return usage;
}
