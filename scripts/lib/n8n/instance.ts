/**
 * One running n8n: its folder, its database, its main process (and workers in queue mode).
 * `N8nInstance.start(options)` returns once n8n is healthy, has applied every publication and
 * every `webhooks` probe answers (see readiness.ts); `stop()` ends the processes, drops the
 * database and removes the folder, and so does the cleanup registry if the process ends first.
 */
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { run, tail, type RunResult } from '../cache';
import { registerCleanup, type CleanupHandle } from '../cleanup';
import { freePort } from '../postgres';
import { spawnGroup, stopGroup, trackChild, type GroupProcess } from '../processes';
import * as cliOps from './cli';
import { n8nEnvironment } from './config';
import {
	createDatabase,
	dropDatabase,
	instanceDatabase,
	redisDeleteByPrefix,
	type InstanceDatabase,
} from './database';
import { ensureN8n, type N8nInstall } from './install';
import type { StartN8nOptions } from './options';
import {
	assertPackagesLoaded,
	waitForPublications,
	waitForWebhook,
	waitHealthy,
	type Watched,
} from './readiness';

type Log = (line: string) => void;

export type { StartN8nOptions, WebhookProbe } from './options';

const secondsSince = (started: number) => `${((Date.now() - started) / 1000).toFixed(1)} s`;

export class N8nInstance {
	readonly baseUrl: string;
	readonly userFolder: string;
	readonly logFile: string;
	readonly databaseName: string;
	/** URL of this instance's n8n database. */
	readonly databaseUrl: string;
	/** Environment n8n runs with. */
	readonly env: Record<string, string>;
	/** Queue mode only; each worker logs to `<dir>/worker-<i>.log`. */
	readonly workers: {
		count: number;
		logFile(index: number): string;
		kill(index: number, signal?: NodeJS.Signals): Promise<void>;
		restart(index: number): Promise<void>;
	};
	private main: GroupProcess | undefined;
	private readonly workerProcs: Array<GroupProcess | undefined> = [];
	private readonly workerEnvs: Array<Record<string, string>> = [];
	private readonly published = new Set<string>();
	private stopped = false;
	private readonly cleanup: CleanupHandle;
	private readonly log: Log;

	private constructor(
		private readonly opts: StartN8nOptions,
		readonly install: N8nInstall,
		readonly dir: string,
		private readonly database: InstanceDatabase,
		port: number,
		brokerPort: number,
	) {
		this.log = opts.log ?? (() => {});
		this.baseUrl = `http://127.0.0.1:${port}`;
		this.userFolder = join(dir, 'user');
		mkdirSync(this.userFolder, { recursive: true });
		const tmpDir = join(dir, 'tmp');
		mkdirSync(tmpDir, { recursive: true });
		this.logFile = join(dir, 'n8n.log');
		this.databaseName = database.name;
		this.databaseUrl = database.url;
		this.env = n8nEnvironment({
			install,
			userFolder: this.userFolder,
			tmpDir,
			port,
			brokerPort,
			databaseName: database.name,
			databaseEnv: database.env,
			queue: opts.queue,
			extra: opts.env,
		});
		const workerLogFile = (i: number) => join(dir, `worker-${i}.log`);
		this.workers = {
			count: 0,
			logFile: workerLogFile,
			kill: async (i, signal: NodeJS.Signals = 'SIGKILL') =>
				await stopGroup(this.workerProcs[i], signal, signal === 'SIGKILL' ? 10_000 : 30_000),
			restart: async (i) => {
				await stopGroup(this.workerProcs[i], 'SIGTERM', 20_000);
				await this.startWorker(i);
			},
		};
		this.cleanup = registerCleanup(
			`n8n at ${this.baseUrl}`,
			() => this.tearDown(),
			() => {
				if (!this.keep) rmSync(dir, { recursive: true, force: true });
			},
		);
	}

