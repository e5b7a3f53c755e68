/**
 * `npm run demo`: the whole product on this machine. PostgreSQL (DATABASE_URL, or an embedded
 * one), the stand-in AI endpoint and CRM, and a real n8n with this package and every bundled
 * workflow. Posts a sample document, prints the job's life, then keeps everything running
 * until Ctrl-C (or for `--stop-after SECONDS`) and stops what it started. Every start-up step
 * is printed with the time since the start; a first run says up front what it downloads.
 *
 * Ctrl-C, SIGTERM or an error: n8n, PostgreSQL and every temp folder are removed before the
 * process exits (scripts/lib/cleanup.ts). A DATABASE_URL that does not work, or whose role may
 * not create n8n's database or the job schema, ends it at once with one line saying why (exit
 * code 1). Each run keeps its jobs in a schema of its own (scripts/lib/demo.ts), dropped when
 * it stops, so two demos can share one DATABASE_URL.
 */
import { exitCleanly, failAndExit, runCleanups } from './lib/cleanup';
import { maskDatabaseUrl } from './lib/database-url';
import { demoSchemaName, followJobStatus } from './lib/demo';
import {
	DASHBOARD_LOGIN,
	ENVIRONMENT_NEEDS,
	OPERATOR_KEY,
	startEnvironment,
	type Environment,
} from './lib/environment';
import { downloadNotice } from './lib/n8n';
import { startPostgres } from './lib/postgres';

function line(text = ''): void {
	process.stdout.write(`${text}\n`);
}

async function followJob(env: Environment): Promise<void> {
	const document = {
		id: `demo-${Date.now()}`,
		text: 'Invoice from name: Ada Lovelace, email ada@example.com, amount: 1234.50',
	};
	env.standins.ai.latencyMs = 3_000;
	line('POST /webhook/jobs  (the stand-in AI takes 3 s per document)');
	const started = performance.now();
	const accepted = await env.request('jobs', {
		method: 'POST',
		body: { document },
		headers: { 'Idempotency-Key': document.id },
	});
	const since = () => `${((performance.now() - started) / 1000).toFixed(2)} s`;
	line(`  ${since()}  HTTP ${accepted.status}  ${JSON.stringify(accepted.body)}`);
	if (accepted.status !== 202) throw new Error('the receiver did not accept the sample job');
	const statusUrl = (accepted.body as { status_url: string }).status_url;
	await followJobStatus({
		poll: () => env.request(statusUrl.replace(/^\/webhook\//, '')),
		line,
		since,
		hint:
			`Check in n8n (${env.n8n.baseUrl}) that the workflow "Durable Jobs: Dispatcher" is published and ` +
			`what its executions say, and n8n's log (${env.n8n.logFile}). The demo keeps running.`,
	});
	const again = await env.request('jobs', {
		method: 'POST',
		body: { document },
		headers: { 'Idempotency-Key': document.id },
	});
	line(
		`  retry with the same Idempotency-Key → HTTP ${again.status}, same job: ${(again.body as { job_id: string }).job_id === (accepted.body as { job_id: string }).job_id}`,
	);
	line(
		`  CRM records created for this job: ${env.standins.crm.recordsForKey((accepted.body as { job_id: string }).job_id).length}`,
	);
	env.standins.ai.latencyMs = 0;
}

function usage(message: string): never {
	process.stderr.write(`${message}\nusage: npm run demo [-- --stop-after SECONDS]\n`);
	process.exit(2);
}

function parseArgs(argv: string[]): { stopAfterSeconds: number | undefined } {
	let stopAfterSeconds: number | undefined;
	for (let i = 0; i < argv.length; i++) {
		const [flag, inline] = argv[i].split('=', 2);
		if (flag !== '--stop-after') usage(`unknown option ${argv[i]}`);
		const value = Number(inline ?? argv[++i]);
		if (!Number.isFinite(value) || value < 0) usage('--stop-after needs a number of seconds ≥ 0');
		stopAfterSeconds = value;
	}
	return { stopAfterSeconds };
}

async function main(): Promise<void> {
	const { stopAfterSeconds } = parseArgs(process.argv.slice(2));
	const began = performance.now();
	const step = (text: string) =>
		line(`[${((performance.now() - began) / 1000).toFixed(1).padStart(5)} s] ${text}`);
	exitCleanly({ log: (text) => line(`\n${text}`), onExit: () => line('Stopped.') });

	const notice = downloadNotice();
	line(notice ?? 'n8n and Node 24 are cached: start-up takes about a minute.');
	step(
		process.env.DATABASE_URL
			? 'PostgreSQL: checking DATABASE_URL'
			: 'PostgreSQL: DATABASE_URL not set, starting an embedded one (from npm)',
	);
	const postgres = await startPostgres(step, [], { needs: ENVIRONMENT_NEEDS });
	const env: Environment = await startEnvironment({
		databaseUrl: postgres.url,
		schema: demoSchemaName(),
		pollSeconds: 1,
		log: step,
	});
	step(`ready: n8n ${env.n8n.baseUrl}  (log: ${env.n8n.logFile})`);
	line();
	await followJob(env);
	line();
	line('Running. Try it yourself:');
	line(
		`  curl -i -X POST ${env.n8n.webhookUrl('jobs')} -H 'content-type: application/json' -H 'Idempotency-Key: my-key-1' \\`,
	);
	line(`       -d '{"document": {"id": "doc-1", "text": "name: Grace Hopper, amount: 99"}}'`);
	line(`  curl -i '${env.n8n.baseUrl}<status_url from the answer>'`);
	line(`  curl -i -X POST ${env.n8n.webhookUrl('events')} -H 'content-type: application/json' \\`);
	line(
		`       -d '{"source": "shop", "external_id": "order-1", "status": "paid", "occurred_at": "2026-12-01T10:00:00Z"}'`,
	);
	line(`  n8n editor: ${env.n8n.baseUrl}  (first visit asks you to create the owner account)`);
	line(
		`  jobs dashboard: ${env.n8n.webhookUrl('jobs/dashboard')}  (login ${DASHBOARD_LOGIN.user} / ${DASHBOARD_LOGIN.password}, credential "Durable Jobs Dashboard login")`,
	);
	line('  reconciliation report (key of the credential "Durable Jobs operator key"):');
	line(
		`       curl -i '${env.n8n.webhookUrl('jobs/unknown-outcomes?queue=documents')}' -H '${OPERATOR_KEY.header}: ${OPERATOR_KEY.value}'`,
	);
	line(`  stand-in CRM records: ${env.standins.crm.url}/records`);
	line(
		`  job tables: schema ${env.schema} on ${postgres.embedded ? postgres.url : maskDatabaseUrl(postgres.url)} (this run's own, dropped when it stops)`,
	);
	line("  (the login and the key are this demo's own; on your n8n, create your own: README)");
	if (stopAfterSeconds === undefined) {
		line('Press Ctrl-C to stop everything.');
		await new Promise(() => undefined);
	}
	line(`Stopping in ${stopAfterSeconds} s (--stop-after).`);
	await new Promise((resolve) => setTimeout(resolve, (stopAfterSeconds ?? 0) * 1000));
	line('Stopping…');
	await runCleanups({ log: line });
	line('Stopped.');
	process.exit(0);
}

main().catch(failAndExit);
