/**
 * Where a receiver request's time goes in a real n8n: sequential POSTs, taking turns, to
 *
 *  - `bare`: Webhook → Respond to Webhook;
 *  - `credential-node`: Webhook → JWT (sign, a built-in node that reads a credential) → Respond;
 *  - `enqueue-only`: Webhook → Job Enqueue → Respond (the receiver without its validation);
 *  - `jobs`: the bundled receiver (Webhook → validation Code node → If → Job Enqueue → Respond);
 *
 * and, for each, the client's latency and, from the executions n8n saved, the execution's time,
 * the time from its start to its first node, and each node's `executionTime` (over all its
 * executions). Prints one JSON document; progress goes to stderr. Never asserted.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/n8n-receiver.ts [--requests 100] [--dispatcher off|on]
 *     [--triggers on|off] [--pause-ms 0]
 *
 * Deviations from the bundled set, for the measurement: every measured workflow saves its
 * successful executions (the node times are read from them), and with `--dispatcher off` (the
 * default) the Dispatcher is not published, so no job runs beside the requests; the jobs the
 * requests enqueue stay queued until the environment is dropped. `--triggers off` leaves the
 * other triggered workflows (Callback relay, Outbox relay, Monitoring) unpublished as well: a
 * control, with nothing of this package running between the requests. `--pause-ms` waits that
 * long after each answer before the next request.
 *
 * n8n starts some executions late (`late_starts`: more than LATE_START_MS from the execution's
 * start to its first node), whatever the workflow; `prompt_start_execution_ms` is the
 * execution's time over the others only, which compares the workflows without that lottery.
 */
import { loadavg } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import pg from 'pg';

import { POLLING_DISPATCHER_ID, startEnvironment } from '../scripts/lib/environment';
import { startPostgres } from '../scripts/lib/postgres';
import {
	BARE_WEBHOOK_ID,
	CREDENTIAL_NODE_ID,
	ENQUEUE_ONLY_ID,
	RECEIVER_ID,
	bareWebhookWorkflow,
	credentialNodeWorkflow,
	enqueueOnlyWorkflow,
} from './lib/receiver-workflows';
import { readFlags, round, runMain, sleep, summarize } from './lib/util';

const DISPATCHER_ID = 'DjDispatcher0001';
/** The bundled workflows, other than the Dispatcher, that run on a trigger of their own. */
const OTHER_TRIGGERED_IDS = ['DjCallbackRelay1', 'DjOutboxRelay001', 'DjMonitoring0001'];
const SAVE_SUCCESSES = { saveDataSuccessExecution: 'all' };

const PATHS = [
	{ path: 'bare', workflowId: BARE_WEBHOOK_ID },
	{ path: 'credential-node', workflowId: CREDENTIAL_NODE_ID },
	{ path: 'enqueue-only', workflowId: ENQUEUE_ONLY_ID },
	{ path: 'jobs', workflowId: RECEIVER_ID },
] as const;

/** An execution's start to its first node's start above this counts as a late start. */
const LATE_START_MS = 30;

const log = (line: string) => process.stderr.write(`[n8n-receiver] ${line}\n`);

interface TaskData {
	startTime: number;
	executionTime: number;
}

interface SavedExecution {
	workflowId: string;
	startedAt: Date;
	stoppedAt: Date;
	data: string;
}

function spread(values: number[]) {
	const { count, p50, p95, min, max } = summarize(values);
	return { count, p50, p95, min, max };
}

async function main(): Promise<void> {
	const { int, onOff } = readFlags(process.argv.slice(2), [
		'requests',
		'dispatcher',
		'triggers',
		'pause-ms',
	]);
	const requests = int('requests', 100, 1);
	const pauseMs = int('pause-ms', 0, 0);
	const dispatcher = onOff('dispatcher', false);
	const triggers = onOff('triggers', true);
	const postgres = await startPostgres();
	try {
		const env = await startEnvironment({
			databaseUrl: postgres.url,
			schema: `dj_bench_receiver_${process.pid}`,
			log,
			customize: (workflows) => {
				const receiver = workflows.find((workflow) => workflow.id === RECEIVER_ID);
				if (!receiver) throw new Error(`the bundled receiver (${RECEIVER_ID}) was not found`);
				receiver.settings = { ...(receiver.settings as object), ...SAVE_SUCCESSES };
			},
			extraWorkflows: [
				bareWebhookWorkflow(SAVE_SUCCESSES),
				credentialNodeWorkflow(SAVE_SUCCESSES),
				enqueueOnlyWorkflow(SAVE_SUCCESSES),
			],
			unpublished: [
				POLLING_DISPATCHER_ID,
				...(dispatcher ? [] : [DISPATCHER_ID]),
				...(triggers ? [] : OTHER_TRIGGERED_IDS),
			],
		});
		const n8nDb = new pg.Client({ connectionString: env.n8n.databaseUrl });
		try {
			await n8nDb.connect();
			const result = await measure(env, n8nDb, requests, pauseMs);
			const { rows } = await n8nDb.query<{ version: string }>(
				"SELECT current_setting('server_version') AS version",
			);
			process.stdout.write(
				`${JSON.stringify(
					{
						requestsPerPath: requests,
						pauseMs,
						dispatcher: dispatcher ? 'on' : 'off',
						triggers: triggers ? 'on' : 'off',
						lateStartAboveMs: LATE_START_MS,
						n8n: env.n8n.install.version,
						benchNode: process.version,
						postgres: rows[0].version,
						loadAverage: loadavg().map((value) => round(value, 2)),
						paths: result,
					},
					null,
					2,
				)}\n`,
			);
		} finally {
			await n8nDb.end().catch(() => undefined);
			await env.stop();
		}
	} finally {
		await postgres.stop();
	}
}

