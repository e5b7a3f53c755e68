/**
 * The whole product running locally, shared by the end-to-end tests and `npm run demo`:
 * PostgreSQL, the stand-in AI endpoint / CRM / callback receiver, and a real n8n with this
 * package installed from its `npm pack` tarball and every bundled workflow imported and
 * published (the polling Dispatcher only imported, see `unpublished`). Only configuration is
 * changed in the workflows: the Config nodes' URLs and keys, and the polling interval of the
 * schedule triggers.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import pg from 'pg';

import { registerCleanup } from './cleanup';
import { parseDatabaseUrl, type DatabaseNeeds } from './database-url';
import { ensureN8n, packPackage, startN8n, type N8nInstance, type WebhookProbe } from './n8n';
import { startStandins, type Standins } from './standins';
import { startTcpProxy, type TcpProxy } from './tcp-proxy';

type StandinsOptions = Parameters<typeof startStandins>[0];

export const REPO_DIR = resolve(__dirname, '..', '..');
export const WORKFLOWS_DIR = join(REPO_DIR, 'workflows');
export const CREDENTIAL_ID = 'DurableJobsCred1';
/** The Callback relay's signing key: the Hmac Secret of its credential (`DjCallbackSigning`). */
export const SIGNING_KEY = 'durable-jobs-local-signing-key-0123456789';
export const SIGNING_CREDENTIAL = {
	id: 'DjCallbackSigning',
	name: 'Durable Jobs callback signing key',
	type: 'crypto',
} as const;
/** The jobs dashboard's login (Basic Auth) and session-token secret (JWT Auth), see 10-dashboard.json. */
export const DASHBOARD_LOGIN = {
	user: 'operator',
	password: 'durable-jobs-local-dashboard-password',
};
export const DASHBOARD_SESSION_SECRET = 'durable-jobs-local-dashboard-session-secret-0123456789';
/**
 * The operator endpoints' key (Header Auth, see 09-reconciliation.json): the request header
 * that `GET /webhook/jobs/unknown-outcomes` requires.
 */
export const OPERATOR_KEY = {
	header: 'Authorization',
	value: 'Bearer durable-jobs-local-operator-key-0123456789',
};

/**
 * The credentials the bundled workflows name, with the ids they name them by: the job
 * database (`jobs`, the Durable Jobs Postgres credential's data), the operator logins and the
 * callback signing key.
 */
export function bundledCredentials(jobs: Record<string, unknown>): Array<{
	id: string;
	name: string;
	type: string;
	data: Record<string, unknown>;
}> {
	return [
		{ id: CREDENTIAL_ID, name: 'Durable Jobs', type: 'durableJobsPostgresApi', data: jobs },
		{
			id: 'DjDashboardLogin',
			name: 'Durable Jobs Dashboard login',
			type: 'httpBasicAuth',
			data: DASHBOARD_LOGIN,
		},
		{
			id: 'DjDashboardToken',
			name: 'Durable Jobs Dashboard session',
			type: 'jwtAuth',
			data: { keyType: 'passphrase', secret: DASHBOARD_SESSION_SECRET, algorithm: 'HS256' },
		},
		{
			id: 'DjOperatorApiKey',
			name: 'Durable Jobs operator key',
			type: 'httpHeaderAuth',
			data: { name: OPERATOR_KEY.header, value: OPERATOR_KEY.value },
		},
		{ ...SIGNING_CREDENTIAL, data: { hmacSecret: SIGNING_KEY } },
	];
}

export interface WorkflowJson {
	id: string;
	name: string;
	nodes: Array<{ name: string; type: string; parameters: Record<string, unknown> }>;
	[key: string]: unknown;
}

export interface Environment {
	n8n: N8nInstance;
	standins: Standins;
	/** Proxy the job credential connects through; cut() makes the job database unreachable. */
	proxy: TcpProxy;
	/** Direct pool on the job database (`jobsDatabaseUrl`, not through the proxy). */
	jobsDb: pg.Pool;
	schema: string;
	workflows: WorkflowJson[];
	/** The credentials the bundled workflows name (imported unless `cliSetup` is false). */
	credentials: ReturnType<typeof bundledCredentials>;
	/** POST/GET a production webhook; returns status, headers and parsed body. */
	request(
		path: string,
		init?: { method?: string; body?: unknown; headers?: Record<string, string> },
	): Promise<{ status: number; headers: Headers; body: unknown; text: string; ms: number }>;
	stop(): Promise<void>;
}

