/**
 * Measures the bundled workflows in a real n8n (printed as JSON, never asserted), and the same
 * figures for the workflows as they shipped before Job Trigger (Schedule Trigger → Job Lease →
 * Execute Workflow, from git `--old-ref`), side by side where both apply:
 *
 *  1. receiver latency: POST /webhook/jobs (validate → Job Enqueue → 202) against a bare
 *     Webhook → Respond to Webhook workflow on the same n8n, p50/p95 and their ratio (where the
 *     receiver's time goes inside n8n: bench/n8n-receiver.ts);
 *  2. idle executions: with every workflow published and nothing queued, the executions n8n
 *     creates in `--idle-seconds` (rows of its execution_entity): those it keeps (its execution
 *     list) and those it discards when they end (workflows set not to save successful runs);
 *  3. start latency on an idle queue: one job at a time, the time from the receiver's 202 to the
 *     job becoming `running` (its started_at), and from its insert (created_at) to running;
 *  4. pipeline throughput: jobs per minute from POST to done (receiver → dispatcher → worker →
 *     AI stand-in at zero latency → CRM stand-in → Job Complete), in regular mode and in queue
 *     mode with 1 and 2 workers.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/n8n-pipeline.ts [--requests 200] [--jobs 200]
 *     [--latency-jobs 30] [--idle-seconds 60] [--old-poll-seconds 5]
 *     [--scenarios regular-new,regular-old,queue1-new,queue1-old,queue2-new,queue2-old]
 *
 * Each scenario starts its own n8n (with its own database); the machine's load average is
 * recorded with every figure, because the machine these run on is shared.
 */
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';

import pg from 'pg';

import {
	REPO_DIR,
	startEnvironment,
	type Environment,
	type WorkflowJson,
} from '../scripts/lib/environment';
import { startPostgres } from '../scripts/lib/postgres';
import { bareWebhookWorkflow } from './lib/receiver-workflows';
import { percentile as nearestRank, round, runMain, sleep } from './lib/util';

/** The last commit whose bundled workflows poll with Schedule Triggers (before Job Trigger). */
const PRE_TRIGGER_REF = '1703778';
const SCENARIOS = [
	'regular-new',
	'regular-old',
	'queue1-new',
	'queue1-old',
	'queue2-new',
	'queue2-old',
] as const;
type Scenario = (typeof SCENARIOS)[number];

function arg(name: string, fallback: string): string {
	const index = process.argv.indexOf(`--${name}`);
	return index >= 0 ? process.argv[index + 1] : fallback;
}

function percentile(values: number[], p: number): number {
	return nearestRank(
		[...values].sort((a, b) => a - b),
		p,
	);
}

const load = () => loadavg().map((value) => round(value, 2));
const log = (line: string) => process.stderr.write(`[n8n-pipeline] ${line}\n`);

/** The bundled workflows as they were at `ref` (read with git, not checked out). */
function workflowsAt(ref: string): WorkflowJson[] {
	const files = execFileSync('git', ['ls-tree', '--name-only', ref, 'workflows/'], {
		cwd: REPO_DIR,
		encoding: 'utf8',
	})
		.split('\n')
		.filter((file) => file.endsWith('.json'))
		.sort();
	return files.map(
		(file) =>
			JSON.parse(
				execFileSync('git', ['show', `${ref}:${file}`], { cwd: REPO_DIR, encoding: 'utf8' }),
			) as WorkflowJson,
	);
}

const body = (n: number) => ({
	document: { id: `bench-${n}`, text: `name: Bench ${n}, amount: ${n}` },
});

async function waitDrained(env: Environment, timeoutMs: number): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const { rows } = await env.jobsDb.query(
			`SELECT count(*)::int AS n FROM "${env.schema}".jobs WHERE status IN ('queued', 'running')`,
		);
		if (rows[0].n === 0) return;
		if (Date.now() > deadline) throw new Error(`${rows[0].n} jobs still not finished`);
		await sleep(250);
	}
}

