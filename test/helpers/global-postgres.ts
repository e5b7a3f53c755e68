import type { TestProject } from 'vitest/node';

import { startPostgres } from '../../scripts/lib/postgres';

declare module 'vitest' {
	export interface ProvidedContext {
		databaseUrl: string;
	}
}

/** One PostgreSQL for the run: DATABASE_URL when set, else an embedded server from npm. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
	const postgres = await startPostgres((line) => {
		if (process.env.DEBUG_POSTGRES) console.log(line);
	});
	if (postgres.embedded) console.log('[tests] DATABASE_URL not set: using an embedded PostgreSQL');
	project.provide('databaseUrl', postgres.url);
	return async () => {
		await postgres.stop();
	};
}
