/**
 * Runs a REAL n8n 2.x headless, with this package installed the way a user installs it, for the
 * end-to-end tests and `npm run demo`.
 *
 *   const n8n = await ensureN8n({ log });                  // Node 24 + n8n, cached outside the repo
 *   const tarball = await packPackage(repoDir);            // `npm pack` (runs prepack → build)
 *   const inst = await startN8n({
 *     databaseUrl,                                         // any PostgreSQL superuser URL
 *     packageTarball: tarball,                             // npm-installed into ~/.n8n/nodes
 *     credentials: [{ id, name, type, data: {...} }],      // plain data; n8n encrypts on import
 *     workflowsDir: 'workflows',                           // and/or workflowFiles / workflows
 *     publishIds: ['RcvJobs000000001', ...],               // include sub-workflows
 *     webhooks: [{ path: 'jobs', init: { method: 'POST', body: '{}' } }], // probed after every start
 *   });
 *   await fetch(inst.webhookUrl('jobs'), ...);
 *   await inst.kill('SIGKILL'); await inst.restart();      // crash test: same folder + database
 *   await inst.stop();                                     // ends processes, drops db, removes folder
 *
 * Each instance gets its own folder (user folder, `n8n.log` with all n8n and CLI output), its own
 * database `n8n_e2e_<random>` on the server of `databaseUrl`, its own HTTP and task-runner broker
 * ports, and in queue mode (`queue: { workers: 2 }`, Redis 127.0.0.1:6379) its own Bull and
 * Redis key prefixes and `worker-<i>.log` files, so instances can run side by side. Processes are
 * started in their own process group (n8n + its task runner) and are SIGKILLed when this process
 * exits.
 *
 * A start (and restart) returns once n8n is healthy AND has applied every publication: n8n 2.x
 * publishes asynchronously after boot (published version, then webhooks and triggers), so the
 * harness watches n8n's publication tables instead of guessing with sleeps. It fails, with n8n's
 * own message or the log tail, when n8n exits, is not healthy in time, logs `Failed to load
 * package` for an installed tarball, a publish did not take, a publication or trigger activation
 * failed (unless `allowActivationErrors`), or a `webhooks` probe never answers. Probes run the
 * workflow for real: probe with a request the workflow rejects cheaply.
 * publish()/unpublish() edit the database; a running n8n picks them up at restart().
 *
 * Cache: `${DURABLE_JOBS_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/n8n-nodes-durable-jobs}/n8n-<version>`
 * (see cache.ts). Env knobs: N8N_E2E_VERSION (default 2.40.7), N8N_E2E_KEEP=1 keeps folders and
 * databases after stop().
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
	appendFileSync,
	closeSync,
	existsSync,
	mkdirSync,
	mkdtempSync,
	openSync,
	readFileSync,
	readdirSync,
	rmSync,
	statSync,
	writeFileSync,
} from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, isAbsolute, join, resolve } from 'node:path';

import pg from 'pg';

import { cacheRoot, ensureInstalled, run, runOrThrow, tail, type RunResult } from './cache';
import { ensureNode24 } from './node24';
import { freePort } from './postgres';

export const DEFAULT_N8N_VERSION = process.env.N8N_E2E_VERSION || '2.40.7';
const ENCRYPTION_KEY = 'n8n-nodes-durable-jobs-e2e-encryption-key';

type Log = (line: string) => void;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// installation

export interface N8nInstall {
	version: string;
	/** Node >= 24 executable used to run n8n. */
	node24: string;
	/** `<cache>/n8n-<version>/node_modules/n8n/bin/n8n` — run it as `node24 n8nBin <cmd>`. */
	n8nBin: string;
	/** Folder of node24; first in PATH for n8n (its task runners start `node` from PATH). */
	binDir: string;
	installDir: string;
}

/**
 * Installs (once) and returns Node 24 and n8n. The first n8n install downloads ~2.8 GB and takes
 * minutes; `--ignore-scripts` is required because some native builds fail here, which is also
 * why n8n must run on PostgreSQL instead of sqlite.
 */
export async function ensureN8n(opts: { version?: string; log?: Log } = {}): Promise<N8nInstall> {
	const log = opts.log ?? (() => {});
	const version = opts.version ?? DEFAULT_N8N_VERSION;
	const node = await ensureNode24({ log });
	const installDir = join(cacheRoot(), `n8n-${version}`);
	await ensureInstalled(
		installDir,
		async (dir) => {
			log(`installing n8n@${version} into ${dir} (first time only; several minutes)`);
			const started = Date.now();
			writeFileSync(
				join(dir, 'package.json'),
				JSON.stringify({ name: 'n8n-cache', private: true }) + '\n',
			);
			await runOrThrow(
				'npm',
				[
					'install',
					`n8n@${version}`,
					'--ignore-scripts',
					'--no-audit',
					'--no-fund',
					'--loglevel=error',
				],
				{
					cwd: dir,
				},
			);
			log(`n8n@${version} installed in ${Math.round((Date.now() - started) / 1000)} s`);
		},
		log,
	);
	const n8nBin = join(installDir, 'node_modules', 'n8n', 'bin', 'n8n');
	if (!existsSync(n8nBin)) throw new Error(`${n8nBin} missing; delete ${installDir} to reinstall`);
	return { version, node24: node.node, n8nBin, binDir: node.binDir, installDir };
}