async function receiverLatency(env: Environment, requests: number) {
	for (let i = 0; i < 10; i++) {
		await env.request('bare', { method: 'POST', body: body(i) });
		await env.request('jobs', { method: 'POST', body: body(i) });
	}
	log(`receiver latency: ${requests} requests per path, alternating`);
	const bare: number[] = [];
	const receiver: number[] = [];
	for (let i = 0; i < requests; i++) {
		bare.push((await env.request('bare', { method: 'POST', body: body(i) })).ms);
		const answer = await env.request('jobs', { method: 'POST', body: body(i) });
		if (answer.status !== 202) throw new Error(`receiver answered ${answer.status}`);
		receiver.push(answer.ms);
	}
	await waitDrained(env, 600_000);
	return {
		bare_webhook: { p50: round(percentile(bare, 50)), p95: round(percentile(bare, 95)) },
		receiver: { p50: round(percentile(receiver, 50)), p95: round(percentile(receiver, 95)) },
		ratio_p50: round(percentile(receiver, 50) / percentile(bare, 50)),
		ratio_p95: round(percentile(receiver, 95) / percentile(bare, 95)),
		requests,
		load_average: load(),
	};
}

/** Executions n8n creates while nothing is queued, per workflow: kept and discarded. */
async function idleExecutions(env: Environment, seconds: number) {
	await waitDrained(env, 600_000);
	// Let the last executions end and be written.
	await sleep(3_000);
	const n8nDb = new pg.Client({ connectionString: env.n8n.databaseUrl });
	await n8nDb.connect();
	try {
		const [{ since }] = (await n8nDb.query<{ since: Date }>('SELECT now() AS since')).rows;
		log(`idle: ${seconds} s with every workflow published and no job queued`);
		await sleep(seconds * 1000);
		const { rows } = await n8nDb.query<{ workflowId: string; kept: number; discarded: number }>(
			`SELECT "workflowId", count(*) FILTER (WHERE "deletedAt" IS NULL)::int AS kept,
				count(*) FILTER (WHERE "deletedAt" IS NOT NULL)::int AS discarded
			FROM execution_entity WHERE "createdAt" >= $1 GROUP BY 1 ORDER BY 1`,
			[since],
		);
		return {
			seconds,
			kept: rows.reduce((sum, row) => sum + row.kept, 0),
			discarded: rows.reduce((sum, row) => sum + row.discarded, 0),
			by_workflow: Object.fromEntries(
				rows.map((row) => [row.workflowId, { kept: row.kept, discarded: row.discarded }]),
			),
			load_average: load(),
		};
	} finally {
		await n8nDb.end();
	}
}

/**
 * One job at a time on an idle queue: 202 → running, and insert → running. Each job is posted
 * after a pause drawn uniformly from one polling interval, so that a polling dispatcher is met
 * at a random point of its interval (a fixed short pause after the previous job would always
 * meet it at about the same point, right after the tick that took that job).
 */
async function startLatency(env: Environment, jobs: number, pollSeconds: number) {
	await waitDrained(env, 600_000);
	log(`start latency: ${jobs} jobs, one at a time on an idle queue`);
	const fromAnswer: number[] = [];
	const fromInsert: number[] = [];
	for (let n = 0; n < jobs; n++) {
		await sleep(Math.random() * pollSeconds * 1000);
		const answer = await env.request('jobs', { method: 'POST', body: body(200_000 + n) });
		const answeredAt = Date.now();
		if (answer.status !== 202) throw new Error(`receiver answered ${answer.status}`);
		const jobId = (answer.body as { job_id: string }).job_id;
		for (;;) {
			const { rows } = await env.jobsDb.query<{
				created_at: Date;
				started_at: Date | null;
				status: string;
			}>(`SELECT created_at, started_at, status FROM "${env.schema}".jobs WHERE id = $1`, [jobId]);
			if (rows[0]?.started_at && rows[0].status === 'done') {
				fromAnswer.push(rows[0].started_at.getTime() - answeredAt);
				fromInsert.push(rows[0].started_at.getTime() - rows[0].created_at.getTime());
				break;
			}
			await sleep(20);
		}
	}
	const summary = (values: number[]) => ({
		p50: round(percentile(values, 50)),
		p95: round(percentile(values, 95)),
		max: round(Math.max(...values)),
		min: round(Math.min(...values)),
	});
	return {
		jobs,
		answer_to_running_ms: summary(fromAnswer),
		insert_to_running_ms: summary(fromInsert),
		load_average: load(),
	};
}

