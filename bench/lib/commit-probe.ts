import type pg from 'pg';

import { median, now, round } from './util';

/** Median ms of a round trip and of a one-row commit, on one connection kept busy as a library's is. */
export interface CommitCost {
	roundTripMs: number;
	commitMs: number;
}

const PROBE_CALLS = 300;

/** The probe's table in `schema`, made once before the runs it times; dropCommitProbe removes it. */
export async function createCommitProbe(admin: pg.Pool, schema: string): Promise<void> {
	await admin.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
	await admin.query(
		`CREATE TABLE IF NOT EXISTS ${schema}.commits (id bigint GENERATED ALWAYS AS IDENTITY)`,
	);
}

export async function dropCommitProbe(admin: pg.Pool, schema: string): Promise<void> {
	await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
}

/**
 * The cost of a commit on this machine right now: the median of PROBE_CALLS prepared `SELECT 1`
 * and of as many one-row INSERTs into `schema`'s probe table, each its own transaction waiting
 * for its WAL flush, on one connection used back to back (as a library's connection is in a
 * sequential enqueue). A single enqueue of any library pays one round trip and one such flush;
 * their time changes from one minute to the next on a shared machine, and with it every
 * library's jobs/s.
 */
export async function commitProbe(admin: pg.Pool, schema: string): Promise<CommitCost> {
	const client = await admin.connect();
	try {
		await client.query(`TRUNCATE ${schema}.commits`);
		const time = async (query: pg.QueryConfig): Promise<number> => {
			for (let i = 0; i < 20; i++) await client.query(query);
			const samples = new Array<number>(PROBE_CALLS);
			for (let i = 0; i < PROBE_CALLS; i++) {
				const started = now();
				await client.query(query);
				samples[i] = now() - started;
			}
			return round(median(samples), 4);
		};
		return {
			roundTripMs: await time({ name: `commit_probe_round_trip_${schema}`, text: 'SELECT 1' }),
			commitMs: await time({
				name: `commit_probe_insert_${schema}`,
				text: `INSERT INTO ${schema}.commits DEFAULT VALUES`,
			}),
		};
	} finally {
		client.release();
	}
}
