import { TEST_SUITE_NEEDS, startPostgres, type RunningPostgres } from '../../scripts/lib/postgres';

/** Kept on the global object: jest runs the teardown in the process that ran the set-up. */
const key = Symbol.for('n8n-nodes-durable-jobs.test-postgres');
type Holder = { [key]?: RunningPostgres };

/**
 * One PostgreSQL for the run: DATABASE_URL when set, else an embedded server from npm. Its URL
 * reaches the test files in DATABASE_URL (jest starts its workers after this, with this
 * process's environment). A second project's set-up in the same run finds it there.
 */
export default async function setup(): Promise<void> {
	const postgres = await startPostgres(
		(line) => {
			if (process.env.DEBUG_POSTGRES) console.log(line);
		},
		[],
		{ needs: TEST_SUITE_NEEDS },
	);
	if (!postgres.embedded) return;
	console.log('[tests] DATABASE_URL not set: using an embedded PostgreSQL');
	(globalThis as Holder)[key] = postgres;
	process.env.DATABASE_URL = postgres.url;
}

export async function teardown(): Promise<void> {
	const holder = globalThis as Holder;
	const postgres = holder[key];
	if (!postgres) return;
	delete holder[key];
	delete process.env.DATABASE_URL;
	await postgres.stop();
}
