/**
 * `npm run demo`: the whole product on this machine. PostgreSQL (DATABASE_URL, or an embedded
 * one), the stand-in AI endpoint and CRM, and a real n8n with this package and every bundled
 * workflow. Posts a sample document, prints the job's life, then keeps everything running
 * until Ctrl-C and stops what it started.
 */
import { startEnvironment, type Environment } from './lib/environment';
import { startPostgres, type RunningPostgres } from './lib/postgres';

const SCHEMA = 'durable_jobs_demo';

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
	let last = '';
	for (;;) {
		const answer = await env.request(statusUrl.replace(/^\/webhook\//, ''));
		const body = answer.body as {
			status: string;
			attempts: number;
			result?: unknown;
			error?: unknown;
		};
		if (body.status !== last) {
			last = body.status;
			line(`  ${since()}  ${body.status}${body.attempts ? ` (attempt ${body.attempts})` : ''}`);
		}
		if (body.status === 'done' || body.status === 'failed') {
			line(`  result: ${JSON.stringify(body.result ?? body.error)}`);
			break;
		}
		await new Promise((resolve) => setTimeout(resolve, 200));
	}
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

async function main(): Promise<void> {
	let postgres: RunningPostgres | undefined;
	let env: Environment | undefined;
	let stopping = false;
	const stop = async (code: number) => {
		if (stopping) return;
		stopping = true;
		line('\nStopping…');
		await env?.stop().catch(() => undefined);
		await postgres?.stop().catch(() => undefined);
		process.exit(code);
	};
	process.on('SIGINT', () => void stop(0));
	process.on('SIGTERM', () => void stop(0));
	try {
		line('Starting PostgreSQL…');
		postgres = await startPostgres();
		line(`  ${postgres.embedded ? 'embedded PostgreSQL (from npm)' : 'DATABASE_URL'}`);
		line('Starting the stand-in services and n8n (the first run downloads n8n, about 5 minutes)…');
		env = await startEnvironment({
			databaseUrl: postgres.url,
			schema: SCHEMA,
			pollSeconds: 1,
			log: (text) => {
				if (process.env.DEBUG_DEMO) line(`  · ${text}`);
			},
		});
		line(`  n8n ${env.n8n.baseUrl}  (log: ${env.n8n.logFile})`);
		line();
		await followJob(env);
		line();
		line('Running. Try it yourself:');
		line(
			`  curl -i -X POST ${env.n8n.webhookUrl('jobs')} -H 'content-type: application/json' -H 'Idempotency-Key: my-key-1' \\`,
		);
		line(`       -d '{"document": {"id": "doc-1", "text": "name: Grace Hopper, amount: 99"}}'`);
		line(`  curl -i '${env.n8n.baseUrl}<status_url from the answer>'`);
		line(
			`  curl -i -X POST ${env.n8n.webhookUrl('events')} -H 'content-type: application/json' \\`,
		);
		line(
			`       -d '{"source": "shop", "external_id": "order-1", "status": "paid", "occurred_at": "2026-12-01T10:00:00Z"}'`,
		);
		line(`  n8n editor: ${env.n8n.baseUrl}  (first visit asks you to create the owner account)`);
		line(`  stand-in CRM records: ${env.standins.crm.url}/records`);
		line('Press Ctrl-C to stop everything.');
		await new Promise(() => undefined);
	} catch (error) {
		process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
		await stop(1);
	}
}

void main();