/**
 * `npm pack` of the package in `repoDir` (its prepack builds it) into `outDir` (default: a new
 * temp folder). Returns the absolute tarball path.
 */
export async function packPackage(
	repoDir: string,
	opts: { outDir?: string; log?: Log } = {},
): Promise<string> {
	const outDir = opts.outDir ?? mkdtempSync(join(tmpdir(), 'durable-jobs-pack-'));
	mkdirSync(outDir, { recursive: true });
	opts.log?.(`npm pack ${repoDir}`);
	const res = await runOrThrow('npm', ['pack', '--json', '--pack-destination', outDir], {
		cwd: repoDir,
	});
	// Lifecycle scripts (prepack → build) print to stdout before the JSON, gulp with "[hh:mm:ss]".
	const jsonStart = /^\[\s*$/m.exec(res.stdout)?.index;
	if (jsonStart === undefined)
		throw new Error(`npm pack printed no JSON:\n${tail(res.stdout, 30)}`);
	const parsed = JSON.parse(res.stdout.slice(jsonStart)) as Array<{ filename: string }>;
	const file = parsed[0]?.filename;
	if (!file) throw new Error(`npm pack printed no filename:\n${res.stdout}`);
	return join(outDir, basename(file));
}

// ---------------------------------------------------------------------------------------------
// process bookkeeping: every process group we start dies with us

const liveGroups = new Set<number>();
/** Short-lived CLI runs (import/publish); not process-group leaders. */
const liveChildren = new Set<ChildProcess>();
let exitHooksInstalled = false;

function trackChild(child: ChildProcess): void {
	installExitHooks();
	liveChildren.add(child);
	child.on('exit', () => liveChildren.delete(child));
}

/** Signals the whole process group (n8n and its task runner); spawnGroup makes each a leader. */
function killGroup(pid: number, signal: NodeJS.Signals): void {
	try {
		process.kill(-pid, signal);
	} catch {
		// The group is already gone.
	}
}

function installExitHooks(): void {
	if (exitHooksInstalled) return;
	exitHooksInstalled = true;
	const killAll = () => {
		for (const pid of liveGroups) killGroup(pid, 'SIGKILL');
		liveGroups.clear();
		for (const child of liveChildren) child.kill('SIGKILL');
		liveChildren.clear();
	};
	process.on('exit', killAll);
	for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
		const handler = () => {
			killAll();
			// Only decide the exit ourselves when nobody else listens for this signal.
			if (process.listenerCount(sig) === 1) {
				process.removeListener(sig, handler);
				process.kill(process.pid, sig);
			}
		};
		process.on(sig, handler);
	}
}

interface Proc {
	child: ChildProcess;
	exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
	done: boolean;
}

function spawnGroup(
	cmd: string,
	args: string[],
	env: NodeJS.ProcessEnv,
	cwd: string,
	logFile: string,
): Proc {
	installExitHooks();
	const fd = openSync(logFile, 'a');
	const child = spawn(cmd, args, { cwd, env, detached: true, stdio: ['ignore', fd, fd] });
	closeSync(fd);
	const pid = child.pid;
	if (pid === undefined) throw new Error(`could not start ${cmd}`);
	liveGroups.add(pid);
	const proc: Proc = {
		child,
		done: false,
		exited: new Promise((resolveExit) => {
			child.on('exit', (code, signal) => {
				proc.done = true;
				resolveExit({ code, signal });
			});
			child.on('error', () => {
				proc.done = true;
				resolveExit({ code: null, signal: null });
			});
		}),
	};
	// Also reap the rest of the group (the task runner) once the leader is gone.
	void proc.exited.then(() => {
		killGroup(pid, 'SIGKILL');
		liveGroups.delete(pid);
	});
	return proc;
}

async function stopProc(
	proc: Proc | undefined,
	signal: NodeJS.Signals,
	graceMs: number,
): Promise<void> {
	if (!proc || proc.done || proc.child.pid === undefined) return;
	killGroup(proc.child.pid, signal);
	const timedOut = await Promise.race([
		proc.exited.then(() => false),
		sleep(graceMs).then(() => true),
	]);
	if (timedOut) {
		killGroup(proc.child.pid, 'SIGKILL');
		await proc.exited;
	}
}