	static async start(opts: StartN8nOptions): Promise<N8nInstance> {
		const install = await ensureN8n({ version: opts.version, log: opts.log });
		const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'n8n-e2e-'));
		mkdirSync(dir, { recursive: true });
		const database = instanceDatabase(opts.databaseUrl);
		const instance = new N8nInstance(
			opts,
			install,
			dir,
			database,
			await freePort(),
			await freePort(),
		);
		instance.log(
			`n8n instance in ${dir} (port ${new URL(instance.baseUrl).port}, database ${database.name})`,
		);
		try {
			await createDatabase(opts.databaseUrl, database.name);
			await instance.prepare();
			await Promise.all([
				instance.startMain(),
				...instance.workerEnvs.map((_, i) => instance.startWorker(i)),
			]);
			await instance.probeWebhooks();
		} catch (err) {
			const message = err instanceof Error ? err.message : String(err);
			await instance.stop();
			throw new Error(
				instance.keep
					? `${message}\n(instance folder kept for inspection: ${dir})`
					: `${message}\n(N8N_E2E_KEEP=1 keeps the instance folder for inspection)`,
			);
		}
		return instance;
	}

	private get keep(): boolean {
		return this.opts.keep ?? process.env.N8N_E2E_KEEP === '1';
	}

	private watched(proc: () => GroupProcess | undefined, file = this.logFile): Watched {
		return {
			exited: () => {
				const p = proc();
				return !p || p.done;
			},
			logTail: (lines) => this.logTail(lines, file),
			logFile: file,
			log: this.log,
			timeoutMs: this.opts.startTimeoutMs ?? 180_000,
		};
	}

	private async prepare(): Promise<void> {
		const opts = this.opts;
		const tarballs =
			opts.packageTarball === undefined ? [] : ([] as string[]).concat(opts.packageTarball);
		const started = Date.now();
		if (tarballs.length > 0)
			await cliOps.installPackages(this.userFolder, tarballs, this.log, (text) =>
				this.appendLog(text),
			);
		if (opts.credentials?.length) {
			this.log(`importing ${opts.credentials.length} credential(s) (n8n import:credentials)`);
			await this.importCredentials(opts.credentials);
		}
		const count = (opts.workflows?.length ?? 0) + (opts.workflowFiles?.length ?? 0);
		this.log(`importing ${count || 'the'} workflows (n8n import:workflow)`);
		await this.importWorkflows({
			dir: opts.workflowsDir,
			files: opts.workflowFiles,
			workflows: opts.workflows,
		});
		if (opts.publishIds && opts.publishIds.length > 0) {
			this.log(`publishing ${opts.publishIds.length} workflows (n8n publish:workflow)`);
			await this.publish(opts.publishIds);
		}
		this.log(`n8n prepared in ${secondsSince(started)}`);
		for (let i = 0; i < (opts.queue?.workers ?? (opts.queue ? 1 : 0)); i++) {
			this.workerEnvs.push({
				...this.env,
				N8N_RUNNERS_BROKER_PORT: String(await freePort()),
				QUEUE_HEALTH_CHECK_ACTIVE: 'true',
				QUEUE_HEALTH_CHECK_PORT: String(await freePort()),
			});
		}
		this.workers.count = this.workerEnvs.length;
	}

	private appendLog(text: string): void {
		appendFileSync(this.logFile, text);
	}

	/** Pid of the main n8n process (undefined when not running). */
	get pid(): number | undefined {
		return this.main && !this.main.done ? this.main.child.pid : undefined;
	}

	get running(): boolean {
		return !!this.main && !this.main.done;
	}

	/** `${baseUrl}/webhook/${path}` */
	webhookUrl(path: string): string {
		return `${this.baseUrl}/webhook/${path.replace(/^\/+/, '')}`;
	}

	/** Last lines of n8n.log (or of another file, e.g. a worker log). */
	logTail(lines = 80, file = this.logFile): string {
		try {
			return tail(readFileSync(file, 'utf8'), lines);
		} catch {
			return '(no log)';
		}
	}

	/** Runs `n8n <args>` with the instance environment (output also appended to the log). */
	async cli(args: string[]): Promise<RunResult> {
		this.appendLog(`\n$ n8n ${args.join(' ')}\n`);
		// CLI runs get their own broker port so they never collide with a running main, and plain
		// info logging because list:workflow prints its result through the logger.
		const env = {
			...this.env,
			N8N_RUNNERS_BROKER_PORT: String(await freePort()),
			N8N_LOG_LEVEL: 'info',
		};
		return await run(this.install.node24, [this.install.n8nBin, ...args], {
			cwd: this.dir,
			env,
			onOutput: (text) => this.appendLog(text),
			onSpawn: (child) => trackChild(child, `n8n ${args[0]}`),
			timeoutMs: 10 * 60_000,
		});
	}

	private readonly runCli = (args: string[]) => this.cli(args);

	async importCredentials(credentials: object[]): Promise<void> {
		await cliOps.importCredentials(this.runCli, this.dir, credentials);
	}

	async importWorkflows(sources: cliOps.WorkflowSources): Promise<void> {
		await cliOps.importWorkflows(this.runCli, this.dir, sources);
	}

	/** Publishes via the CLI and verifies; a running main only picks this up after restart(). */
	async publish(ids: string[]): Promise<void> {
		await cliOps.setPublished(this.runCli, ids, true, () => this.logTail(40), this.log);
		for (const id of ids) this.published.add(id);
	}

	async unpublish(ids: string[]): Promise<void> {
		await cliOps.setPublished(this.runCli, ids, false, () => this.logTail(40), this.log);
		for (const id of ids) this.published.delete(id);
	}

	async activeWorkflowIds(): Promise<string[]> {
		return await cliOps.activeWorkflowIds(this.runCli);
	}

	/** Polls until the production webhook is registered; returns the first real answer. */
	async waitForWebhook(
		path: string,
		init?: RequestInit,
		o: { timeoutMs?: number } = {},
	): Promise<{ status: number; body: string }> {
		return await waitForWebhook(this.webhookUrl(path), init, {
			...this.watched(() => this.main),
			timeoutMs: o.timeoutMs ?? 120_000,
		});
	}

	/**
	 * Node type names n8n loaded at its last start (e.g. `n8n-nodes-durable-jobs.jobEnqueue`), read
	 * from the types file n8n generates for its editor under the user folder.
	 */
	loadedNodeTypes(): string[] {
		const file = join(this.userFolder, '.cache', 'n8n', 'public', 'types', 'nodes.json');
		const types = JSON.parse(readFileSync(file, 'utf8')) as Array<{ name: string }>;
		return [...new Set(types.map((t) => t.name))];
	}

	private async startWorker(i: number): Promise<void> {
		const env = this.workerEnvs[i];
		if (!env) throw new Error(`no worker ${i}`);
		const file = this.workers.logFile(i);
		appendFileSync(file, `\n$ n8n worker\n`);
		const concurrency = this.opts.queue?.concurrency;
		const args = [
			this.install.n8nBin,
			'worker',
			...(concurrency ? [`--concurrency=${concurrency}`] : []),
		];
		const started = Date.now();
		this.workerProcs[i] = spawnGroup(
			this.install.node24,
			args,
			env,
			this.dir,
			file,
			`n8n worker #${i}`,
		);
		await waitHealthy(
			`http://127.0.0.1:${env.QUEUE_HEALTH_CHECK_PORT}/healthz`,
			`n8n worker #${i}`,
			this.watched(() => this.workerProcs[i], file),
		);
		this.log(`n8n worker #${i} healthy after ${secondsSince(started)}`);
	}

	/** `quiet`: one line instead of one per step (restarts in a kill loop). */
	private async startMain(quiet = false): Promise<void> {
		const started = Date.now();
		const log = quiet ? () => undefined : this.log;
		this.appendLog(`\n$ n8n start\n`);
		const logOffset = statSync(this.logFile).size;
		log('starting n8n');
		this.main = spawnGroup(
			this.install.node24,
			[this.install.n8nBin, 'start'],
			this.env,
			this.dir,
			this.logFile,
			'n8n',
		);
		const watched = { ...this.watched(() => this.main), log };
		await waitHealthy(`${this.baseUrl}/healthz/readiness`, 'n8n', watched);
		assertPackagesLoaded(
			readFileSync(this.logFile).subarray(logOffset).toString('utf8'),
			this.logFile,
		);
		const healthy = Date.now();
		log(`n8n healthy after ${secondsSince(started)}`);
		await waitForPublications(this.databaseUrl, [...this.published], new Date(started), {
			...watched,
			allowActivationErrors: this.opts.allowActivationErrors ?? false,
		});
		if (quiet)
			this.log(
				`n8n healthy at ${this.baseUrl} after ${((healthy - started) / 1000).toFixed(1)} s, ` +
					`workflows published after ${secondsSince(started)}`,
			);
		else if (this.published.size > 0)
			log(`n8n published ${this.published.size} workflows after ${secondsSince(started)}`);
	}

	// In queue mode a probe needs a worker to answer, so probing comes after the workers started.
	private async probeWebhooks(quiet = false): Promise<void> {
		const probes = this.opts.webhooks ?? [];
		if (probes.length === 0) return;
		const started = Date.now();
		if (!quiet)
			this.log(
				`waiting for n8n webhooks (${probes.map((probe) => probe.path.split('?')[0]).join(', ')})`,
			);
		for (const probe of probes) await this.waitForWebhook(probe.path, probe.init);
		if (!quiet) this.log(`webhooks answering after ${secondsSince(started)}`);
	}

	private async dropState(): Promise<void> {
		if (this.opts.queue) {
			for (const prefix of [this.env.QUEUE_BULL_PREFIX, this.env.N8N_REDIS_KEY_PREFIX]) {
				await redisDeleteByPrefix(
					this.env.QUEUE_BULL_REDIS_HOST ?? '127.0.0.1',
					Number(this.env.QUEUE_BULL_REDIS_PORT ?? 6379),
					prefix,
				);
			}
		}
		await dropDatabase(this.opts.databaseUrl, this.databaseName);
	}

	private async stopProcesses(): Promise<void> {
		await Promise.all([
			stopGroup(this.main, 'SIGTERM', 20_000),
			...this.workerProcs.map((w) => stopGroup(w, 'SIGTERM', 20_000)),
		]);
	}

	/** Ends n8n (and workers); then drops the database and removes the folder unless `keep`. */
	async stop(): Promise<void> {
		// One run for every caller; registered until it ends, so if the process dies while n8n
		// is stopping (up to 20 s), the synchronous cleanup on exit still removes the folder.
		await this.cleanup.run();
	}

	private async tearDown(): Promise<void> {
		this.stopped = true;
		await this.stopProcesses();
		if (this.keep) {
			this.log(`kept n8n instance folder ${this.dir} and database ${this.databaseName}`);
			return;
		}
		await this.dropState().catch((e: unknown) =>
			this.log(`could not drop ${this.databaseName}: ${String(e)}`),
		);
		rmSync(this.dir, { recursive: true, force: true });
	}

	/** Sends `signal` (default SIGKILL) to the main process group and waits for it to exit. */
	async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
		await stopGroup(this.main, signal, signal === 'SIGKILL' ? 10_000 : 30_000);
	}

	/** Stops main (gracefully) if it runs, starts it again on the same folder, database and port. */
	async restart(): Promise<void> {
		if (this.stopped) throw new Error('instance was stopped');
		await stopGroup(this.main, 'SIGTERM', 20_000);
		await this.startMain(true);
		await this.probeWebhooks(true);
	}
}
