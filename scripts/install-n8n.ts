/**
 * `npm run n8n:install`: puts Node 24 and the n8n the end-to-end tests and the demo run into the
 * cache (scripts/lib/n8n/install.ts), and does nothing more when they are there. `npm test`
 * runs it first (with `--check-test-database`: a `DATABASE_URL` the tests cannot use is refused
 * before anything is downloaded), so the unit tests that check the nodes against n8n's own code (its converter
 * of nodes into AI agent tools) run too; `npm run test:unit` alone skips those without it.
 *
 * Ctrl-C or SIGTERM stops npm and releases the install lock before the process exits (the
 * cleanup registry, scripts/lib/cleanup.ts): a lock left behind would keep the next run
 * waiting. The next run wipes the unfinished install and starts it again.
 */
import { exitCleanly, failAndExit } from './lib/cleanup';
import { checkDatabaseUrl } from './lib/database-url';
import { downloadNotice, ensureN8n } from './lib/n8n';
import { TEST_SUITE_NEEDS } from './lib/postgres';

const print = (text: string) => process.stdout.write(`${text}\n`);

async function main(): Promise<void> {
	exitCleanly({ log: (text) => print(`\n${text}`), onExit: () => print('Stopped.') });
	// `npm test` passes it: a DATABASE_URL the tests cannot use is refused before the download.
	const url = process.env.DATABASE_URL;
	if (process.argv.includes('--check-test-database') && url)
		await checkDatabaseUrl(url, { needs: TEST_SUITE_NEEDS });
	const notice = downloadNotice();
	if (notice) print(notice);
	const install = await ensureN8n({ log: print });
	print(`n8n ${install.version} is ready in ${install.installDir}`);
}

main().catch((error: unknown) => failAndExit(error, { stack: false }));