export function loadWorkflows(): WorkflowJson[] {
	return readdirSync(WORKFLOWS_DIR)
		.filter((file) => file.endsWith('.json'))
		.sort()
		.map((file) => JSON.parse(readFileSync(join(WORKFLOWS_DIR, file), 'utf8')) as WorkflowJson);
}

function setConfig(workflow: WorkflowJson, values: Record<string, string | number>): void {
	const config = workflow.nodes.find((node) => node.name === 'Config');
	if (!config) return;
	const assignments = (
		config.parameters.assignments as { assignments: Array<{ name: string; value: unknown }> }
	).assignments;
	for (const assignment of assignments) {
		if (assignment.name in values) assignment.value = values[assignment.name];
	}
}

function setScheduleSeconds(workflow: WorkflowJson, seconds: number): void {
	for (const node of workflow.nodes) {
		if (node.type !== 'n8n-nodes-base.scheduleTrigger') continue;
		const interval = (node.parameters.rule as { interval: Array<Record<string, unknown>> })
			.interval[0];
		if (interval.field === 'seconds') interval.secondsInterval = seconds;
	}
}

/**
 * What a user edits in the bundled workflows to run them here: the Config nodes' URLs (the
 * stand-ins), and the interval of the schedule triggers.
 */
export function localizeWorkflows(
	workflows: WorkflowJson[],
	standins: Standins,
	pollSeconds: number,
): void {
	for (const workflow of workflows) {
		setScheduleSeconds(workflow, pollSeconds);
		setConfig(workflow, {
			ai_url: standins.ai.extractUrl,
			crm_url: standins.crm.recordsUrl,
			default_destination: `${standins.callbacks.url}/outbox`,
			alert_url: `${standins.callbacks.url}/alerts`,
		});
	}
}

/**
 * What `startEnvironment` creates on the server of its `databaseUrl`: n8n's own database, and
 * the job schema in the URL's database. Entry points check it up front (startPostgres).
 */
export const ENVIRONMENT_NEEDS: DatabaseNeeds = {
	createDatabase: true,
	createSchema: true,
	purpose: "n8n's own database and the jobs' own schema",
};

export interface EnvironmentOptions {
	/** Superuser URL of the server that holds n8n's own database (n8n gets a database of its own there). */
	databaseUrl: string;
	/**
	 * The job database: the proxy (and through it the Durable Jobs credential) and `jobsDb` point
	 * here. Default `databaseUrl`; a server of its own can be restarted without taking n8n's
	 * database down.
	 */
	jobsDatabaseUrl?: string;
	schema: string;
	pollSeconds?: number;
	standins?: StandinsOptions;
	log?: (line: string) => void;
	n8nEnv?: Record<string, string>;
	/** n8n queue mode: a main process and `workers` workers (each running `concurrency` executions) over the Redis at `redis` (default 127.0.0.1:6379). */
	queue?: { workers?: number; concurrency?: number; redis?: { host: string; port: number } };
	/** Changes to the bundled workflows before import (e.g. a shorter lease for crash tests). */
	customize?: (workflows: WorkflowJson[]) => void;
	/** Workflows to import instead of the bundled ones (e.g. an earlier release's, to compare). */
	workflows?: WorkflowJson[];
	/** More workflows to import and publish next to the bundled ones. */
	extraWorkflows?: WorkflowJson[];
	/**
	 * `false`: import no credential through the CLI and probe no webhook at start (a test that
	 * creates the credentials and workflows itself, as a user of the editor does). Default true.
	 */
	cliSetup?: boolean;
	/**
	 * Workflows imported but not published. Default: the polling Dispatcher, an alternative to
	 * the Dispatcher that would otherwise take jobs of the same queue next to it.
	 */
	unpublished?: string[];
}

/**
 * Production webhooks n8n must answer before the environment is ready. Probes run the
 * workflows for real: requests they reject at validation cost nothing.
 */
const WEBHOOK_PROBES: WebhookProbe[] = [
	{
		path: 'jobs',
		init: { method: 'POST', headers: { 'content-type': 'application/json' }, body: '[]' },
	},
	{ path: 'jobs/status?job_id=probe&token=probe' },
	{
		path: 'events',
		init: { method: 'POST', headers: { 'content-type': 'application/json' }, body: '[]' },
	},
];

/** The polling Dispatcher template (Schedule Trigger → Job Lease → Worker sub-workflow). */
export const POLLING_DISPATCHER_ID = 'DjDispatchPoll01';