async function measure(
	env: Awaited<ReturnType<typeof startEnvironment>>,
	n8nDb: pg.Client,
	requests: number,
	pauseMs: number,
): Promise<Record<string, unknown>> {
	const body = (n: number) => ({ document: { id: `receiver-${n}`, text: 'hello' } });
	for (let i = 0; i < 10; i++)
		for (const { path } of PATHS) await env.request(path, { method: 'POST', body: body(i) });
	const { rows: before } = await n8nDb.query<{ id: string }>(
		'SELECT coalesce(max(id::bigint), 0)::text AS id FROM execution_entity',
	);
	log(`${requests} requests per path, taking turns${pauseMs ? `, ${pauseMs} ms apart` : ''}`);
	const client = new Map<string, number[]>(PATHS.map(({ path }) => [path, []]));
	for (let i = 0; i < requests; i++) {
		for (let turn = 0; turn < PATHS.length; turn++) {
			const { path } = PATHS[(i + turn) % PATHS.length];
			const answer = await env.request(path, { method: 'POST', body: body(i) });
			if (answer.status !== 202) throw new Error(`${path} answered ${answer.status}`);
			client.get(path)!.push(answer.ms);
			if (pauseMs) await sleep(pauseMs);
		}
	}
	// n8n saves an execution after it answered: wait until every one is there.
	const workflowIds = PATHS.map(({ workflowId }) => workflowId);
	let rows: SavedExecution[] = [];
	for (let waited = 0; ; waited += 500) {
		rows = (
			await n8nDb.query<SavedExecution>(
				`SELECT e."workflowId", e."startedAt", e."stoppedAt", d.data
				FROM execution_entity e JOIN execution_data d ON d."executionId" = e.id
				WHERE e.id::bigint > $1::bigint AND e."workflowId" = ANY($2::text[])
					AND e."stoppedAt" IS NOT NULL`,
				[before[0].id, workflowIds],
			)
		).rows;
		if (rows.length >= requests * PATHS.length) break;
		if (waited >= 30_000)
			throw new Error(
				`n8n saved ${rows.length} of the ${requests * PATHS.length} executions within 30 s`,
			);
		await sleep(500);
	}
	const { parse } = createRequire(
		join(env.n8n.install.installDir, 'node_modules', 'n8n', 'package.json'),
	)('flatted') as { parse: (text: string) => unknown };
	const result: Record<string, unknown> = {};
	for (const { path, workflowId } of PATHS) {
		const executions = rows.filter((row) => row.workflowId === workflowId);
		const total: number[] = [];
		const toFirstNode: number[] = [];
		const nodes = new Map<string, number[]>();
		for (const execution of executions) {
			const data = parse(execution.data) as {
				resultData: { runData: Record<string, TaskData[]> };
			};
			const started = execution.startedAt.getTime();
			total.push(execution.stoppedAt.getTime() - started);
			const tasks = Object.entries(data.resultData.runData);
			toFirstNode.push(Math.min(...tasks.map(([, runs]) => runs[0].startTime)) - started);
			for (const [name, runs] of tasks) {
				if (!nodes.has(name)) nodes.set(name, []);
				nodes.get(name)!.push(runs[0].executionTime);
			}
		}
		const late = toFirstNode.map((ms) => ms > LATE_START_MS);
		result[path] = {
			client_ms: spread(client.get(path)!),
			executions: executions.length,
			execution_ms: spread(total),
			start_to_first_node_ms: spread(toFirstNode),
			late_starts: late.filter(Boolean).length,
			late_start_to_first_node_ms: spread(toFirstNode.filter((_, index) => late[index])),
			prompt_start_to_first_node_ms: spread(toFirstNode.filter((_, index) => !late[index])),
			prompt_start_execution_ms: spread(total.filter((_, index) => !late[index])),
			node_ms: Object.fromEntries([...nodes].map(([name, values]) => [name, spread(values)])),
		};
	}
	return result;
}

runMain(main);