/** Runs `fn` over `items`, at most `size` at a time (each n8n CLI run boots n8n: seconds of CPU). */
async function inPool<T>(
	items: T[],
	size: number,
	fn: (item: T) => Promise<unknown>,
): Promise<void> {
	const queue = [...items];
	await Promise.all(
		Array.from({ length: Math.min(size, queue.length) }, async () => {
			for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
		}),
	);
}

// ---------------------------------------------------------------------------------------------
// database per instance

interface DbParts {
	host: string;
	port: string;
	user: string;
	password: string;
	ssl: boolean;
}

function dbParts(databaseUrl: string): DbParts {
	const u = new URL(databaseUrl);
	const sslmode = u.searchParams.get('sslmode') ?? '';
	return {
		host: decodeURIComponent(u.hostname) || '127.0.0.1',
		port: u.port || '5432',
		user: decodeURIComponent(u.username) || process.env.USER || 'postgres',
		password: decodeURIComponent(u.password),
		ssl: ['require', 'verify-ca', 'verify-full'].includes(sslmode),
	};
}

function withDatabase(databaseUrl: string, database: string): string {
	const u = new URL(databaseUrl);
	u.pathname = `/${database}`;
	return u.toString();
}

async function adminQuery(databaseUrl: string, sql: string): Promise<void> {
	const client = new pg.Client({ connectionString: databaseUrl });
	await client.connect();
	try {
		await client.query(sql);
	} finally {
		await client.end();
	}
}

