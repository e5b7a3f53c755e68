/**
 * `npm run n8n:install`: puts Node 24 and the n8n the end-to-end tests and the demo run into the
 * cache (scripts/lib/n8n/install.ts), and does nothing more when they are there. `npm test`
 * runs it first, so the unit tests that check the nodes against n8n's own code (its converter
 * of nodes into AI agent tools) run too; `npm run test:unit` alone skips those without it.
 */
import { downloadNotice, ensureN8n } from './lib/n8n';

async function main(): Promise<void> {
	const notice = downloadNotice();
	if (notice) process.stdout.write(`${notice}\n`);
	const install = await ensureN8n({ log: (text) => process.stdout.write(`${text}\n`) });
	process.stdout.write(`n8n ${install.version} is ready in ${install.installDir}\n`);
}

main().catch((error: unknown) => {
	process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
	process.exit(1);
});
