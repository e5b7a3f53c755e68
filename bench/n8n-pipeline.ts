/**
 * Measures the bundled workflows in a real n8n (printed as JSON, never asserted):
 *  1. receiver latency: POST /webhook/jobs (validate → Job Enqueue → 202) against a bare
 *     Webhook → Respond to Webhook workflow on the same n8n, p50/p95 and their ratio;
 *  2. pipeline throughput: jobs per minute from POST to done (receiver → dispatcher → worker →
 *     AI stand-in at zero latency → CRM stand-in → Job Complete).
 *
 *   DATABASE_URL=postgres://… npx tsx bench/n8n-pipeline.ts [--requests 300] [--jobs 300] [--max-jobs 10]
 */
import { startEnvironment, workflowNode, type WorkflowJson } from '../scripts/lib/environment';
import { startPostgres } from '../scripts/lib/postgres';

function arg(name: string, fallback: number): number {
	const index = process.argv.indexOf(`--${name}`);
	return index >= 0 ? Number(process.argv[index + 1]) : fallback;
}

function percentile(values: number[], p: number): number {
	const sorted = [...values].sort((a, b) => a - b);
	return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const bareWorkflow: WorkflowJson = {
	id: 'DjBenchBare00001',
	name: 'Bench: bare webhook',
	nodes: [
		{
			name: 'POST /bare',
			type: 'n8n-nodes-base.webhook',
			parameters: { httpMethod: 'POST', path: 'bare', responseMode: 'responseNode', options: {} },
			typeVersion: 2.1,
			position: [0, 0],
			webhookId: '6d7f8e9a-0b1c-4d2e-8f3a-4b5c6d7e8f90',
			id: '6d7f8e9a-0b1c-4d2e-8f3a-4b5c6d7e8f91',
		} as never,
		{
			name: 'Respond',
			type: 'n8n-nodes-base.respondToWebhook',
			parameters: {
				respondWith: 'json',
				responseBody: '={{ { ok: true } }}',
				options: { responseCode: 202 },
			},
			typeVersion: 1.5,
			position: [220, 0],
			id: '6d7f8e9a-0b1c-4d2e-8f3a-4b5c6d7e8f92',
		} as never,
	],
	connections: { 'POST /bare': { main: [[{ node: 'Respond', type: 'main', index: 0 }]] } },
	settings: { executionOrder: 'v1' },
	active: false,
};

async function main(): Promise<void> {
	const requests = arg('requests', 300);
	const jobs = arg('jobs', 300);
	const maxJobs = arg('max-jobs', 10);
	const log = (line: string) => process.stderr.write(`${line}\n`);
	const postgres = await startPostgres();
	const env = await startEnvironment({
		databaseUrl: postgres.url,
		schema: 'dj_bench_pipeline',
		pollSeconds: 1,
		extraWorkflows: [bareWorkflow],
		customize: (workflows) => {
			workflowNode(workflows, 'DjDispatcher0001', 'Job Lease').parameters.maxJobs = maxJobs;
		},
		log,
	});
	try {
		const body = (n: number) => ({
			document: { id: `bench-${n}`, text: `name: Bench ${n}, amount: ${n}` },
		});
		// Warm-up: both paths once (pools, migrations, compiled expressions).
		for (let i = 0; i < 10; i++) {
			await env.request('bare', { method: 'POST', body: body(i) });
			await env.request('jobs', { method: 'POST', body: body(i) });
		}
		await env.jobsDb.query(`DELETE FROM "${env.schema}".jobs`);
		log(`latency: ${requests} requests per path, alternating`);
		const bare: number[] = [];
		const receiver: number[] = [];
		for (let i = 0; i < requests; i++) {
			bare.push((await env.request('bare', { method: 'POST', body: body(i) })).ms);
			const answer = await env.request('jobs', { method: 'POST', body: body(i) });
			if (answer.status !== 202) throw new Error(`receiver answered ${answer.status}`);
			receiver.push(answer.ms);
		}
		// Let the latency jobs drain before the throughput run.
		await waitDrained(env, 600_000);
		await env.jobsDb.query(`DELETE FROM "${env.schema}".jobs`);

		log(
			`throughput: ${jobs} jobs, 8 concurrent posters, dispatcher Max Jobs ${maxJobs} per 1 s tick`,
		);
		const started = performance.now();
		let next = 0;
		await Promise.all(
			Array.from({ length: 8 }, async () => {
				while (next < jobs) {
					const n = next++;
					const answer = await env.request('jobs', { method: 'POST', body: body(100_000 + n) });
					if (answer.status !== 202) throw new Error(`receiver answered ${answer.status}`);
				}
			}),
		);
		const postedMs = performance.now() - started;
		await waitDrained(env, 1_800_000);
		const totalMs = performance.now() - started;
		const { rows } = await env.jobsDb.query(
			`SELECT status, count(*)::int AS n FROM "${env.schema}".jobs WHERE queue = 'documents' GROUP BY status`,
		);
		const report = {
			environment: {
				node: process.version,
				cores: (await import('node:os')).cpus().length,
				n8n: env.n8n.install.version,
			},
			receiver_latency_ms: {
				bare_webhook: { p50: percentile(bare, 50), p95: percentile(bare, 95) },
				receiver: { p50: percentile(receiver, 50), p95: percentile(receiver, 95) },
				ratio_p50: percentile(receiver, 50) / percentile(bare, 50),
				ratio_p95: percentile(receiver, 95) / percentile(bare, 95),
				requests,
			},
			pipeline: {
				jobs,
				dispatcher_max_jobs_per_tick: maxJobs,
				post_seconds: postedMs / 1000,
				total_seconds: totalMs / 1000,
				jobs_per_minute: (jobs / totalMs) * 60_000,
				final_status: Object.fromEntries(rows.map((row) => [row.status, row.n])),
			},
		};
		process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
	} finally {
		await env.stop();
		await postgres.stop();
	}
}

async function waitDrained(
	env: Awaited<ReturnType<typeof startEnvironment>>,
	timeoutMs: number,
): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const { rows } = await env.jobsDb.query(
			`SELECT count(*)::int AS n FROM "${env.schema}".jobs WHERE queue = 'documents' AND status IN ('queued', 'running')`,
		);
		if (rows[0].n === 0) return;
		if (Date.now() > deadline) throw new Error(`${rows[0].n} jobs still not finished`);
		await new Promise((resolve) => setTimeout(resolve, 500));
	}
}

main().catch((error: unknown) => {
	process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
	process.exit(1);
});