/** Deletes this instance's Bull keys (best effort; a tiny RESP client instead of a dependency). */
async function redisDeleteByPrefix(host: string, port: number, prefix: string): Promise<void> {
	const script =
		"local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) n = n + 1 end return n";
	const args = ['EVAL', script, '0', `${prefix}:*`];
	const payload =
		`*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('');
	await new Promise<void>((resolveDone) => {
		const socket = createConnection({ host, port }, () => socket.write(payload));
		const done = () => {
			socket.destroy();
			resolveDone();
		};
		socket.setTimeout(5_000, done);
		socket.once('data', done);
		socket.once('error', done);
	});
}

// ---------------------------------------------------------------------------------------------
// instance

interface PublicationState {
	id: string;
	published: boolean;
	pending: boolean;
	latest_status: string | null;
	latest_error: string | null;
	trigger_errors: string[] | null;
	missing_webhooks: string;
}

/** Publication progress per workflow, from n8n's own tables (2.40 schema). */
const PUBLICATION_STATE_SQL = `
SELECT w.id,
       COALESCE(p."publishedVersionId" = w."activeVersionId", false) AS published,
       EXISTS (SELECT 1 FROM workflow_publication_outbox o
                WHERE o."workflowId" = w.id AND o.status IN ('pending', 'in_progress')) AS pending,
       latest.status AS latest_status,
       latest."errorMessage" AS latest_error,
       (SELECT array_agg(t."nodeId" || ': ' || COALESCE(t."errorMessage", 'failed'))
          FROM workflow_publication_trigger_status t
         WHERE t."workflowId" = w.id AND t."versionId" = w."activeVersionId"
           AND t.status = 'failed' AND t."updatedAt" >= $2) AS trigger_errors,
       (SELECT count(*)
          FROM json_array_elements(h.nodes) n
         WHERE n->>'type' IN ('n8n-nodes-base.webhook', 'n8n-nodes-base.formTrigger')
           AND COALESCE(n->>'disabled', 'false') <> 'true'
           AND NOT EXISTS (SELECT 1 FROM webhook_entity e
                            WHERE e."workflowId" = w.id AND e.node = n->>'name')) AS missing_webhooks
  FROM workflow_entity w
  LEFT JOIN workflow_published_version p ON p."workflowId" = w.id
  LEFT JOIN workflow_history h ON h."versionId" = w."activeVersionId"
  LEFT JOIN LATERAL (SELECT o.status, o."errorMessage" FROM workflow_publication_outbox o
                      WHERE o."workflowId" = w.id AND o."publishedVersionId" = w."activeVersionId"
                        AND o."updatedAt" >= $2
                      ORDER BY o.id DESC LIMIT 1) latest ON true
 WHERE w.id = ANY($1)`;

/**
 * n8n's own 404 answers while a production webhook is not (yet) served: not registered, or
 * registered but its published version not yet materialised by the publication outbox.
 */
const N8N_NOT_READY_404 =
	/is not registered|Published version not found|Active version not found|Could not find workflow with id/i;

export interface WebhookProbe {
	/** Path after `/webhook/`, e.g. `jobs` or `jobs/status?job_id=x`. */
	path: string;
	/** Request to probe with; it really runs the workflow once, so use a harmless request. */
	init?: RequestInit;
}

export interface StartN8nOptions {
	/** Superuser URL of any PostgreSQL; n8n gets a fresh database `n8n_e2e_<random>` on it. */
	databaseUrl: string;
	version?: string;
	/** Tarball(s) from packPackage(); npm-installed into `<userFolder>/.n8n/nodes`. */
	packageTarball?: string | string[];
	/** Credentials for `n8n import:credentials` (array of {id, name, type, data}). */
	credentials?: object[];
	/** Folder of workflow JSON files imported with `--separate`. */
	workflowsDir?: string;
	workflowFiles?: string[];
	/** Workflow objects, written to files and imported. */
	workflows?: object[];
	/** Workflow ids to publish (activate) before start — include sub-workflows. */
	publishIds?: string[];
	/** Webhooks that must answer (anything but "not registered") after every start. */
	webhooks?: WebhookProbe[];
	/** Extra/overriding environment for n8n (all processes, including CLI runs). */
	env?: Record<string, string>;
	log?: Log;
	/** Instance folder (default: a new temp folder). */
	dir?: string;
	/** Keep folder and database after stop() (default: N8N_E2E_KEEP=1). */
	keep?: boolean;
	startTimeoutMs?: number;
	/**
	 * Start even when n8n reports a failed publication or trigger activation (e.g. a test of a
	 * trigger with a wrong password). Default false: the start fails with n8n's message.
	 */
	allowActivationErrors?: boolean;
	/** n8n queue mode: main + `workers` worker processes over Redis (default 127.0.0.1:6379). */
	queue?: { workers?: number; concurrency?: number; redisHost?: string; redisPort?: number };
}

export interface N8nInstance {
	baseUrl: string;
	/** `${baseUrl}/webhook/${path}` */
	webhookUrl(path: string): string;
	dir: string;
	userFolder: string;
	logFile: string;
	/** Name and URL of this instance's n8n database. */
	databaseName: string;
	databaseUrl: string;
	/** Environment n8n runs with. */
	env: Record<string, string>;
	install: N8nInstall;
	/** Pid of the main n8n process (undefined when not running). */
	readonly pid: number | undefined;
	readonly running: boolean;
	/** Ends n8n (and workers); then drops the database and removes the folder unless `keep`. */
	stop(): Promise<void>;
	/** Sends `signal` (default SIGKILL) to the main process group and waits for it to exit. */
	kill(signal?: NodeJS.Signals): Promise<void>;
	/** Stops main (gracefully) if it runs, starts it again on the same folder, database and port. */
	restart(): Promise<void>;
	/** Runs `n8n <args>` with the instance environment (output also appended to the log). */
	cli(args: string[]): Promise<RunResult>;
	importCredentials(credentials: object[]): Promise<void>;
	importWorkflows(opts: { dir?: string; files?: string[]; workflows?: object[] }): Promise<void>;
	/** Publishes via the CLI and verifies; a running main only picks this up after restart(). */
	publish(ids: string[]): Promise<void>;
	unpublish(ids: string[]): Promise<void>;
	activeWorkflowIds(): Promise<string[]>;
	/** Polls until the production webhook is registered; returns the first real answer. */
	waitForWebhook(
		path: string,
		init?: RequestInit,
		opts?: { timeoutMs?: number },
	): Promise<{ status: number; body: string }>;
	/**
	 * Node type names n8n loaded at its last start (e.g. `n8n-nodes-durable-jobs.jobEnqueue`), read
	 * from the types file n8n generates for its editor under the user folder.
	 */
	loadedNodeTypes(): string[];
	/** Last lines of n8n.log (or of another file, e.g. a worker log). */
	logTail(lines?: number, file?: string): string;
	/** Queue mode only; each worker logs to `<dir>/worker-<i>.log`. */
	workers: {
		count: number;
		logFile(index: number): string;
		kill(index: number, signal?: NodeJS.Signals): Promise<void>;
		restart(index: number): Promise<void>;
	};
}

function baseEnv(): Record<string, string> {
	// Deliberately not inheriting everything: vitest sets NODE_ENV=test, and n8n's node loader
	// throws "Not available in tests" when NODE_ENV is test.
	const env: Record<string, string> = {};
	for (const k of [
		'HOME',
		'USER',
		'LOGNAME',
		'LANG',
		'LC_ALL',
		'TZ',
		'TMPDIR',
		'SHELL',
		'HTTP_PROXY',
		'HTTPS_PROXY',
		'NO_PROXY',
		'http_proxy',
		'https_proxy',
		'no_proxy',
	]) {
		const v = process.env[k];
		if (v !== undefined) env[k] = v;
	}
	return env;
}

export async function startN8n(opts: StartN8nOptions): Promise<N8nInstance> {
	const log = opts.log ?? (() => {});
	const install = await ensureN8n({ version: opts.version, log });
	const keep = opts.keep ?? process.env.N8N_E2E_KEEP === '1';
	const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'n8n-e2e-'));
	mkdirSync(dir, { recursive: true });
	const userFolder = join(dir, 'user');
	mkdirSync(userFolder, { recursive: true });
	const logFile = join(dir, 'n8n.log');
	const databaseName = `n8n_e2e_${randomBytes(5).toString('hex')}`;
	const db = dbParts(opts.databaseUrl);
	const port = await freePort();
	const brokerPort = await freePort();
	const baseUrl = `http://127.0.0.1:${port}`;
	const queue = opts.queue;

	const env: Record<string, string> = {
		...baseEnv(),
		PATH: `${install.binDir}:${process.env.PATH ?? '/usr/bin:/bin'}`,
		N8N_USER_FOLDER: userFolder,
		N8N_ENCRYPTION_KEY: ENCRYPTION_KEY,
		N8N_PORT: String(port),
		N8N_LISTEN_ADDRESS: '127.0.0.1',
		N8N_HOST: '127.0.0.1',
		N8N_PROTOCOL: 'http',
		N8N_WEBHOOK_URL: `${baseUrl}/`,
		N8N_RUNNERS_BROKER_PORT: String(brokerPort),
		N8N_DIAGNOSTICS_ENABLED: 'false',
		N8N_VERSION_NOTIFICATIONS_ENABLED: 'false',
		N8N_TEMPLATES_ENABLED: 'false',
		N8N_PERSONALIZATION_ENABLED: 'false',
		N8N_HIRING_BANNER_ENABLED: 'false',
		N8N_COMMUNITY_PACKAGES_ENABLED: 'true',
		N8N_UNVERIFIED_PACKAGES_ENABLED: 'true',
		N8N_SECURE_COOKIE: 'false',
		// The stand-in services live on 127.0.0.1, which SSRF protection would block once enabled.
		N8N_SSRF_PROTECTION_ENABLED: 'false',
		// n8n 2.x serves production webhooks and sub-workflow calls from `workflow_published_version`,
		// filled asynchronously by a publication outbox polled every 15 s by default.
		N8N_WORKFLOW_PUBLICATION_OUTBOX_POLL_INTERVAL_MS: '1000',
		DB_TYPE: 'postgresdb',
		DB_POSTGRESDB_HOST: db.host,
		DB_POSTGRESDB_PORT: db.port,
		DB_POSTGRESDB_DATABASE: databaseName,
		DB_POSTGRESDB_USER: db.user,
		DB_POSTGRESDB_PASSWORD: db.password,
		...(db.ssl
			? { DB_POSTGRESDB_SSL_ENABLED: 'true', DB_POSTGRESDB_SSL_REJECT_UNAUTHORIZED: 'false' }
			: {}),
		...(queue
			? {
					EXECUTIONS_MODE: 'queue',
					QUEUE_BULL_REDIS_HOST: queue.redisHost ?? '127.0.0.1',
					QUEUE_BULL_REDIS_PORT: String(queue.redisPort ?? 6379),
					// Separate prefixes so parallel instances never take each other's jobs, cache
					// entries or pub/sub commands.
					QUEUE_BULL_PREFIX: `bull_${databaseName}`,
					N8N_REDIS_KEY_PREFIX: `n8n_${databaseName}`,
				}
			: {}),
		...(opts.env ?? {}),
	};

	log(`n8n instance in ${dir} (port ${port}, database ${databaseName})`);
	await adminQuery(opts.databaseUrl, `CREATE DATABASE "${databaseName}"`);

	let main: Proc | undefined;
	const workerProcs: Array<Proc | undefined> = [];
	const workerEnvs: Array<Record<string, string>> = [];
	let stopped = false;

	const workerLogFile = (i: number) => join(dir, `worker-${i}.log`);
	const appendLog = (text: string) => appendFileSync(logFile, text);
	const logTail = (lines = 80, file = logFile): string => {
		try {
			return tail(readFileSync(file, 'utf8'), lines);
		} catch {
			return '(no log)';
		}
	};

	const cli = async (args: string[]): Promise<RunResult> => {
		appendLog(`\n$ n8n ${args.join(' ')}\n`);
		// CLI runs get their own broker port so they never collide with a running main, and plain
		// info logging because list:workflow prints its result through the logger.
		const cliEnv = {
			...env,
			N8N_RUNNERS_BROKER_PORT: String(await freePort()),
			N8N_LOG_LEVEL: 'info',
		};
		return await run(install.node24, [install.n8nBin, ...args], {
			cwd: dir,
			env: cliEnv,
			onOutput: appendLog,
			onSpawn: trackChild,
			timeoutMs: 10 * 60_000,
		});
	};
	const cliOrThrow = async (args: string[]): Promise<RunResult> => {
		const res = await cli(args);
		if (res.code !== 0)
			throw new Error(
				`n8n ${args.join(' ')} exited with ${res.code}\n${tail(res.stdout + res.stderr, 40)}`,
			);
		return res;
	};

	const installPackages = async (tarballs: string[]): Promise<void> => {
		const nodesDir = join(userFolder, '.n8n', 'nodes');
		mkdirSync(nodesDir, { recursive: true });
		if (!existsSync(join(nodesDir, 'package.json'))) {
			writeFileSync(
				join(nodesDir, 'package.json'),
				JSON.stringify({ name: 'installed-nodes', private: true }) + '\n',
			);
		}
		log(`npm install ${tarballs.map((t) => basename(t)).join(' ')} into ${nodesDir}`);
		// Like n8n's own community-package installer: no peer deps (n8n-workflow must be n8n's
		// copy, resolved through the NODE_PATH n8n sets up) and no install scripts.
		const res = await run(
			'npm',
			[
				'install',
				...tarballs.map((t) => (isAbsolute(t) ? t : resolve(t))),
				'--omit=dev',
				'--omit=peer',
				'--no-audit',
				'--no-fund',
				'--ignore-scripts',
				'--loglevel=error',
			],
			{ cwd: nodesDir, env: { ...process.env, NODE_ENV: 'production' }, onOutput: appendLog },
		);
		if (res.code !== 0)
			throw new Error(
				`npm install ${tarballs.join(' ')} failed:\n${tail(res.stdout + res.stderr, 40)}`,
			);
	};

	const importCredentials = async (credentials: object[]): Promise<void> => {
		if (credentials.length === 0) return;
		const file = join(dir, `credentials-${Date.now()}.json`);
		writeFileSync(file, JSON.stringify(credentials, null, 2));
		await cliOrThrow(['import:credentials', `--input=${file}`]);
		// The file holds secrets in plain text; n8n has them encrypted now.
		rmSync(file, { force: true });
	};

	const importWorkflows = async (o: {
		dir?: string;
		files?: string[];
		workflows?: object[];
	}): Promise<void> => {
		if (o.dir) await cliOrThrow(['import:workflow', '--separate', `--input=${resolve(o.dir)}`]);
		for (const f of o.files ?? []) await cliOrThrow(['import:workflow', `--input=${resolve(f)}`]);
		if (o.workflows && o.workflows.length > 0) {
			const wfDir = mkdtempSync(join(dir, 'workflows-'));
			o.workflows.forEach((wf, i) =>
				writeFileSync(
					join(wfDir, `${String(i).padStart(3, '0')}.json`),
					JSON.stringify(wf, null, 2),
				),
			);
			await cliOrThrow(['import:workflow', '--separate', `--input=${wfDir}`]);
		}
	};

	const instanceDbUrl = withDatabase(opts.databaseUrl, databaseName);
	const published = new Set<string>();

	/**
	 * Waits until n8n has applied the publication of every published workflow. In 2.x a
	 * publication outbox does this asynchronously after start: it writes
	 * `workflow_published_version` (what webhooks and sub-workflow calls execute) first and
	 * registers webhooks (`webhook_entity`) and triggers after, so all of it is checked. A failed
	 * publication or trigger activation fails the start with n8n's own error message.
	 */
	const waitForPublications = async (since: Date): Promise<void> => {
		if (published.size === 0) return;
		const deadline = Date.now() + (opts.startTimeoutMs ?? 180_000);
		const client = new pg.Client({ connectionString: instanceDbUrl });
		await client.connect();
		try {
			for (;;) {
				const { rows } = await client.query<PublicationState>(PUBLICATION_STATE_SQL, [
					[...published],
					since.toISOString(),
				]);
				const problems = rows.flatMap((r) => [
					...(r.latest_status === 'failed' || r.latest_status === 'partial_success'
						? [`${r.id}: publication ${r.latest_status}: ${r.latest_error ?? '(no message)'}`]
						: []),
					...(r.trigger_errors ?? []).map((e) => `${r.id}: trigger ${e}`),
				]);
				if (problems.length > 0 && !opts.allowActivationErrors) {
					throw new Error(`n8n could not publish:\n${problems.join('\n')}\n(log: ${logFile})`);
				}
				const waiting = rows
					.filter((r) => !r.published || r.pending || Number(r.missing_webhooks) > 0)
					.map((r) => r.id);
				if (rows.length === published.size && waiting.length === 0) return;
				if (main?.done) throw new Error(`n8n exited while publishing\n${logTail()}`);
				if (Date.now() > deadline) {
					throw new Error(
						`n8n did not finish publishing ${waiting.join(', ')} in time\n${logTail()}`,
					);
				}
				await sleep(250);
			}
		} finally {
			await client.end();
		}
	};

	const activeWorkflowIds = async (): Promise<string[]> => {
		const res = await cliOrThrow(['list:workflow', '--active=true', '--onlyId']);
		return res.stdout
			.split('\n')
			.map((l) => l.trim())
			.filter((l) => /^[A-Za-z0-9_-]+$/.test(l));
	};

	const publish = async (ids: string[]): Promise<void> => {
		// publish:workflow exits 0 even when it fails, hence the check against list:workflow.
		await inPool(ids, 2, (id) => cliOrThrow(['publish:workflow', `--id=${id}`]));
		const active = new Set(await activeWorkflowIds());
		const missing = ids.filter((id) => !active.has(id));
		if (missing.length > 0)
			throw new Error(`workflows not published: ${missing.join(', ')}\n${logTail(40)}`);
		for (const id of ids) published.add(id);
	};

	const unpublish = async (ids: string[]): Promise<void> => {
		await inPool(ids, 2, (id) => cliOrThrow(['unpublish:workflow', `--id=${id}`]));
		const active = new Set(await activeWorkflowIds());
		const still = ids.filter((id) => active.has(id));
		if (still.length > 0)
			throw new Error(`workflows still published: ${still.join(', ')}\n${logTail(40)}`);
		for (const id of ids) published.delete(id);
	};

	const webhookUrl = (path: string): string => `${baseUrl}/webhook/${path.replace(/^\/+/, '')}`;

	const waitForWebhook = async (
		path: string,
		init?: RequestInit,
		o: { timeoutMs?: number } = {},
	): Promise<{ status: number; body: string }> => {
		const deadline = Date.now() + (o.timeoutMs ?? 120_000);
		let last = '';
		for (;;) {
			if (main?.done) throw new Error(`n8n exited while waiting for webhook ${path}\n${logTail()}`);
			try {
				const res = await fetch(webhookUrl(path), { ...init, signal: AbortSignal.timeout(30_000) });
				const body = await res.text();
				if (!(res.status === 404 && N8N_NOT_READY_404.test(body))) {
					return { status: res.status, body };
				}
				last = `${res.status} ${body.slice(0, 200)}`;
			} catch (err) {
				last = err instanceof Error ? err.message : String(err);
			}
			if (Date.now() > deadline)
				throw new Error(`webhook ${path} not ready: ${last}\n${logTail()}`);
			await sleep(500);
		}
	};

	const waitHealthy = async (
		url: string,
		proc: () => Proc | undefined,
		what: string,
		file = logFile,
	): Promise<void> => {
		const deadline = Date.now() + (opts.startTimeoutMs ?? 180_000);
		for (;;) {
			const p = proc();
			if (!p || p.done)
				throw new Error(`${what} exited during startup (log: ${file})\n${logTail(80, file)}`);
			try {
				const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
				if (res.ok) return;
			} catch {
				// Not listening yet.
			}
			if (Date.now() > deadline) {
				throw new Error(
					`${what} not healthy after ${opts.startTimeoutMs ?? 180_000} ms (log: ${file})\n${logTail(80, file)}`,
				);
			}
			await sleep(300);
		}
	};

	const startWorker = async (i: number): Promise<void> => {
		const wEnv = workerEnvs[i];
		if (!wEnv) throw new Error(`no worker ${i}`);
		const wLog = workerLogFile(i);
		appendFileSync(wLog, `\n$ n8n worker\n`);
		const args = [
			install.n8nBin,
			'worker',
			...(queue?.concurrency ? [`--concurrency=${queue.concurrency}`] : []),
		];
		workerProcs[i] = spawnGroup(install.node24, args, wEnv, dir, wLog);
		await waitHealthy(
			`http://127.0.0.1:${wEnv.QUEUE_HEALTH_CHECK_PORT}/healthz`,
			() => workerProcs[i],
			`n8n worker #${i}`,
			wLog,
		);
	};

	const startMain = async (): Promise<void> => {
		const started = Date.now();
		appendLog(`\n$ n8n start\n`);
		const logOffset = statSync(logFile).size;
		main = spawnGroup(install.node24, [install.n8nBin, 'start'], env, dir, logFile);
		await waitHealthy(`${baseUrl}/healthz/readiness`, () => main, 'n8n');
		// n8n starts even when a community package fails to load; the workflows then fail with
		// "Unrecognized node type", far from the cause. Fail here instead.
		const startLog = readFileSync(logFile).subarray(logOffset).toString('utf8');
		const failed = /Failed to load package "[^"]+"[\s\S]{0,600}/.exec(startLog);
		if (failed) throw new Error(`${failed[0]}\n(log: ${logFile})`);
		const healthy = Date.now();
		await waitForPublications(new Date(started));
		log(
			`n8n healthy at ${baseUrl} after ${((healthy - started) / 1000).toFixed(1)} s, ` +
				`workflows published after ${((Date.now() - started) / 1000).toFixed(1)} s`,
		);
	};

	// In queue mode a probe needs a worker to answer, so probing comes after the workers started.
	const probeWebhooks = async (): Promise<void> => {
		const started = Date.now();
		for (const probe of opts.webhooks ?? []) await waitForWebhook(probe.path, probe.init);
		if (opts.webhooks?.length)
			log(`webhooks answering after ${((Date.now() - started) / 1000).toFixed(1)} s`);
	};

	const dropState = async (): Promise<void> => {
		for (const prefix of queue ? [env.QUEUE_BULL_PREFIX, env.N8N_REDIS_KEY_PREFIX] : []) {
			if (!prefix) continue;
			await redisDeleteByPrefix(
				env.QUEUE_BULL_REDIS_HOST ?? '127.0.0.1',
				Number(env.QUEUE_BULL_REDIS_PORT ?? 6379),
				prefix,
			);
		}
		await adminQuery(opts.databaseUrl, `DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`);
	};

	const stopAll = async (): Promise<void> => {
		await Promise.all([
			stopProc(main, 'SIGTERM', 20_000),
			...workerProcs.map((w) => stopProc(w, 'SIGTERM', 20_000)),
		]);
	};

	try {
		const tarballs =
			opts.packageTarball === undefined ? [] : ([] as string[]).concat(opts.packageTarball);
		if (tarballs.length > 0) await installPackages(tarballs);
		if (opts.credentials) await importCredentials(opts.credentials);
		await importWorkflows({
			dir: opts.workflowsDir,
			files: opts.workflowFiles,
			workflows: opts.workflows,
		});
		if (opts.publishIds && opts.publishIds.length > 0) await publish(opts.publishIds);
		if (queue) {
			for (let i = 0; i < (queue.workers ?? 1); i++) {
				workerEnvs.push({
					...env,
					N8N_RUNNERS_BROKER_PORT: String(await freePort()),
					QUEUE_HEALTH_CHECK_ACTIVE: 'true',
					QUEUE_HEALTH_CHECK_PORT: String(await freePort()),
				});
			}
		}
		await Promise.all([startMain(), ...workerEnvs.map((_, i) => startWorker(i))]);
		await probeWebhooks();
	} catch (err) {
		await stopAll();
		await dropState().catch(() => {});
		const message = err instanceof Error ? err.message : String(err);
		throw new Error(`${message}\n(instance folder kept for inspection: ${dir})`);
	}

	const instance: N8nInstance = {
		baseUrl,
		webhookUrl,
		dir,
		userFolder,
		logFile,
		databaseName,
		databaseUrl: instanceDbUrl,
		env,
		install,
		get pid() {
			return main && !main.done ? main.child.pid : undefined;
		},
		get running() {
			return !!main && !main.done;
		},
		stop: async () => {
			if (stopped) return;
			stopped = true;
			await stopAll();
			if (keep) {
				log(`kept n8n instance folder ${dir} and database ${databaseName}`);
				return;
			}
			await dropState().catch((e: unknown) => log(`could not drop ${databaseName}: ${String(e)}`));
			rmSync(dir, { recursive: true, force: true });
		},
		kill: async (signal: NodeJS.Signals = 'SIGKILL') => {
			await stopProc(main, signal, signal === 'SIGKILL' ? 10_000 : 30_000);
		},
		restart: async () => {
			if (stopped) throw new Error('instance was stopped');
			await stopProc(main, 'SIGTERM', 20_000);
			await startMain();
			await probeWebhooks();
		},
		cli,
		importCredentials,
		importWorkflows,
		publish,
		unpublish,
		activeWorkflowIds,
		waitForWebhook,
		loadedNodeTypes: () => {
			const file = join(userFolder, '.cache', 'n8n', 'public', 'types', 'nodes.json');
			const types = JSON.parse(readFileSync(file, 'utf8')) as Array<{ name: string }>;
			return [...new Set(types.map((t) => t.name))];
		},
		logTail,
		workers: {
			count: workerEnvs.length,
			logFile: workerLogFile,
			kill: async (i, signal: NodeJS.Signals = 'SIGKILL') => {
				await stopProc(workerProcs[i], signal, signal === 'SIGKILL' ? 10_000 : 30_000);
			},
			restart: async (i) => {
				await stopProc(workerProcs[i], 'SIGTERM', 20_000);
				await startWorker(i);
			},
		},
	};
	return instance;
}

/** Lists `*.json` workflow files in a folder (helper for callers that publish every workflow). */
export function workflowIdsIn(dirPath: string): string[] {
	return readdirSync(dirPath)
		.filter((f) => f.endsWith('.json'))
		.map((f) => (JSON.parse(readFileSync(join(dirPath, f), 'utf8')) as { id?: unknown }).id)
		.filter((id): id is string => typeof id === 'string');
}