/** The node of a bundled workflow, by workflow id and node name (for `customize`). */
export function workflowNode(
	workflows: WorkflowJson[],
	workflowId: string,
	nodeName: string,
): WorkflowJson['nodes'][number] {
	const workflow = workflows.find((candidate) => candidate.id === workflowId);
	const node = workflow?.nodes.find((candidate) => candidate.name === nodeName);
	if (!node) throw new Error(`No node "${nodeName}" in workflow ${workflowId}`);
	return node;
}

export async function startEnvironment(options: EnvironmentOptions): Promise<Environment> {
	const log = options.log ?? (() => undefined);
	const jobsDatabaseUrl = options.jobsDatabaseUrl ?? options.databaseUrl;
	const target = parseDatabaseUrl(jobsDatabaseUrl, 'the job database URL');
	const proxy = await startTcpProxy({ host: target.host, port: target.port });
	log('starting the stand-in AI endpoint, CRM and callback receiver');
	const standins = await startStandins(options.standins);
	const jobsDb = new pg.Pool({ connectionString: jobsDatabaseUrl, max: 4 });
	jobsDb.on('error', () => undefined);
	await jobsDb.query(`DROP SCHEMA IF EXISTS "${options.schema}" CASCADE`);

	const workflows = [...(options.workflows ?? loadWorkflows()), ...(options.extraWorkflows ?? [])];
	localizeWorkflows(workflows, standins, options.pollSeconds ?? 2);
	options.customize?.(workflows);

	const packDir = mkdtempSync(join(tmpdir(), 'durable-jobs-pack-'));
	const removePackDir = () => rmSync(packDir, { recursive: true, force: true });
	const packDirCleanup = registerCleanup(
		'package tarball folder',
		async () => removePackDir(),
		removePackDir,
	);
	let tarball: string;
	try {
		await ensureN8n({ log });
		tarball = await packPackage(REPO_DIR, { log, outDir: packDir });
	} catch (error) {
		packDirCleanup.unregister();
		removePackDir();
		await Promise.allSettled([standins.close(), proxy.close(), jobsDb.end()]);
		throw error;
	}
	const credentials = bundledCredentials({
		host: proxy.host,
		port: proxy.port,
		database: target.database,
		user: target.user,
		password: target.password,
		ssl: 'disable',
		schema: options.schema,
		maxConnections: 10,
		autoMigrate: true,
	});
	let n8n: N8nInstance;
	try {
		n8n = await startN8n({
			databaseUrl: options.databaseUrl,
			packageTarball: tarball,
			credentials: options.cliSetup === false ? [] : credentials,
			workflows,
			publishIds: workflows
				.map((workflow) => workflow.id)
				.filter((id) => !(options.unpublished ?? [POLLING_DISPATCHER_ID]).includes(id)),
			webhooks: options.cliSetup === false ? [] : WEBHOOK_PROBES,
			env: options.n8nEnv,
			queue: options.queue && {
				workers: options.queue.workers,
				concurrency: options.queue.concurrency,
				redisHost: options.queue.redis?.host,
				redisPort: options.queue.redis?.port,
			},
			log,
		});
	} catch (error) {
		await Promise.allSettled([standins.close(), proxy.close(), jobsDb.end()]);
		throw error;
	} finally {
		packDirCleanup.unregister();
		removePackDir();
	}

	const request: Environment['request'] = async (path, init = {}) => {
		const started = performance.now();
		const response = await fetch(n8n.webhookUrl(path), {
			method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
			headers: {
				...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
				...(init.headers ?? {}),
			},
			body:
				init.body === undefined
					? undefined
					: typeof init.body === 'string'
						? init.body
						: JSON.stringify(init.body),
		});
		const text = await response.text();
		const ms = performance.now() - started;
		let body: unknown = text;
		try {
			body = JSON.parse(text);
		} catch {
			// not JSON: keep the text
		}
		return { status: response.status, headers: response.headers, body, text, ms };
	};

	// Registered after n8n, so it runs first: n8n stops before the schema is dropped.
	const cleanup = registerCleanup(`environment (schema ${options.schema})`, async () => {
		await n8n.stop().catch(() => undefined);
		await Promise.allSettled([standins.close(), proxy.close()]);
		await jobsDb.query(`DROP SCHEMA IF EXISTS "${options.schema}" CASCADE`).catch(() => undefined);
		await jobsDb.end();
	});
	const stop = () => cleanup.run();
	return {
		n8n,
		standins,
		proxy,
		jobsDb,
		schema: options.schema,
		workflows,
		credentials,
		request,
		stop,
	};
}