async function throughput(env: Environment, jobs: number) {
	await waitDrained(env, 600_000);
	log(`throughput: ${jobs} jobs, 8 concurrent posters`);
	const loadBefore = load();
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
		`SELECT status, count(*)::int AS n FROM "${env.schema}".jobs WHERE queue = 'documents' AND payload->'document'->>'id' LIKE 'bench-1_____' GROUP BY status`,
	);
	return {
		jobs,
		post_seconds: round(postedMs / 1000),
		total_seconds: round(totalMs / 1000),
		jobs_per_minute: round((jobs / totalMs) * 60_000),
		final_status: Object.fromEntries(rows.map((row) => [row.status, row.n])),
		load_average_before: loadBefore,
		load_average_after: load(),
	};
}

async function runScenario(
	scenario: Scenario,
	databaseUrl: string,
	options: {
		requests: number;
		jobs: number;
		latencyJobs: number;
		idleSeconds: number;
		oldPollSeconds: number;
		oldWorkflows: WorkflowJson[];
	},
) {
	const old = scenario.endsWith('-old');
	const workers = scenario.startsWith('queue') ? Number(scenario.charAt(5)) : 0;
	log(
		`scenario ${scenario}: ${old ? `workflows at ${PRE_TRIGGER_REF}` : 'bundled workflows'}, ${workers ? `queue mode, ${workers} worker(s)` : 'regular mode'}`,
	);
	const env = await startEnvironment({
		databaseUrl,
		schema: `dj_bench_${scenario.replace('-', '_')}`,
		// The old Dispatcher and relays as shipped poll every 5 s; the new set has no schedule
		// but Monitoring's (every minute, not changed by this setting).
		pollSeconds: options.oldPollSeconds,
		workflows: old ? structuredClone(options.oldWorkflows) : undefined,
		extraWorkflows: scenario === 'regular-new' ? [bareWebhookWorkflow()] : [],
		queue: workers ? { workers } : undefined,
		log,
	});
	try {
		const result: Record<string, unknown> = {
			mode: workers ? `queue, ${workers} worker(s)` : 'regular',
			workflows: old
				? `before Job Trigger (${PRE_TRIGGER_REF}), schedules every ${options.oldPollSeconds} s`
				: 'bundled (Job Trigger)',
		};
		if (scenario === 'regular-new')
			result.receiver_latency_ms = await receiverLatency(env, options.requests);
		if (!workers) {
			result.idle_executions = await idleExecutions(env, options.idleSeconds);
			result.start_latency = await startLatency(env, options.latencyJobs, options.oldPollSeconds);
		}
		result.pipeline = await throughput(env, options.jobs);
		return result;
	} finally {
		await env.stop();
	}
}

async function main(): Promise<void> {
	const scenarios = arg('scenarios', SCENARIOS.join(',')).split(',') as Scenario[];
	for (const scenario of scenarios)
		if (!SCENARIOS.includes(scenario)) throw new Error(`unknown scenario ${scenario}`);
	const oldRef = arg('old-ref', PRE_TRIGGER_REF);
	const options = {
		requests: Number(arg('requests', '200')),
		jobs: Number(arg('jobs', '200')),
		latencyJobs: Number(arg('latency-jobs', '30')),
		idleSeconds: Number(arg('idle-seconds', '60')),
		oldPollSeconds: Number(arg('old-poll-seconds', '5')),
		oldWorkflows: workflowsAt(oldRef),
	};
	const postgres = await startPostgres();
	const started = new Date();
	const results: Record<string, unknown> = {};
	try {
		for (const scenario of scenarios) {
			results[scenario] = await runScenario(scenario, postgres.url, options);
			log(`${scenario}: ${JSON.stringify(results[scenario])}`);
		}
	} finally {
		await postgres.stop();
	}
	const report = {
		environment: {
			node: process.version,
			cores: cpus().length,
			date: started.toISOString(),
			old_ref: oldRef,
			settings: { ...options, oldWorkflows: undefined },
			note: 'shared machine: see load_average (1, 5, 15 min) with every figure',
		},
		...results,
	};
	process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

runMain(main);
