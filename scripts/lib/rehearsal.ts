/**
 * Fault rehearsal: the failure story of SPEC §1 played against the real parts. Shared by
 * `test/e2e/fault-rehearsal.test.ts` (a short rehearsal) and `npm run rehearsal` (the full one,
 * which writes its figures to docs/RELIABILITY.md).
 *
 * Kill rehearsal — `runKillRehearsal(env, config)`:
 *   A submitter keeps `inFlight` jobs of this run alive through the real receiver webhook (each
 *   with its own Idempotency-Key, retried with the same key until it gets a 202). The stand-in
 *   AI answers after `aiLatencyMs`, the stand-in CRM stores the record and answers after
 *   `crmDelayMs`. The main n8n process is SIGKILLed `kills` times; each kill aims at one window
 *   (T1…T4 in turn; T0 is always populated) at a random moment inside it, and catches whatever
 *   else is in flight. One second after the kill (PostgreSQL has finished what it received),
 *   every job of the run is classified from the database plus the AI/CRM journals:
 *
 *     T0  queued, not leased
 *     T1  leased, worker not started: no request of this attempt reached the AI yet
 *     T2  worker running before the CRM call: the AI got this attempt's request, the CRM did not
 *         (the worker records its checkpoint `crm_request` at the end of this window)
 *     T3  the CRM got the request and stored the record, its answer is still delayed
 *     T4  the CRM answered, Job Complete not committed (the job is still `running`)
 *     R   the attempt died at an earlier kill and its lease has not been taken over yet
 *
 *   n8n is restarted (same folder, database and port) after every kill. After the last one the
 *   submitter stops and the run continues until quiet; then the final state is checked,
 *   including the reconciliation report against the journals: its rows with a checkpoint
 *   ("check the CRM") must be the attempts that reached the CRM, plus only those killed between
 *   checkpoint and request. Everything is returned as figures plus a list of violations (empty =
 *   every check held).
 *
 * Outage — `runOutageScenario`: the job database goes away for a few seconds mid-run while
 * n8n's own database stays up, and comes back without restarting n8n: by default its private
 * PostgreSQL is really restarted (fast shutdown, same data and port); with the job database on
 * a shared server, the environment's TCP proxy cuts it instead.
 * Slow worker — `runSlowWorkerScenario`: one job's CRM answer outlasts the lease (past the
 * checkpoint), and another job's AI answer does (before it: the checkpoint stops the attempt).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';

import pg from 'pg';

import { startEnvironment, workflowNode, type Environment } from './environment';
import { startEmbeddedPostgres, type EmbeddedServer } from './postgres';

export const DISPATCHER_ID = 'DjDispatcher0001';
export const WORKER_ID = 'DjWorker00000001';
/**
 * The workflow whose executions run the jobs: the Dispatcher starts from Job Trigger and runs
 * the Worker's steps itself, one execution per job. (The Worker workflow serves the polling
 * Dispatcher template, which the rehearsal does not publish.)
 */
export const JOB_WORKFLOW_ID = DISPATCHER_ID;
/** Backstop sweep of the Dispatcher's Job Trigger during the rehearsal (bundled: 30 s). */
export const REHEARSAL_BACKSTOP_SECONDS = 5;
export const RECEIVER_ID = 'DjReceiver000001';
/** The Worker's heartbeat right before the CRM call, and the checkpoint it records. */
export const CHECKPOINT_NODE = 'Checkpoint: CRM request';
export const CRM_CHECKPOINT = 'crm_request';
const QUEUE = 'documents';

export const WINDOWS = ['T0', 'T1', 'T2', 'T3', 'T4'] as const;
export type Window = (typeof WINDOWS)[number];
export const WINDOW_LABELS: Record<Window, string> = {
	T0: 'queued, not leased',
	T1: 'leased, worker not started (no request of the attempt reached the AI)',
	T2: 'worker running, before the CRM call (AI request sent)',
	T3: 'CRM request sent and record stored, answer not received (CRM delays it)',
	T4: 'CRM answered, before Job Complete',
};
const TARGETS: Window[] = ['T1', 'T2', 'T3', 'T4'];

type Log = (line: string) => void;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** mulberry32: a small seeded generator, so a rehearsal's kill plan can be replayed. */
export function seededRandom(seed: number): () => number {
	let state = seed >>> 0;
	return () => {
		state = (state + 0x6d2b79f5) >>> 0;
		let t = state;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}

// ---------------------------------------------------------------------------------------------
// environment

/** How the outage takes the job database away: a restart of its own server, or a TCP proxy cut. */
export type OutageKind = 'restart' | 'cut';

export interface RehearsalEnvironmentOptions {
	/** n8n's own database; with the outage `cut` also the job database. */
	databaseUrl: string;
	/**
	 * `restart` (default): the job database gets a private embedded PostgreSQL, whatever
	 * `databaseUrl` is, so the outage can restart it without touching n8n's database. `cut`: the
	 * job database stays on `databaseUrl` (a server that must not be restarted) and the outage
	 * cuts it with the TCP proxy.
	 */
	outage?: OutageKind;
	schema: string;
	/** Lease of the Dispatcher's Job Trigger and of the Worker's checkpoint (the bundled workflows say 120 s). */
	leaseSeconds: number;
	pollSeconds?: number;
	log?: Log;
}

/** Header the rehearsal adds to the Worker's AI and CRM requests, so journals name the attempt. */
export const ATTEMPT_HEADER = 'X-Attempt-Id';

export interface RehearsalEnvironment extends Environment {
	/** The job database's private server when the outage restarts it; stop() destroys it. */
	jobsServer: EmbeddedServer | undefined;
}

/**
 * The rehearsal's environment (see `startEnvironmentWithRehearsalChanges`), with the job
 * database on a private embedded PostgreSQL unless `outage` is `cut`.
 */
export async function startRehearsalEnvironment(
	options: RehearsalEnvironmentOptions,
): Promise<RehearsalEnvironment> {
	const log = options.log ?? (() => undefined);
	let jobsServer: EmbeddedServer | undefined;
	if ((options.outage ?? 'restart') === 'restart') {
		jobsServer = await startEmbeddedPostgres((line) => {
			if (process.env.DEBUG_POSTGRES) log(`[job database] ${line.trimEnd()}`);
		});
		log(
			`job database: private embedded PostgreSQL on 127.0.0.1:${jobsServer.port} (n8n's own database stays on its server)`,
		);
	}
	let env: Environment;
	try {
		env = await startEnvironmentWithRehearsalChanges(options, jobsServer?.url);
	} catch (error) {
		await jobsServer?.destroy().catch(() => undefined);
		throw error;
	}
	return {
		...env,
		jobsServer,
		stop: async () => {
			try {
				await env.stop();
			} finally {
				await jobsServer?.destroy();
			}
		},
	};
}

/**
 * The standard environment (real n8n, packed package, every bundled workflow) with two changes
 * to the imported copies: the lease is short — the Dispatcher's Job Trigger's, and the one the
 * Worker's checkpoint extends to (its Config `lease_seconds`) — and so is the trigger's
 * backstop sweep, so jobs of a killed worker come back quickly; and the Worker's two HTTP
 * requests carry an `X-Attempt-Id` header (observation only:
 * the stand-ins journal it, nothing acts on it), so every AI and CRM request can be attributed
 * to the attempt that sent it — including a stale attempt running next to its successor.
 */
async function startEnvironmentWithRehearsalChanges(
	options: RehearsalEnvironmentOptions,
	jobsDatabaseUrl: string | undefined,
): Promise<Environment> {
	return await startEnvironment({
		databaseUrl: options.databaseUrl,
		jobsDatabaseUrl,
		schema: options.schema,
		pollSeconds: options.pollSeconds ?? 1,
		log: options.log,
		// The end-of-run checks read the job executions of the whole run; n8n would prune beyond
		// 10,000 executions.
		n8nEnv: { EXECUTIONS_DATA_PRUNE: 'false' },
		customize: (workflows) => {
			const trigger = workflowNode(workflows, DISPATCHER_ID, 'Job Trigger');
			if (typeof trigger.parameters.leaseSeconds !== 'number')
				throw new Error('Dispatcher Job Trigger has no numeric leaseSeconds to override');
			trigger.parameters.leaseSeconds = options.leaseSeconds;
			trigger.parameters.options = {
				...(trigger.parameters.options as Record<string, unknown>),
				backstopSeconds: REHEARSAL_BACKSTOP_SECONDS,
			};
			// The Worker's steps, in the Dispatcher (what runs) and in the Worker (the polling
			// template's sub-workflow), get the same changes.
			for (const workflowId of [DISPATCHER_ID, WORKER_ID]) {
				// Without this the checkpoint would extend every lease to the bundled 120 s.
				const config = workflowNode(workflows, workflowId, 'Config').parameters.assignments as
					| { assignments: Array<{ name: string; value: unknown }> }
					| undefined;
				const workerLease = config?.assignments.find(
					(assignment) => assignment.name === 'lease_seconds',
				);
				if (!workerLease || typeof workerLease.value !== 'number')
					throw new Error(`${workflowId} Config has no numeric lease_seconds to override`);
				workerLease.value = options.leaseSeconds;
				const checkpoint = workflowNode(workflows, workflowId, CHECKPOINT_NODE);
				if (
					checkpoint.parameters.operation !== 'extendLease' ||
					checkpoint.parameters.checkpoint !== CRM_CHECKPOINT
				) {
					throw new Error(
						`${workflowId} node ${CHECKPOINT_NODE} does not extend the lease with checkpoint ${CRM_CHECKPOINT}`,
					);
				}
				if (!String(checkpoint.parameters.leaseSeconds).includes('lease_seconds'))
					throw new Error(
						`${workflowId} node ${CHECKPOINT_NODE} does not take its lease from Config lease_seconds`,
					);
				for (const name of ['Call AI', 'Create CRM record']) {
					const headers = workflowNode(workflows, workflowId, name).parameters.headerParameters as
						| { parameters: Array<{ name: string; value: string }> }
						| undefined;
					if (!headers) throw new Error(`${workflowId} node ${name} sends no headers`);
					headers.parameters.push({
						name: ATTEMPT_HEADER,
						value: "={{ $('Config').item.json.attempt_id }}",
					});
				}
			}
		},
	});
}

// ---------------------------------------------------------------------------------------------
// database and journal views

interface JobRow {
	id: string;
	status: string;
	attempts: number;
	max_attempts: number;
	attempt_id: string | null;
	lease_until: Date | null;
	result: { crm_record_id?: string | null; fields?: { name?: string | null } | null } | null;
	error_code: string | null;
	doc_id: string;
}

interface AttemptRow {
	attempt_id: string;
	job_id: string;
	attempt: number;
	started_at: Date;
	lease_until: Date | null;
	finished_at: Date | null;
	outcome: string | null;
	error_code: string | null;
	checkpoint: string | null;
	checkpoint_at: Date | null;
}

interface CallView {
	at: number;
	attemptId: string | null;
}

interface CrmView extends CallView {
	key: string | null;
	status: number | string;
	createdRecordId: string | null;
	recordId: string | null;
	replayed: boolean;
	responded: boolean;
	answerDelayMs: number;
}

interface Snapshot {
	at: number;
	jobs: JobRow[];
	attempts: AttemptRow[];
	/** AI requests by attempt id. */
	ai: Map<string, CallView[]>;
	/** CRM requests by Idempotency-Key (the job id). */
	crm: Map<string, CrmView[]>;
}

function quoteSchema(schema: string): string {
	if (!/^[a-z_][a-z0-9_]{0,49}$/.test(schema)) throw new Error(`unexpected schema name ${schema}`);
	return `"${schema}"`;
}

function attemptHeader(headers: Record<string, string | string[] | undefined>): string | null {
	const value = headers[ATTEMPT_HEADER.toLowerCase()];
	return (Array.isArray(value) ? value[0] : value) ?? null;
}

async function readJobs(env: Environment, prefix: string): Promise<JobRow[]> {
	const s = quoteSchema(env.schema);
	const { rows } = await env.jobsDb.query<JobRow>(
		`SELECT id, status, attempts, max_attempts, attempt_id, lease_until, result, error_code,
			payload->'document'->>'id' AS doc_id
		FROM ${s}.jobs WHERE queue = $1 AND payload->'document'->>'id' LIKE $2 || '%'`,
		[QUEUE, prefix],
	);
	return rows;
}

const ATTEMPT_COLUMNS =
	'a.attempt_id, a.job_id, a.attempt, a.started_at, a.lease_until, a.finished_at, a.outcome, a.error_code, a.checkpoint, a.checkpoint_at';

async function readAttempts(env: Environment, prefix: string): Promise<AttemptRow[]> {
	const s = quoteSchema(env.schema);
	const { rows } = await env.jobsDb.query<AttemptRow>(
		`SELECT ${ATTEMPT_COLUMNS}
		FROM ${s}.job_attempts a JOIN ${s}.jobs j ON j.id = a.job_id
		WHERE j.queue = $1 AND j.payload->'document'->>'id' LIKE $2 || '%'
		ORDER BY a.job_id, a.attempt`,
		[QUEUE, prefix],
	);
	return rows;
}

function aiView(env: Environment): Map<string, CallView[]> {
	const byAttempt = new Map<string, CallView[]>();
	for (const call of env.standins.ai.calls) {
		const attemptId = attemptHeader(call.headers);
		if (attemptId === null) continue;
		const list = byAttempt.get(attemptId) ?? [];
		list.push({ at: Date.parse(call.at), attemptId });
		byAttempt.set(attemptId, list);
	}
	return byAttempt;
}

function crmView(env: Environment): Map<string, CrmView[]> {
	const byKey = new Map<string, CrmView[]>();
	for (const entry of env.standins.crm.journal) {
		if (entry.method !== 'POST' || entry.path !== '/records' || entry.key === null) continue;
		const list = byKey.get(entry.key) ?? [];
		list.push({
			at: Date.parse(entry.at),
			attemptId: attemptHeader(entry.headers),
			key: entry.key,
			status: entry.status,
			createdRecordId: entry.createdRecordId,
			recordId: entry.recordId,
			replayed: entry.replayed,
			responded: entry.responded,
			answerDelayMs: entry.answerDelayMs,
		});
		byKey.set(entry.key, list);
	}
	return byKey;
}

async function snapshot(env: Environment, prefix: string): Promise<Snapshot> {
	const [jobs, attempts] = await Promise.all([readJobs(env, prefix), readAttempts(env, prefix)]);
	return { at: Date.now(), jobs, attempts, ai: aiView(env), crm: crmView(env) };
}

// ---------------------------------------------------------------------------------------------
// n8n execution data (what an operator sees in n8n)

interface ExecutionRow {
	id: string;
	workflowId: string;
	status: string;
	startedAt: Date | null;
	stoppedAt: Date | null;
	data: string;
}

async function readExecutions(
	env: Environment,
	sql: string,
	values: unknown[],
): Promise<ExecutionRow[]> {
	const client = new pg.Client({ connectionString: env.n8n.databaseUrl });
	await client.connect();
	try {
		const { rows } = await client.query<ExecutionRow>(sql, values);
		return rows;
	} finally {
		await client.end();
	}
}

interface RunError {
	message?: string;
	description?: string | null;
	messages?: string[];
}

type RunData = Record<
	string,
	Array<{
		data?: { main?: Array<Array<{ json: Record<string, unknown> }> | null> };
		error?: RunError;
	}>
>;

/** n8n stores run data with `flatted`; use n8n's own copy to read it. */
function parseRunData(env: Environment, data: string): RunData {
	const requireFromN8n = createRequire(
		join(env.n8n.install.installDir, 'node_modules', 'n8n', 'package.json'),
	);
	const flatted = requireFromN8n('flatted') as { parse(text: string): unknown };
	const parsed = flatted.parse(data) as { resultData?: { runData?: RunData } };
	return parsed.resultData?.runData ?? {};
}

/**
 * State of the executions running a job that n8n had not finished when it died: `new`
 * (created for the Job Trigger's emission, not started — n8n 2.x runs these again at boot) or
 * `running` (n8n marks these crashed at boot). Keyed by the attempt id in their input.
 */
async function workerExecutionStates(
	env: Environment,
	attemptIds: string[],
): Promise<Map<string, string>> {
	const states = new Map<string, string>();
	if (attemptIds.length === 0) return states;
	const rows = await readExecutions(
		env,
		`SELECT e.id::text AS id, e."workflowId" AS "workflowId", e.status, e."startedAt" AS "startedAt", e."stoppedAt" AS "stoppedAt", d.data
		FROM execution_entity e JOIN execution_data d ON d."executionId" = e.id
		WHERE e."workflowId" = $1 AND e.status IN ('new', 'running')`,
		[JOB_WORKFLOW_ID],
	);
	for (const attemptId of attemptIds) {
		const row = rows.find((candidate) => candidate.data.includes(attemptId));
		if (row) states.set(attemptId, row.status);
	}
	return states;
}

export interface NodeRoutes {
	/** Items of the attempt on the node's first output (Extended, Completed). */
	first: Array<Record<string, unknown>>;
	/** Items of the attempt on its second output (Lease Lost). */
	leaseLost: Array<Record<string, unknown>>;
}

/**
 * Where a fenced two-output node (Job Lease → Extend Lease, Job Complete) sent each attempt's
 * item, read from the finished Worker executions that carry the attempt id: what the operator
 * sees in n8n, independent of the job database.
 */
async function nodeRoutesByAttempt(
	env: Environment,
	nodeName: string,
	attemptIds: string[],
	since: Date,
): Promise<Map<string, NodeRoutes>> {
	const routes = new Map<string, NodeRoutes>();
	if (attemptIds.length === 0) return routes;
	const wanted = new Set(attemptIds);
	const rows = await readExecutions(
		env,
		`SELECT e.id::text AS id, e."workflowId" AS "workflowId", e.status, e."startedAt" AS "startedAt", e."stoppedAt" AS "stoppedAt", d.data
		FROM execution_entity e JOIN execution_data d ON d."executionId" = e.id
		WHERE e."workflowId" = $1 AND e."startedAt" >= $2 AND e."stoppedAt" IS NOT NULL AND d.data LIKE ANY($3::text[])`,
		[JOB_WORKFLOW_ID, since, attemptIds.map((attemptId) => `%${attemptId}%`)],
	);
	for (const row of rows) {
		for (const run of parseRunData(env, row.data)[nodeName] ?? []) {
			const outputs = run.data?.main ?? [];
			for (const [index, items] of outputs.entries()) {
				for (const item of items ?? []) {
					const attemptId = item.json.attempt_id;
					if (typeof attemptId !== 'string' || !wanted.has(attemptId)) continue;
					const entry = routes.get(attemptId) ?? { first: [], leaseLost: [] };
					(index === 1 ? entry.leaseLost : entry.first).push(item.json);
					routes.set(attemptId, entry);
				}
			}
		}
	}
	return routes;
}

// ---------------------------------------------------------------------------------------------
// submitter: keeps jobs in flight through the real receiver

interface Submission {
	key: string;
	docId: string;
	body: { document: { id: string; text: string } };
	jobId: string | null;
	tries: number;
	/** Tries that got no HTTP answer (connection refused/reset: n8n was down or died mid-request). */
	unanswered: number;
	answered503: number;
	/** HTTP 200 "n8n is starting up. Please wait": n8n's own answer to every request while it boots. */
	startingUp: number;
	/** A retry after an unanswered try got 202 with deduplicated: true — the first try committed. */
	recoveredLostAnswer: boolean;
	otherAnswers: string[];
}

class Submitter {
	readonly submissions = new Map<string, Submission>();
	readonly violations: string[] = [];
	private counter = 0;
	private stopped = false;
	private acceptingNew = true;
	private loop: Promise<void> | undefined;

	constructor(
		private readonly env: Environment,
		private readonly prefix: string,
		private readonly inFlight: number,
		private readonly concurrency: number,
	) {}

	start(): void {
		this.loop = this.run();
	}

	/** Stops creating new jobs; keeps retrying submissions that have no 202 yet. */
	stopNew(): void {
		this.acceptingNew = false;
	}

	pending(): Submission[] {
		return [...this.submissions.values()].filter((submission) => submission.jobId === null);
	}

	async stop(): Promise<void> {
		this.stopped = true;
		await this.loop;
	}

	private next(): Submission {
		this.counter++;
		const docId = `${this.prefix}${String(this.counter).padStart(5, '0')}`;
		const submission: Submission = {
			key: `key-${docId}`,
			docId,
			body: {
				document: {
					id: docId,
					text: `name: Rehearsal ${this.counter}, email r${this.counter}@example.com, amount: ${this.counter}.50`,
				},
			},
			jobId: null,
			tries: 0,
			unanswered: 0,
			answered503: 0,
			startingUp: 0,
			recoveredLostAnswer: false,
			otherAnswers: [],
		};
		this.submissions.set(submission.key, submission);
		return submission;
	}

	private async live(): Promise<number> {
		const s = quoteSchema(this.env.schema);
		const { rows } = await this.env.jobsDb.query<{ n: number }>(
			`SELECT count(*)::int AS n FROM ${s}.jobs WHERE queue = $1 AND status IN ('queued', 'running') AND payload->'document'->>'id' LIKE $2 || '%'`,
			[QUEUE, this.prefix],
		);
		return rows[0].n;
	}

	private async send(submission: Submission): Promise<boolean> {
		submission.tries++;
		let status: number;
		let text = '';
		let body: { job_id?: string; deduplicated?: boolean } = {};
		try {
			const response = await fetch(this.env.n8n.webhookUrl('jobs'), {
				method: 'POST',
				headers: { 'content-type': 'application/json', 'idempotency-key': submission.key },
				body: JSON.stringify(submission.body),
				signal: AbortSignal.timeout(30_000),
			});
			status = response.status;
			text = await response.text();
			try {
				body = JSON.parse(text) as typeof body;
			} catch {
				body = {};
			}
		} catch {
			submission.unanswered++;
			return false;
		}
		if (status === 202 && typeof body.job_id === 'string') {
			if (submission.jobId !== null && submission.jobId !== body.job_id) {
				this.violations.push(
					`key ${submission.key} answered two job ids: ${submission.jobId} and ${body.job_id}`,
				);
			}
			if (submission.unanswered > 0 && body.deduplicated === true)
				submission.recoveredLostAnswer = true;
			submission.jobId = body.job_id;
			return true;
		}
		if (status === 503) submission.answered503++;
		// While n8n boots it answers every request itself: 200 "n8n is starting up. Please wait"
		// (before its database is migrated), 404 "not registered", or 5xx. No job was taken: try again.
		else if (status === 200 && /n8n is starting up/i.test(text)) submission.startingUp++;
		else if (status !== 404 && status < 500)
			submission.otherAnswers.push(`${status} ${text.slice(0, 120)}`);
		return false;
	}

	private async run(): Promise<void> {
		while (!this.stopped) {
			let batch: Submission[] = this.pending().slice(0, this.concurrency);
			if (this.acceptingNew && batch.length < this.concurrency) {
				let live = 0;
				try {
					live = await this.live();
				} catch {
					live = this.inFlight;
				}
				const want = Math.min(
					this.concurrency - batch.length,
					this.inFlight - live - this.pending().length,
				);
				for (let i = 0; i < want; i++) batch = [...batch, this.next()];
			}
			if (batch.length === 0) {
				await sleep(150);
				continue;
			}
			const results = await Promise.all(batch.map((submission) => this.send(submission)));
			if (!results.some(Boolean)) await sleep(400);
		}
	}
}

// ---------------------------------------------------------------------------------------------
// classification at kill time

interface Classified {
	window: Window | 'R';
	attemptId: string | null;
}

function classify(snap: Snapshot, dead: Set<string>): Map<string, Classified> {
	const out = new Map<string, Classified>();
	for (const job of snap.jobs) {
		if (job.status === 'queued') {
			out.set(job.id, { window: 'T0', attemptId: null });
			continue;
		}
		if (job.status !== 'running' || job.attempt_id === null) continue;
		const attemptId = job.attempt_id;
		if (dead.has(attemptId)) {
			out.set(job.id, { window: 'R', attemptId });
			continue;
		}
		const crm = (snap.crm.get(job.id) ?? []).filter((entry) => entry.attemptId === attemptId);
		const ai = snap.ai.get(attemptId) ?? [];
		let window: Window;
		if (crm.length > 0) window = crm.some((entry) => entry.responded) ? 'T4' : 'T3';
		else if (ai.length > 0) window = 'T2';
		else window = 'T1';
		out.set(job.id, { window, attemptId });
	}
	return out;
}

// ---------------------------------------------------------------------------------------------
// kill rehearsal

export interface KillRehearsalConfig {
	kills: number;
	honourKeys: boolean;
	leaseSeconds: number;
	/** Jobs of the run kept queued or running (default 24). */
	inFlight?: number;
	/** Parallel receiver requests (default 4). */
	submitConcurrency?: number;
	aiLatencyMs?: number;
	crmDelayMs?: number;
	/** Random time n8n runs after a restart before the next kill is aimed (default 2–8 s). */
	minUpMs?: number;
	maxUpMs?: number;
	/** How long a kill waits for its target window before it kills anyway (default 20 s). */
	aimTimeoutMs?: number;
	drainTimeoutMs?: number;
	/** Prefix of this run's document ids (and keys); must be unique in the schema. */
	runId: string;
	/** Windows the kills aim at, in turn (default T1, T2, T3, T4). */
	targets?: Window[];
	seed?: number;
	log?: Log;
}

export interface KillRecord {
	n: number;
	target: Window;
	/** The target window was observed before the kill. */
	aimed: boolean;
	upMs: number;
	restartMs: number;
	windows: Record<Window, number>;
	/** T1 attempts by the state of their Worker execution in n8n: new (queued), running, none. */
	t1Workers: Record<string, number>;
	recovering: number;
}

/**
 * Why an attempt created a side effect (a CRM request) without its job recording that
 * attempt's result: it was killed in T3/T4, it was killed in T1 and n8n ran it again at boot
 * after its lease had been taken over, or it outlived its lease while alive.
 */
export type OrphanCause = 'T3' | 'T4' | 'T1 re-run at boot' | 'slow';
const CAUSES: OrphanCause[] = ['T3', 'T4', 'T1 re-run at boot', 'slow'];
/** Attempts still running after their lease was taken over: where the checkpoint can stop them. */
export type LateCause = 'T1 re-run at boot' | 'slow';
const LATE_CAUSES: LateCause[] = ['T1 re-run at boot', 'slow'];

export interface WindowFigures {
	/** (kill, job) pairs in this window. */
	pairs: number;
	/** Distinct jobs ever caught in this window. */
	jobs: number;
	/** Kills that caught at least one job in this window. */
	kills: number;
	/** Killed attempts n8n ran again at boot (a queued Worker execution): finished while holding the lease / after losing it. */
	rerunHeld: number;
	rerunSuperseded: number;
	/** Of the superseded: came out of the checkpoint on Lease Lost, so no CRM request. */
	rerunStoppedAtCheckpoint: number;
	/** Killed attempts whose CRM request exists (made before the kill, or by the re-run). */
	withCrmRequest: number;
}

export interface KillRehearsalResult {
	config: Required<Omit<KillRehearsalConfig, 'log' | 'seed'>> & { seed: number };
	startedAt: Date;
	durationMs: number;
	drainMs: number;
	kills: KillRecord[];
	windows: Record<Window, WindowFigures>;
	t1Workers: Record<string, number>;
	jobs: {
		submitted: number;
		accepted: number;
		inDb: number;
		done: number;
		failed: number;
		failedByCode: Record<string, number>;
		other: number;
		maxAttempts: number;
		killedMoreThanOnce: number;
	};
	submissions: {
		unansweredTries: number;
		answered503: number;
		startingUp: number;
		lostAnswersRecovered: number;
	};
	crm: {
		requests: number;
		created: number;
		replayed: number;
		jobsWithMoreThanOneRecord: number;
		extraRecords: number;
		/** Attempts whose CRM request has no recorded result, by cause. */
		orphans: Record<OrphanCause, number>;
		/** Honouring CRM: replays answered to a later attempt; ignoring CRM: extra records — by cause. */
		duplicatesByCause: Record<OrphanCause, number>;
		replaysByCause: Record<OrphanCause, number>;
	};
	report: {
		rows: number;
		jobs: number;
		leaseExpiredAttempts: number;
		/** The report lists exactly the attempts that ended lease_expired. */
		exact: boolean;
		/** Rows with a checkpoint ("check the CRM", `check_external_system`): attempts / jobs. */
		withCheckpoint: number;
		jobsToCheck: number;
		/** Rows without one ("no CRM call made", `no_external_call`): attempts / jobs. */
		withoutCheckpoint: number;
		jobsWithoutCheckpoint: number;
		/** Rows with a checkpoint: the CRM journal has the attempt's request / it was killed between checkpoint and request. */
		checkedWithCrmRequest: number;
		checkedKilledBeforeRequest: number;
		checkedKilledBeforeRequestByWindow: Partial<Record<Window, number>>;
		/** lease_expired attempts whose request the CRM journal holds. */
		leaseExpiredWithCrmRequest: number;
		/** The rows with a checkpoint are exactly the lease_expired attempts that recorded one. */
		checkpointRowsExact: boolean;
		/** "Check the CRM" = the lease_expired attempts that reached the CRM plus killed-in-between attempts; no row without a checkpoint reached the CRM. */
		checkListMatchesCrmRequests: boolean;
		/** Every attempt with a CRM request but no recorded result is listed with its checkpoint. */
		coversEveryOrphan: boolean;
		/** CRM records their job does not hold / of those created by an attempt under check_external_system. */
		unheldRecords: number;
		unheldRecordsListed: number;
	};
	/** Attempts that ran on after their lease was taken over: stopped at the checkpoint (Lease Lost, no CRM request) / reached the CRM anyway, by cause. */
	lateAttempts: {
		stoppedAtCheckpoint: Record<LateCause, number>;
		withCrmRequest: Record<LateCause, number>;
		/** No CRM request, and no finished Worker execution passed the checkpoint node (died again before it, or never handed to a worker). */
		noCrmRequestNotAtCheckpoint: Record<LateCause, number>;
	};
	attempts: {
		total: number;
		killed: number;
		rerunAtBoot: number;
		slow: number;
		leaseExpired: number;
		staleApplied: number;
	};
	/** Jobs running with an expired lease seen at kill time (awaiting recovery), max age in ms. */
	maxExpiredLeaseAgeMs: number;
	stuck: number;
	lost: number;
	violations: string[];
}

function emptyWindows(): Record<Window, number> {
	return { T0: 0, T1: 0, T2: 0, T3: 0, T4: 0 };
}

function byCause(): Record<OrphanCause, number> {
	return { T3: 0, T4: 0, 'T1 re-run at boot': 0, slow: 0 };
}

async function aimAt(
	env: Environment,
	target: Window,
	config: { aiLatencyMs: number; crmDelayMs: number; prefix: string; timeoutMs: number },
	random: () => number,
): Promise<boolean> {
	const armedAt = Date.now();
	const deadline = armedAt + config.timeoutMs;
	const s = quoteSchema(env.schema);
	if (target === 'T0') {
		await sleep(random() * 1_000);
		return true;
	}
	if (target === 'T1') {
		while (Date.now() < deadline) {
			const { rows } = await env.jobsDb.query<{ attempt_id: string }>(
				`SELECT j.attempt_id
				FROM ${s}.jobs j JOIN ${s}.job_attempts a ON a.attempt_id = j.attempt_id
				WHERE j.queue = $1 AND j.status = 'running' AND a.started_at > now() - interval '3 seconds'
					AND j.payload->'document'->>'id' LIKE $2 || '%'`,
				[QUEUE, config.prefix],
			);
			const calls = aiView(env);
			if (rows.some((row) => !calls.has(row.attempt_id))) {
				await sleep(random() * 30);
				return true;
			}
			await sleep(15);
		}
		return false;
	}
	if (target === 'T2') {
		while (Date.now() < deadline) {
			const call = env.standins.ai.calls.find((candidate) => Date.parse(candidate.at) >= armedAt);
			if (call) {
				const inside = Date.parse(call.at) + random() * 0.85 * config.aiLatencyMs;
				await sleep(Math.max(0, inside - Date.now()));
				return true;
			}
			await sleep(10);
		}
		return false;
	}
	const journal = env.standins.crm.journal;
	const from = journal.length;
	if (target === 'T3') {
		while (Date.now() < deadline) {
			const entry = journal
				.slice(from)
				.find((candidate) => candidate.path === '/records' && !candidate.responded);
			if (entry) {
				const inside = Date.parse(entry.at) + random() * 0.85 * config.crmDelayMs;
				await sleep(Math.max(0, inside - Date.now()));
				return true;
			}
			await sleep(10);
		}
		return false;
	}
	// T4: the moment a delayed CRM answer goes out, Job Complete is milliseconds away.
	const waiting = new Set(journal.filter((entry) => entry.path === '/records' && !entry.responded));
	while (Date.now() < deadline) {
		for (const entry of journal.slice(from))
			if (entry.path === '/records' && !entry.responded) waiting.add(entry);
		for (const entry of waiting) {
			if (entry.responded) {
				await sleep(random() * 25);
				return true;
			}
		}
		await sleep(2);
	}
	return false;
}

async function restartN8n(env: Environment, log: Log): Promise<void> {
	for (let attempt = 1; ; attempt++) {
		try {
			await env.n8n.restart();
			return;
		} catch (error) {
			if (attempt >= 3) throw error;
			log(
				`restart failed (${error instanceof Error ? error.message.split('\n')[0] : String(error)}); trying again`,
			);
			await sleep(2_000);
		}
	}
}

export interface ReportRow {
	job_id: string;
	stable_key: string;
	attempt_id: string;
	outcome: string;
	checkpoint: string | null;
	checkpoint_at: string | null;
	/** "may have happened" with a checkpoint, "not made" without. */
	external_call: string;
}

export interface ReconciliationReport {
	count: number;
	jobs: number;
	unknown_outcomes: ReportRow[];
	/** Rows with a checkpoint: look these keys up in the CRM. */
	check_external_system: { count: number; jobs: number; stable_keys: string[] };
	/** Rows without one: the CRM call was never made. */
	no_external_call: { count: number; jobs: number };
}

const EXTERNAL_CALL_MAY_HAVE_HAPPENED = 'may have happened';
const EXTERNAL_CALL_NOT_MADE = 'not made';

/** The reconciliation report, through the bundled workflow (GET /webhook/jobs/unknown-outcomes). */
export async function fetchReconciliationReport(env: Environment): Promise<ReconciliationReport> {
	const answer = await env.request(`jobs/unknown-outcomes?queue=${QUEUE}&limit=10000`);
	if (answer.status !== 200)
		throw new Error(`unknown-outcomes answered ${answer.status}: ${answer.text.slice(0, 300)}`);
	const report = answer.body as Partial<ReconciliationReport>;
	if (
		!Array.isArray(report.unknown_outcomes) ||
		!report.check_external_system ||
		!report.no_external_call
	) {
		throw new Error(
			`unknown-outcomes answered without unknown_outcomes / check_external_system / no_external_call: ${answer.text.slice(0, 300)}`,
		);
	}
	return report as ReconciliationReport;
}

export async function fetchUnknownOutcomes(env: Environment): Promise<ReportRow[]> {
	return (await fetchReconciliationReport(env)).unknown_outcomes;
}

/** The report's own arithmetic: totals and the two lists agree with its rows. */
export function reportConsistency(report: ReconciliationReport): string[] {
	const problems: string[] = [];
	const rows = report.unknown_outcomes;
	const distinctKeys = (list: ReportRow[]) => new Set(list.map((row) => row.stable_key));
	const checked = rows.filter((row) => row.checkpoint !== null);
	const unchecked = rows.filter((row) => row.checkpoint === null);
	if (report.count !== rows.length)
		problems.push(`report count ${report.count} for ${rows.length} rows`);
	if (report.jobs !== distinctKeys(rows).size)
		problems.push(`report jobs ${report.jobs} for ${distinctKeys(rows).size} distinct stable keys`);
	if (report.check_external_system.count !== checked.length)
		problems.push(
			`check_external_system.count ${report.check_external_system.count} for ${checked.length} rows with a checkpoint`,
		);
	if (report.check_external_system.jobs !== distinctKeys(checked).size)
		problems.push(
			`check_external_system.jobs ${report.check_external_system.jobs} for ${distinctKeys(checked).size} jobs with a checkpoint row`,
		);
	const listed = new Set(report.check_external_system.stable_keys);
	const expected = distinctKeys(checked);
	if (listed.size !== report.check_external_system.stable_keys.length)
		problems.push('check_external_system.stable_keys repeats a key');
	if (listed.size !== expected.size || [...expected].some((key) => !listed.has(key)))
		problems.push(
			'check_external_system.stable_keys are not the stable keys of the rows with a checkpoint',
		);
	if (report.no_external_call.count !== unchecked.length)
		problems.push(
			`no_external_call.count ${report.no_external_call.count} for ${unchecked.length} rows without a checkpoint`,
		);
	if (report.no_external_call.jobs !== distinctKeys(unchecked).size)
		problems.push(
			`no_external_call.jobs ${report.no_external_call.jobs} for ${distinctKeys(unchecked).size} jobs with a row without checkpoint`,
		);
	for (const row of rows) {
		const expectedCall =
			row.checkpoint !== null ? EXTERNAL_CALL_MAY_HAVE_HAPPENED : EXTERNAL_CALL_NOT_MADE;
		if (row.external_call !== expectedCall)
			problems.push(
				`report row of attempt ${row.attempt_id} (checkpoint ${row.checkpoint}) says external_call "${row.external_call}"`,
			);
		if ((row.checkpoint === null) !== (row.checkpoint_at === null))
			problems.push(
				`report row of attempt ${row.attempt_id}: checkpoint ${row.checkpoint} with checkpoint_at ${row.checkpoint_at}`,
			);
	}
	return problems;
}

async function waitQuiet(
	env: Environment,
	prefix: string,
	submitter: Submitter | undefined,
	timeoutMs: number,
): Promise<boolean> {
	const deadline = Date.now() + timeoutMs;
	const s = quoteSchema(env.schema);
	let lastCalls = -1;
	let stableSince = Date.now();
	while (Date.now() < deadline) {
		const { rows } = await env.jobsDb.query<{ n: number }>(
			`SELECT count(*)::int AS n FROM ${s}.jobs WHERE queue = $1 AND status IN ('queued', 'running') AND payload->'document'->>'id' LIKE $2 || '%'`,
			[QUEUE, prefix],
		);
		const calls = env.standins.crm.journal.length + env.standins.ai.calls.length;
		if (calls !== lastCalls) {
			lastCalls = calls;
			stableSince = Date.now();
		}
		// Quiet: nothing left to do and neither the AI nor the CRM has seen a request for 3 s
		// (a stale worker may still be running after its job finished).
		if (
			rows[0].n === 0 &&
			(submitter?.pending().length ?? 0) === 0 &&
			Date.now() - stableSince > 3_000
		)
			return true;
		await sleep(500);
	}
	return false;
}

interface KilledAttempt {
	kill: number;
	window: Window;
	jobId: string;
	snapshotAt: number;
	worker: string;
}

export async function runKillRehearsal(
	env: Environment,
	input: KillRehearsalConfig,
): Promise<KillRehearsalResult> {
	const log = input.log ?? (() => undefined);
	const seed = input.seed ?? Math.floor(Math.random() * 2 ** 31);
	const config = {
		kills: input.kills,
		honourKeys: input.honourKeys,
		leaseSeconds: input.leaseSeconds,
		inFlight: input.inFlight ?? 24,
		submitConcurrency: input.submitConcurrency ?? 4,
		aiLatencyMs: input.aiLatencyMs ?? 1_500,
		crmDelayMs: input.crmDelayMs ?? 2_000,
		minUpMs: input.minUpMs ?? 2_000,
		maxUpMs: input.maxUpMs ?? 8_000,
		aimTimeoutMs: input.aimTimeoutMs ?? 20_000,
		drainTimeoutMs: input.drainTimeoutMs ?? 10 * 60_000,
		runId: input.runId,
		targets: input.targets && input.targets.length > 0 ? input.targets : TARGETS,
		seed,
	};
	const prefix = `${config.runId}-`;
	const random = seededRandom(seed);
	const violations: string[] = [];
	const startedAt = new Date();
	const started = Date.now();

	env.standins.crm.honourKeys = config.honourKeys;
	env.standins.crm.delayMs = config.crmDelayMs;
	env.standins.ai.latencyMs = config.aiLatencyMs;

	const submitter = new Submitter(env, prefix, config.inFlight, config.submitConcurrency);
	submitter.start();

	const kills: KillRecord[] = [];
	const killed = new Map<string, KilledAttempt>();
	/** Latest kill snapshot at which each attempt was in flight (first death, or running again). */
	const lastInFlightAt = new Map<string, number>();
	const caught = new Map<string, Set<Window>>();
	const t1Workers: Record<string, number> = { new: 0, running: 0, none: 0 };
	let maxExpiredLeaseAgeMs = 0;
	let upSince = Date.now();
	let drainMs = 0;

	try {
		for (let n = 1; n <= config.kills; n++) {
			const target = config.targets[(n - 1) % config.targets.length];
			await sleep(config.minUpMs + random() * (config.maxUpMs - config.minUpMs));
			const aimed = await aimAt(
				env,
				target,
				{
					aiLatencyMs: config.aiLatencyMs,
					crmDelayMs: config.crmDelayMs,
					prefix,
					timeoutMs: config.aimTimeoutMs,
				},
				random,
			);
			const upMs = Date.now() - upSince;
			await env.n8n.kill('SIGKILL');
			// Statements PostgreSQL had fully received still run to completion (and commit), and
			// requests already on the wire still reach the stand-ins; give them a moment so the
			// snapshot is the state the crash left behind.
			await sleep(1_000);
			const snap = await snapshot(env, prefix);
			const classes = classify(snap, new Set(killed.keys()));
			const t1Attempts = [...classes.values()]
				.filter((entry) => entry.window === 'T1' && entry.attemptId)
				.map((entry) => entry.attemptId as string);
			const workers = await workerExecutionStates(env, t1Attempts);
			const windows = emptyWindows();
			const t1Here: Record<string, number> = { new: 0, running: 0, none: 0 };
			let recovering = 0;
			for (const [jobId, entry] of classes) {
				if (entry.attemptId) lastInFlightAt.set(entry.attemptId, snap.at);
				if (entry.window === 'R') {
					recovering++;
					continue;
				}
				windows[entry.window]++;
				if (!caught.has(jobId)) caught.set(jobId, new Set());
				caught.get(jobId)!.add(entry.window);
				if (entry.attemptId) {
					const worker =
						entry.window === 'T1' ? (workers.get(entry.attemptId) ?? 'none') : 'started';
					if (entry.window === 'T1') {
						t1Here[worker] = (t1Here[worker] ?? 0) + 1;
						t1Workers[worker] = (t1Workers[worker] ?? 0) + 1;
					}
					killed.set(entry.attemptId, {
						kill: n,
						window: entry.window,
						jobId,
						snapshotAt: snap.at,
						worker,
					});
				}
			}
			for (const job of snap.jobs) {
				if (
					job.status === 'running' &&
					job.lease_until &&
					job.lease_until.getTime() < snap.at - 1_000
				) {
					maxExpiredLeaseAgeMs = Math.max(
						maxExpiredLeaseAgeMs,
						snap.at - job.lease_until.getTime(),
					);
				}
			}
			const restartStarted = Date.now();
			await restartN8n(env, log);
			upSince = Date.now();
			const record: KillRecord = {
				n,
				target,
				aimed,
				upMs,
				restartMs: upSince - restartStarted,
				windows,
				t1Workers: t1Here,
				recovering,
			};
			kills.push(record);
			log(
				`kill ${n}/${config.kills} aimed at ${target}${aimed ? '' : ' (not seen, killed anyway)'} after ${(upMs / 1000).toFixed(1)} s up: ` +
					WINDOWS.map((w) => `${w}=${windows[w]}`).join(' ') +
					` (T1 workers queued/started/none ${t1Here.new}/${t1Here.running}/${t1Here.none}) R=${recovering}; restart ${(record.restartMs / 1000).toFixed(1)} s`,
			);
		}
		submitter.stopNew();
		const drainStarted = Date.now();
		const quiet = await waitQuiet(env, prefix, submitter, config.drainTimeoutMs);
		drainMs = Date.now() - drainStarted;
		if (!quiet)
			violations.push(
				`the run did not get quiet within ${config.drainTimeoutMs / 1000} s after the last kill`,
			);
	} finally {
		await submitter.stop();
	}
	violations.push(...submitter.violations);

	// ------------------------------------------------------------------------------ final state
	const final = await snapshot(env, prefix);
	const reconciliation = await fetchReconciliationReport(env);
	const jobById = new Map(final.jobs.map((job) => [job.id, job]));
	const attemptById = new Map(final.attempts.map((attempt) => [attempt.attempt_id, attempt]));
	const attemptsByJob = new Map<string, AttemptRow[]>();
	for (const attempt of final.attempts) {
		const list = attemptsByJob.get(attempt.job_id) ?? [];
		list.push(attempt);
		attemptsByJob.set(attempt.job_id, list);
	}

	// None lost: every key got a 202, every 202 names a stored job, every stored job has a key.
	const submissions = [...submitter.submissions.values()];
	let lost = 0;
	const acceptedIds = new Set<string>();
	for (const submission of submissions) {
		if (submission.jobId === null) {
			lost++;
			violations.push(`submission ${submission.key} never got a 202`);
			continue;
		}
		acceptedIds.add(submission.jobId);
		if (!jobById.has(submission.jobId)) {
			lost++;
			violations.push(`job ${submission.jobId} (202 for ${submission.key}) is not in the database`);
		}
		if (submission.otherAnswers.length > 0)
			violations.push(
				`submission ${submission.key} got unexpected answers ${submission.otherAnswers.join(', ')}`,
			);
	}
	for (const job of final.jobs)
		if (!acceptedIds.has(job.id))
			violations.push(`job ${job.id} (${job.doc_id}) exists but no client got its id`);

	// Every job terminal, none stuck.
	let stuck = 0;
	const failedByCode: Record<string, number> = {};
	let done = 0;
	let failed = 0;
	let other = 0;
	for (const job of final.jobs) {
		if (job.status === 'done') done++;
		else if (job.status === 'failed') {
			failed++;
			failedByCode[job.error_code ?? 'none'] = (failedByCode[job.error_code ?? 'none'] ?? 0) + 1;
		} else {
			other++;
			if (job.status === 'running' || job.status === 'queued') stuck++;
			violations.push(`job ${job.id} ended ${job.status}, not done or failed`);
		}
	}

	// Requests of each attempt, from the journals (the attempt id travels in a header).
	const aiOf = (attemptId: string) => final.ai.get(attemptId) ?? [];
	const crmByAttempt = new Map<string, CrmView[]>();
	for (const [key, entries] of final.crm) {
		if (!jobById.has(key)) continue;
		for (const entry of entries) {
			if (entry.attemptId === null) {
				violations.push(`CRM request for job ${key} without ${ATTEMPT_HEADER}`);
				continue;
			}
			const owner = attemptById.get(entry.attemptId);
			if (!owner || owner.job_id !== key)
				violations.push(
					`CRM request for job ${key} names attempt ${entry.attemptId} of another job`,
				);
			const list = crmByAttempt.get(entry.attemptId) ?? [];
			list.push(entry);
			crmByAttempt.set(entry.attemptId, list);
		}
	}
	const crmOf = (attemptId: string) => crmByAttempt.get(attemptId) ?? [];

	// Killed attempts: dead for good (lease_expired, no request after the crash), or run again by
	// n8n at boot (n8n 2.x restarts Worker executions that were queued but not started).
	const rerun = new Set<string>();
	let staleApplied = 0;
	const windows: Record<Window, WindowFigures> = Object.fromEntries(
		WINDOWS.map((w) => [
			w,
			{
				pairs: 0,
				jobs: 0,
				kills: 0,
				rerunHeld: 0,
				rerunSuperseded: 0,
				rerunStoppedAtCheckpoint: 0,
				withCrmRequest: 0,
			},
		]),
	) as Record<Window, WindowFigures>;
	for (const kill of kills) {
		for (const w of WINDOWS) {
			windows[w].pairs += kill.windows[w];
			if (kill.windows[w] > 0) windows[w].kills++;
		}
	}
	for (const set of caught.values()) for (const w of set) windows[w].jobs++;
	for (const [attemptId, info] of killed) {
		const attempt = attemptById.get(attemptId);
		const after = [...aiOf(attemptId), ...crmOf(attemptId)].some(
			(call) => call.at > info.snapshotAt,
		);
		const outcome = attempt?.outcome ?? null;
		const ranAgain = after || outcome !== 'lease_expired';
		if (crmOf(attemptId).length > 0) windows[info.window].withCrmRequest++;
		if (!ranAgain) continue;
		rerun.add(attemptId);
		if (outcome === 'lease_expired') windows[info.window].rerunSuperseded++;
		else windows[info.window].rerunHeld++;
		if (info.window !== 'T1' || info.worker !== 'new') {
			staleApplied += outcome === 'lease_expired' ? 0 : 1;
			violations.push(
				`attempt ${attemptId} of job ${info.jobId}, killed in ${info.window} (worker ${info.worker}) at kill ${info.kill}, ran again after the crash (outcome ${outcome})`,
			);
		}
		if ((info.window === 'T1' || info.window === 'T2') && !after && crmOf(attemptId).length > 0) {
			violations.push(
				`attempt ${attemptId} killed in ${info.window} has a CRM request from before the crash — misclassified`,
			);
		}
	}

	// Attempt history: one outcome per attempt; only the attempt holding the lease wrote a result.
	let leaseExpired = 0;
	const slow = new Set<string>();
	for (const job of final.jobs) {
		const attempts = attemptsByJob.get(job.id) ?? [];
		if (attempts.length !== job.attempts)
			violations.push(
				`job ${job.id}: ${attempts.length} attempt rows for attempts = ${job.attempts}`,
			);
		attempts.forEach((attempt, index) => {
			if (attempt.outcome === 'lease_expired') {
				leaseExpired++;
				if (!killed.has(attempt.attempt_id)) slow.add(attempt.attempt_id);
			}
			if (attempt.outcome === null)
				violations.push(`job ${job.id} attempt ${attempt.attempt} has no outcome`);
			const last = index === attempts.length - 1;
			if (!last && !['lease_expired', 'retry', 'released'].includes(attempt.outcome ?? '')) {
				staleApplied++;
				violations.push(
					`job ${job.id}: attempt ${attempt.attempt} of ${attempts.length} recorded ${attempt.outcome}, an outcome only the current attempt may write`,
				);
			}
			if (last) {
				const fits =
					job.status === 'done'
						? attempt.outcome === 'succeeded'
						: job.status === 'failed'
							? ['failed', 'retry', 'lease_expired'].includes(attempt.outcome ?? '')
							: false;
				if (!fits)
					violations.push(
						`job ${job.id} is ${job.status} but its last attempt recorded ${attempt.outcome}`,
					);
			}
		});
	}

	// CRM side effects. An "orphan" is an attempt that reached the CRM but whose result the job
	// does not hold: its record may exist without anyone having recorded it.
	const causeOf = (attemptId: string): OrphanCause | null => {
		const info = killed.get(attemptId);
		if (info && (info.window === 'T3' || info.window === 'T4') && !rerun.has(attemptId))
			return info.window;
		if (info && rerun.has(attemptId)) return 'T1 re-run at boot';
		if (slow.has(attemptId)) return 'slow';
		return null;
	};
	let requests = 0;
	let created = 0;
	let replayed = 0;
	let jobsWithMoreThanOneRecord = 0;
	let extraRecords = 0;
	const orphans = byCause();
	const duplicatesByCause = byCause();
	const replaysByCause = byCause();
	const orphanAttempts = new Set<string>();
	for (const job of final.jobs) {
		const attempts = attemptsByJob.get(job.id) ?? [];
		const entries = final.crm.get(job.id) ?? [];
		requests += entries.length;
		const records = entries.filter((entry) => entry.createdRecordId !== null);
		created += records.length;
		replayed += entries.filter((entry) => entry.replayed).length;
		for (const attempt of attempts)
			if (crmOf(attempt.attempt_id).length > 1)
				violations.push(
					`job ${job.id}: attempt ${attempt.attempt} sent ${crmOf(attempt.attempt_id).length} CRM requests`,
				);
		const lastAttempt = attempts[attempts.length - 1];
		const applied = job.status === 'done' ? lastAttempt?.attempt_id : undefined;
		// The applied result comes from the attempt that held the lease: the last one.
		if (applied) {
			const answer = crmOf(applied)[0];
			if (!answer)
				violations.push(`job ${job.id} is done but its last attempt sent no CRM request`);
			else if (job.result?.crm_record_id !== answer.recordId) {
				staleApplied++;
				violations.push(
					`job ${job.id}: result names CRM record ${job.result?.crm_record_id}, but the attempt holding the lease got ${answer.recordId}`,
				);
			}
		}
		const requesters = attempts.filter((attempt) => crmOf(attempt.attempt_id).length > 0);
		for (const attempt of requesters) {
			if (attempt.attempt_id === applied) continue;
			orphanAttempts.add(attempt.attempt_id);
			const cause = causeOf(attempt.attempt_id);
			if (cause === null) {
				violations.push(
					`job ${job.id}: attempt ${attempt.attempt} (${attempt.outcome}) reached the CRM without its result being kept, and was neither killed in T3/T4, re-run at boot, nor slow`,
				);
				continue;
			}
			orphans[cause]++;
			// The record a job keeps is its applied attempt's (or, for a job that failed, the first
			// one); every other record is a duplicate.
			const keeper = applied ?? requesters[0]?.attempt_id;
			if (
				!config.honourKeys &&
				attempt.attempt_id !== keeper &&
				crmOf(attempt.attempt_id).some((entry) => entry.createdRecordId !== null)
			)
				duplicatesByCause[cause]++;
		}
		if (records.length > 1) {
			jobsWithMoreThanOneRecord++;
			extraRecords += records.length - 1;
			if (config.honourKeys)
				violations.push(
					`job ${job.id}: ${records.length} CRM records although the CRM honours the key`,
				);
		}
		if (config.honourKeys) {
			if (job.status === 'done' && records.length !== 1)
				violations.push(`job ${job.id} is done with ${records.length} CRM records`);
			if (entries.some((entry) => entry.replayed)) {
				const first = requesters[0];
				const cause = first ? causeOf(first.attempt_id) : null;
				if (cause) replaysByCause[cause] += entries.filter((entry) => entry.replayed).length;
			}
		} else if (records.length !== entries.length) {
			violations.push(
				`job ${job.id}: the CRM created ${records.length} records for ${entries.length} requests`,
			);
		}
	}

	// Reconciliation report: exactly the attempts that ended without a recorded outcome.
	violations.push(
		...reportConsistency(reconciliation).map((problem) => `reconciliation report: ${problem}`),
	);
	const reportRows = new Map<string, ReportRow>();
	const reportJobs = new Set<string>();
	for (const row of reconciliation.unknown_outcomes) {
		if (!jobById.has(row.job_id)) continue;
		reportRows.set(row.attempt_id, row);
		reportJobs.add(row.job_id);
		if (row.stable_key !== row.job_id)
			violations.push(`report row for ${row.job_id} has stable_key ${row.stable_key}`);
		if (row.outcome !== 'lease_expired')
			violations.push(`report row for ${row.job_id} has outcome ${row.outcome}`);
	}
	const reportAttempts = new Set(reportRows.keys());
	const leaseExpiredIds = new Set(
		final.attempts
			.filter((attempt) => attempt.outcome === 'lease_expired')
			.map((attempt) => attempt.attempt_id),
	);
	let exact = reportAttempts.size === leaseExpiredIds.size;
	for (const attemptId of leaseExpiredIds) {
		if (!reportAttempts.has(attemptId)) {
			exact = false;
			violations.push(
				`attempt ${attemptId} ended lease_expired but is missing from the unknown-outcomes report`,
			);
		}
	}
	for (const attemptId of reportAttempts) {
		if (!leaseExpiredIds.has(attemptId)) exact = false;
		if (!killed.has(attemptId) && !slow.has(attemptId))
			violations.push(
				`the unknown-outcomes report lists attempt ${attemptId}, which was neither in flight at a kill nor slower than its lease`,
			);
	}
	for (const [attemptId, info] of killed) {
		if (attemptById.get(attemptId)?.outcome === 'lease_expired' && !reportAttempts.has(attemptId)) {
			violations.push(`attempt ${attemptId} killed in ${info.window} is not in the report`);
		}
	}

	// The checkpoint itself, against the journals: the Worker records it right before the CRM
	// call, so every attempt that reached the CRM has it, recorded before its request.
	for (const attempt of final.attempts) {
		const requests = crmOf(attempt.attempt_id);
		if (requests.length > 0) {
			const firstRequestAt = Math.min(...requests.map((request) => request.at));
			if (attempt.checkpoint !== CRM_CHECKPOINT)
				violations.push(
					`attempt ${attempt.attempt_id} of job ${attempt.job_id} reached the CRM but recorded checkpoint ${attempt.checkpoint}`,
				);
			// A second of slack: DATABASE_URL may point at a PostgreSQL on another clock.
			else if (attempt.checkpoint_at && attempt.checkpoint_at.getTime() > firstRequestAt + 1_000) {
				violations.push(
					`attempt ${attempt.attempt_id} recorded its checkpoint at ${attempt.checkpoint_at.toISOString()}, after its CRM request at ${new Date(firstRequestAt).toISOString()}`,
				);
			}
		}
		if (attempt.checkpoint !== null && aiOf(attempt.attempt_id).length === 0)
			violations.push(
				`attempt ${attempt.attempt_id} recorded checkpoint ${attempt.checkpoint} without an AI request`,
			);
	}

	// "Check the CRM" (rows with a checkpoint) must be exactly the lease_expired attempts that
	// reached the checkpoint: those that reached the CRM, plus only attempts killed in between.
	const checkpointRows = [...reportRows.values()].filter((row) => row.checkpoint !== null);
	const uncheckedRows = [...reportRows.values()].filter((row) => row.checkpoint === null);
	const leaseExpiredAtCheckpoint = new Set(
		final.attempts
			.filter((attempt) => attempt.outcome === 'lease_expired' && attempt.checkpoint !== null)
			.map((attempt) => attempt.attempt_id),
	);
	let checkpointRowsExact = checkpointRows.length === leaseExpiredAtCheckpoint.size;
	for (const row of checkpointRows) {
		const recorded = attemptById.get(row.attempt_id)?.checkpoint ?? null;
		if (!leaseExpiredAtCheckpoint.has(row.attempt_id) || recorded !== row.checkpoint) {
			checkpointRowsExact = false;
			violations.push(
				`report row of attempt ${row.attempt_id} has checkpoint ${row.checkpoint}, the attempt recorded ${recorded}`,
			);
		}
	}
	for (const row of uncheckedRows) {
		if (leaseExpiredAtCheckpoint.has(row.attempt_id)) {
			checkpointRowsExact = false;
			violations.push(
				`report row of attempt ${row.attempt_id} has no checkpoint, the attempt recorded ${attemptById.get(row.attempt_id)?.checkpoint}`,
			);
		}
	}
	let checkListMatchesCrmRequests = true;
	let checkedWithCrmRequest = 0;
	let checkedKilledBeforeRequest = 0;
	const killedBeforeRequestByWindow: Partial<Record<Window, number>> = {};
	for (const row of checkpointRows) {
		if (row.checkpoint !== CRM_CHECKPOINT)
			violations.push(
				`report row of attempt ${row.attempt_id} has checkpoint ${row.checkpoint}, expected ${CRM_CHECKPOINT}`,
			);
		if (crmOf(row.attempt_id).length > 0) {
			checkedWithCrmRequest++;
			continue;
		}
		const info = killed.get(row.attempt_id);
		const checkpointAt = attemptById.get(row.attempt_id)?.checkpoint_at?.getTime() ?? Infinity;
		// The kill must have come after the checkpoint (a second of slack for another clock).
		if (info && checkpointAt <= (lastInFlightAt.get(row.attempt_id) ?? 0) + 1_000) {
			checkedKilledBeforeRequest++;
			killedBeforeRequestByWindow[info.window] =
				(killedBeforeRequestByWindow[info.window] ?? 0) + 1;
		} else {
			checkListMatchesCrmRequests = false;
			violations.push(
				`report row of attempt ${row.attempt_id} (job ${row.job_id}) says check the CRM, but the CRM never got its request and the attempt was not killed after its checkpoint`,
			);
		}
	}
	const leaseExpiredWithCrmRequest = final.attempts.filter(
		(attempt) => attempt.outcome === 'lease_expired' && crmOf(attempt.attempt_id).length > 0,
	);
	for (const attempt of leaseExpiredWithCrmRequest) {
		const row = reportRows.get(attempt.attempt_id);
		if (row?.checkpoint === CRM_CHECKPOINT) continue;
		checkListMatchesCrmRequests = false;
		violations.push(
			`attempt ${attempt.attempt_id} (job ${attempt.job_id}) reached the CRM and ended lease_expired, but the report ${row ? `lists it with checkpoint ${row.checkpoint}` : 'does not list it'}`,
		);
	}
	for (const row of uncheckedRows) {
		if (crmOf(row.attempt_id).length === 0) continue;
		checkListMatchesCrmRequests = false;
		violations.push(
			`report row of attempt ${row.attempt_id} (job ${row.job_id}) says no CRM call was made, but the CRM got its request`,
		);
	}
	let coversEveryOrphan = true;
	for (const attemptId of orphanAttempts) {
		if (reportRows.get(attemptId)?.checkpoint !== CRM_CHECKPOINT) {
			coversEveryOrphan = false;
			violations.push(
				`attempt ${attemptId} reached the CRM without a kept result but is not in the unknown-outcomes report with checkpoint ${CRM_CHECKPOINT}`,
			);
		}
	}

	// Every CRM record its job does not hold (a duplicate, or any record of a dead-lettered job)
	// was created by an attempt the operator is told to check.
	const keysToCheck = new Set(reconciliation.check_external_system.stable_keys);
	let unheldRecords = 0;
	let unheldRecordsListed = 0;
	for (const job of final.jobs) {
		const held = job.status === 'done' ? (job.result?.crm_record_id ?? null) : null;
		for (const entry of final.crm.get(job.id) ?? []) {
			if (entry.createdRecordId === null || entry.createdRecordId === held) continue;
			unheldRecords++;
			const row = entry.attemptId === null ? undefined : reportRows.get(entry.attemptId);
			if (row?.checkpoint === CRM_CHECKPOINT && keysToCheck.has(job.id)) unheldRecordsListed++;
			else
				violations.push(
					`CRM record ${entry.createdRecordId} of job ${job.id} (attempt ${entry.attemptId}) is not held by the job and its attempt is not under check_external_system`,
				);
		}
	}

	// Attempts that lost their lease while still running (re-run at boot after being superseded,
	// or slower than their lease): with the checkpoint they stop there, before the CRM call.
	const lateAttempts = final.attempts.filter(
		(attempt) =>
			attempt.outcome === 'lease_expired' &&
			(rerun.has(attempt.attempt_id) || slow.has(attempt.attempt_id)),
	);
	const checkpointRoutes = await nodeRoutesByAttempt(
		env,
		CHECKPOINT_NODE,
		lateAttempts.map((attempt) => attempt.attempt_id),
		startedAt,
	);
	const stoppedAtCheckpoint: Record<LateCause, number> = { 'T1 re-run at boot': 0, slow: 0 };
	const lateWithCrmRequest: Record<LateCause, number> = { 'T1 re-run at boot': 0, slow: 0 };
	const lateUnseen: Record<LateCause, number> = { 'T1 re-run at boot': 0, slow: 0 };
	for (const attempt of lateAttempts) {
		const cause: LateCause = rerun.has(attempt.attempt_id) ? 'T1 re-run at boot' : 'slow';
		const route = checkpointRoutes.get(attempt.attempt_id);
		const requested = crmOf(attempt.attempt_id).length > 0;
		if (requested) lateWithCrmRequest[cause]++;
		if (route && route.leaseLost.length > 0) {
			if (requested)
				violations.push(
					`attempt ${attempt.attempt_id} came out of ${CHECKPOINT_NODE} on Lease Lost, yet the CRM got its request`,
				);
			if (attempt.checkpoint !== null)
				violations.push(
					`attempt ${attempt.attempt_id} came out of ${CHECKPOINT_NODE} on Lease Lost, yet recorded checkpoint ${attempt.checkpoint}`,
				);
			stoppedAtCheckpoint[cause]++;
			if (cause === 'T1 re-run at boot') {
				const info = killed.get(attempt.attempt_id);
				if (info) windows[info.window].rerunStoppedAtCheckpoint++;
			}
		}
		if (route && route.first.length > 0 && attempt.checkpoint === null)
			violations.push(
				`attempt ${attempt.attempt_id} came out of ${CHECKPOINT_NODE} on Extended, but no checkpoint is recorded`,
			);
		if (!route && !requested) lateUnseen[cause]++;
	}

	const killCounts = new Map<string, number>();
	for (const info of killed.values())
		killCounts.set(info.jobId, (killCounts.get(info.jobId) ?? 0) + 1);

	return {
		config,
		startedAt,
		durationMs: Date.now() - started,
		drainMs,
		kills,
		windows,
		t1Workers,
		jobs: {
			submitted: submissions.length,
			accepted: acceptedIds.size,
			inDb: final.jobs.length,
			done,
			failed,
			failedByCode,
			other,
			maxAttempts: Math.max(0, ...final.jobs.map((job) => job.attempts)),
			killedMoreThanOnce: [...killCounts.values()].filter((count) => count > 1).length,
		},
		submissions: {
			unansweredTries: submissions.reduce((sum, submission) => sum + submission.unanswered, 0),
			answered503: submissions.reduce((sum, submission) => sum + submission.answered503, 0),
			startingUp: submissions.reduce((sum, submission) => sum + submission.startingUp, 0),
			lostAnswersRecovered: submissions.filter((submission) => submission.recoveredLostAnswer)
				.length,
		},
		crm: {
			requests,
			created,
			replayed,
			jobsWithMoreThanOneRecord,
			extraRecords,
			orphans,
			duplicatesByCause,
			replaysByCause,
		},
		report: {
			rows: reportAttempts.size,
			jobs: reportJobs.size,
			leaseExpiredAttempts: leaseExpiredIds.size,
			exact,
			withCheckpoint: checkpointRows.length,
			jobsToCheck: new Set(checkpointRows.map((row) => row.job_id)).size,
			withoutCheckpoint: uncheckedRows.length,
			jobsWithoutCheckpoint: new Set(uncheckedRows.map((row) => row.job_id)).size,
			checkedWithCrmRequest,
			checkedKilledBeforeRequest,
			checkedKilledBeforeRequestByWindow: killedBeforeRequestByWindow,
			leaseExpiredWithCrmRequest: leaseExpiredWithCrmRequest.length,
			checkpointRowsExact,
			checkListMatchesCrmRequests,
			coversEveryOrphan,
			unheldRecords,
			unheldRecordsListed,
		},
		lateAttempts: {
			stoppedAtCheckpoint,
			withCrmRequest: lateWithCrmRequest,
			noCrmRequestNotAtCheckpoint: lateUnseen,
		},
		attempts: {
			total: final.attempts.length,
			killed: killed.size,
			rerunAtBoot: rerun.size,
			slow: slow.size,
			leaseExpired,
			staleApplied,
		},
		maxExpiredLeaseAgeMs,
		stuck,
		lost,
		violations,
	};
}

// ---------------------------------------------------------------------------------------------
// job database outage

export interface OutageResult {
	kind: OutageKind;
	/** How long the job database was kept away: after the shutdown finished, or from the cut. */
	cutMs: number;
	/** Restart only: the fast shutdown (open sessions terminated), and the start until PostgreSQL accepted connections. */
	shutdownMs: number | null;
	startupMs: number | null;
	/** From taking the job database away until it was back. */
	downMs: number;
	jobs: number;
	done: number;
	failed: number;
	/** Receiver answers while the job database was down. */
	receiverAnswers: Array<{ status: number; detail: string }>;
	/** n8n executions that failed while it was down, by workflow, with their error messages. */
	failedExecutions: Record<string, number>;
	errorMessages: string[];
	pidBefore: number | undefined;
	pidAfter: number | undefined;
	/** From the job database being back (server accepting connections, proxy restored) to the receiver's first 202; -1 if none. */
	recoveryMs: number;
	crmRecordsPerDoneJob: number[];
	reLeasedJobs: number;
	violations: string[];
}

/**
 * Takes the job database away while jobs are in flight — a real restart of its private server
 * (`env.jobsServer`), else a TCP proxy cut — probes the receiver while it is down, brings it
 * back and checks that n8n recovers without a restart.
 */
export async function runOutageScenario(
	env: RehearsalEnvironment,
	options: { cutMs?: number; jobs?: number; runId: string; log?: Log; leaseSeconds: number },
): Promise<OutageResult> {
	const log = options.log ?? (() => undefined);
	const cutMs = options.cutMs ?? 8_000;
	const server = env.jobsServer;
	const kind: OutageKind = server ? 'restart' : 'cut';
	const prefix = `${options.runId}-`;
	const violations: string[] = [];
	env.standins.crm.honourKeys = true;
	env.standins.crm.delayMs = 1_500;
	env.standins.ai.latencyMs = 1_500;

	const submit = async (docId: string) =>
		await env.request('jobs', {
			method: 'POST',
			body: { document: { id: docId, text: `name: Outage ${docId}, amount: 1` } },
			headers: { 'Idempotency-Key': `key-${docId}` },
		});
	const count = options.jobs ?? 10;
	for (let i = 1; i <= count; i++) {
		const answer = await submit(`${prefix}${i}`);
		if (answer.status !== 202)
			violations.push(`before the outage the receiver answered ${answer.status}`);
	}
	// Cut while work is under way: some workers between the AI and the CRM, some about to complete.
	const firstAi = Date.now();
	while (
		Date.now() - firstAi < 30_000 &&
		!env.standins.ai.calls.some((call) => call.key.startsWith(prefix))
	)
		await sleep(50);
	await sleep(1_200);
	const pidBefore = env.n8n.pid;
	const cutAt = new Date();
	let shutdownMs: number | null = null;
	let startupMs: number | null = null;
	if (server) {
		log(`restarting the job database's PostgreSQL (fast shutdown, down for ${cutMs / 1000} s)`);
		await server.stop();
		shutdownMs = Date.now() - cutAt.getTime();
	} else {
		log(`cutting the job database for ${cutMs / 1000} s`);
		await env.proxy.cut();
	}
	const receiverAnswers: Array<{ status: number; detail: string }> = [];
	const refused: string[] = [];
	try {
		const until = Date.now() + cutMs;
		let i = 0;
		while (Date.now() < until) {
			i++;
			const docId = `${prefix}cut-${i}`;
			const answer = await submit(docId);
			receiverAnswers.push({
				status: answer.status,
				detail: String((answer.body as { detail?: unknown }).detail ?? answer.text.slice(0, 200)),
			});
			if (answer.status === 202)
				violations.push('the receiver answered 202 while the job database was unreachable');
			else refused.push(docId);
			await sleep(Math.max(0, Math.min(1_500, until - Date.now())));
		}
	} finally {
		if (server) {
			const starting = Date.now();
			await server.start();
			startupMs = Date.now() - starting;
		} else {
			await env.proxy.restore();
		}
	}
	const restoredAt = new Date();
	const downMs = restoredAt.getTime() - cutAt.getTime();
	log(`job database reachable again after ${seconds(downMs)}`);
	// The refused requests are retried (same key) until the receiver takes them again.
	const recoveryStarted = Date.now();
	let recoveryMs = -1;
	for (const docId of refused) {
		for (;;) {
			const answer = await submit(docId);
			if (answer.status === 202) {
				if (recoveryMs < 0) recoveryMs = Date.now() - recoveryStarted;
				break;
			}
			if (Date.now() - recoveryStarted > 60_000) {
				violations.push(`the receiver did not recover within 60 s (last answer ${answer.status})`);
				break;
			}
			await sleep(500);
		}
	}
	const quiet = await waitQuiet(env, prefix, undefined, options.leaseSeconds * 1000 + 120_000);
	if (!quiet) violations.push('jobs of the outage run did not all finish');
	const pidAfter = env.n8n.pid;
	if (pidBefore === undefined || pidBefore !== pidAfter)
		violations.push(`n8n was restarted during the outage (pid ${pidBefore} → ${pidAfter})`);

	for (const answer of receiverAnswers) {
		if (answer.status !== 503)
			violations.push(`receiver answered ${answer.status} during the outage (expected 503)`);
		else if (!/cannot be reached/i.test(answer.detail))
			violations.push(
				`receiver's 503 does not say the job store cannot be reached: ${answer.detail}`,
			);
	}
	const executions = await readExecutions(
		env,
		`SELECT e.id::text AS id, e."workflowId" AS "workflowId", e.status, e."startedAt" AS "startedAt", e."stoppedAt" AS "stoppedAt", d.data
		FROM execution_entity e JOIN execution_data d ON d."executionId" = e.id
		WHERE e.status = 'error' AND e."stoppedAt" >= $1 AND e."startedAt" <= $2`,
		[cutAt, restoredAt],
	);
	const failedExecutions: Record<string, number> = {};
	const messages = new Set<string>();
	for (const execution of executions) {
		failedExecutions[execution.workflowId] = (failedExecutions[execution.workflowId] ?? 0) + 1;
		const runData = parseRunData(env, execution.data);
		for (const [node, runs] of Object.entries(runData)) {
			for (const run of runs) {
				const error = run.error;
				if (!error?.message) continue;
				const original = (error.messages ?? []).filter((message) => message !== error.message);
				messages.add(
					`${node}: "${error.message}"${error.description ? ` — description: "${error.description}"` : ''}${original.length ? ` — original message: "${original.join('", "')}"` : ''}`,
				);
			}
		}
	}
	if ((failedExecutions[DISPATCHER_ID] ?? 0) === 0)
		violations.push('no Dispatcher execution failed while the job database was down');
	if (messages.size === 0)
		violations.push('no node error recorded in n8n while the job database was down');
	// Clear = says the connection failed and names PostgreSQL (in the message, its description
	// or the original message n8n keeps next to it).
	for (const message of messages) {
		if (!/refused|unreachable|connection|offline/i.test(message) || !/PostgreSQL/.test(message))
			violations.push(`unclear node error during the outage: ${message}`);
	}

	const jobs = await readJobs(env, prefix);
	const attempts = await readAttempts(env, prefix);
	const crm = crmView(env);
	const crmRecordsPerDoneJob: number[] = [];
	for (const job of jobs) {
		if (job.status !== 'done' && job.status !== 'failed')
			violations.push(`outage job ${job.id} ended ${job.status}`);
		const records = (crm.get(job.id) ?? []).filter((entry) => entry.createdRecordId !== null);
		if (job.status === 'done') {
			crmRecordsPerDoneJob.push(records.length);
			if (records.length !== 1)
				violations.push(`outage job ${job.id} has ${records.length} CRM records`);
			if (job.result?.crm_record_id !== records[0]?.createdRecordId)
				violations.push(
					`outage job ${job.id} result names ${job.result?.crm_record_id}, CRM created ${records[0]?.createdRecordId}`,
				);
		}
	}
	const reLeasedJobs = new Set(
		attempts
			.filter((attempt) => attempt.outcome === 'lease_expired')
			.map((attempt) => attempt.job_id),
	).size;
	return {
		kind,
		cutMs,
		shutdownMs,
		startupMs,
		downMs,
		jobs: jobs.length,
		done: jobs.filter((job) => job.status === 'done').length,
		failed: jobs.filter((job) => job.status === 'failed').length,
		receiverAnswers,
		failedExecutions,
		errorMessages: [...messages],
		pidBefore,
		pidAfter,
		recoveryMs,
		crmRecordsPerDoneJob,
		reLeasedJobs,
		violations,
	};
}

// ---------------------------------------------------------------------------------------------
// a worker slower than its lease

export interface SlowCaseResult {
	jobId: string;
	/** Which answer reached the first attempt after its lease had expired: the AI's comes before the checkpoint, the CRM's after it. */
	lateService: 'AI' | 'CRM';
	lateAnswerMs: number;
	attempts: Array<{ attempt: number; outcome: string | null; checkpoint: string | null }>;
	/** Every CRM request of the job, in arrival order, with the attempt that sent it. */
	crmRequests: Array<{
		attempt: number | null;
		createdRecordId: string | null;
		answerDelayMs: number;
	}>;
	resultRecordId: string | null;
	resultName: string | null;
	/** The node where the first attempt stopped on its Lease Lost output, and that item. */
	stoppedAt: string;
	leaseLostOutput: Record<string, unknown> | null;
	jobUnchangedAfterStaleAttempt: boolean;
	/** The first attempt's row in the reconciliation report. */
	reportRow: ReportRow | null;
	/** The job id is among check_external_system.stable_keys. */
	inCheckExternalSystem: boolean;
	violations: string[];
}

export interface SlowWorkerResult {
	leaseSeconds: number;
	/** The first attempt passed the checkpoint, its CRM request is answered after the lease expired. */
	lateCrm: SlowCaseResult;
	/** The first attempt's AI answer arrives after the lease expired: it stops at the checkpoint. */
	lateAi: SlowCaseResult;
	violations: string[];
}

const STALE_FIELDS = { name: 'stale attempt', email: null, amount: -1 };

async function runSlowCase(
	env: Environment,
	options: {
		docId: string;
		lateService: 'AI' | 'CRM';
		lateAnswerMs: number;
		leaseSeconds: number;
		log: Log;
	},
): Promise<SlowCaseResult> {
	const { docId, lateService, lateAnswerMs, log } = options;
	const violations: string[] = [];
	const s = quoteSchema(env.schema);
	// The first attempt's fields name "stale attempt", so a result taken from it would show.
	env.standins.ai.script(docId, [
		{
			status: 200,
			delayMs: lateService === 'AI' ? lateAnswerMs : 0,
			body: { fields: STALE_FIELDS, model: 'stand-in', source_document_id: docId },
		},
	]);
	if (lateService === 'CRM') env.standins.crm.answerDelays(docId, [lateAnswerMs]);
	const submittedAt = new Date();
	const accepted = await env.request('jobs', {
		method: 'POST',
		body: {
			document: { id: docId, text: 'name: Fresh Attempt, email fresh@example.com, amount: 7' },
		},
		headers: { 'Idempotency-Key': `key-${docId}` },
	});
	if (accepted.status !== 202)
		throw new Error(`receiver answered ${accepted.status}: ${accepted.text}`);
	const jobId = (accepted.body as { job_id: string }).job_id;
	log(
		`slow job ${jobId}: the ${lateService} answers attempt 1 after ${lateAnswerMs / 1000} s, lease ${options.leaseSeconds} s`,
	);

	const readJob = async () =>
		(
			await env.jobsDb.query<{
				status: string;
				attempts: number;
				attempt_id: string;
				result: JobRow['result'];
				finished_at: Date | null;
				updated_at: Date;
			}>(
				`SELECT status, attempts, attempt_id, result, finished_at, updated_at FROM ${s}.jobs WHERE id = $1`,
				[jobId],
			)
		).rows[0];
	const readJobAttempts = async () =>
		(
			await env.jobsDb.query<AttemptRow>(
				`SELECT ${ATTEMPT_COLUMNS} FROM ${s}.job_attempts a WHERE a.job_id = $1 ORDER BY a.attempt`,
				[jobId],
			)
		).rows;

	const deadline = Date.now() + lateAnswerMs + 90_000;
	let job = await readJob();
	while (job.status !== 'done' && job.status !== 'failed' && Date.now() < deadline) {
		await sleep(250);
		job = await readJob();
	}
	const afterNewAttempt = { job: await readJob(), attempts: await readJobAttempts() };
	log(
		`slow job: ${afterNewAttempt.job.status} after attempt ${afterNewAttempt.job.attempts}; waiting for the slow attempt to stop`,
	);
	// The slow attempt gets its late answer now and runs on until a fenced node stops it: Finish
	// job after a late CRM answer, the checkpoint after a late AI answer.
	const firstAttemptId = afterNewAttempt.attempts[0]?.attempt_id;
	const stoppedAt = lateService === 'CRM' ? 'Finish job' : CHECKPOINT_NODE;
	let leaseLostOutput: Record<string, unknown> | null = null;
	while (firstAttemptId && Date.now() < deadline && leaseLostOutput === null) {
		const route = (await nodeRoutesByAttempt(env, stoppedAt, [firstAttemptId], submittedAt)).get(
			firstAttemptId,
		);
		if (route && route.first.length > 0)
			violations.push(
				`the slow attempt came out of ${stoppedAt} on its first output (${lateService === 'CRM' ? 'completion applied' : 'lease extended'})`,
			);
		leaseLostOutput = route?.leaseLost[0] ?? null;
		if (leaseLostOutput === null) await sleep(1_000);
	}
	// Anything the slow attempt would still do (a CRM request after a lost checkpoint) arrives now.
	await sleep(lateService === 'AI' ? 3_000 : 1_000);
	const after = { job: await readJob(), attempts: await readJobAttempts() };
	const unchanged = JSON.stringify(after) === JSON.stringify(afterNewAttempt);
	const attemptNumber = new Map(
		after.attempts.map((attempt) => [attempt.attempt_id, attempt.attempt]),
	);
	const crmRequests = crmView(env).get(jobId) ?? [];
	const report = await fetchReconciliationReport(env);
	const reportRow =
		report.unknown_outcomes.find((row) => row.attempt_id === firstAttemptId) ?? null;
	const inCheckExternalSystem = report.check_external_system.stable_keys.includes(jobId);

	if (after.job.status !== 'done') violations.push(`slow job ended ${after.job.status}`);
	if (
		after.attempts.length !== 2 ||
		after.attempts[0].outcome !== 'lease_expired' ||
		after.attempts[1].outcome !== 'succeeded'
	) {
		violations.push(
			`slow job attempts: ${after.attempts.map((attempt) => `${attempt.attempt}:${attempt.outcome}`).join(', ')} (expected 1:lease_expired, 2:succeeded)`,
		);
	}
	if (!leaseLostOutput)
		violations.push(`the slow attempt did not come out of ${stoppedAt} on Lease Lost`);
	else if (leaseLostOutput.lease_lost !== true || leaseLostOutput.attempt_id !== firstAttemptId)
		violations.push(`unexpected Lease Lost item ${JSON.stringify(leaseLostOutput)}`);
	if (!unchanged) violations.push('the job or its attempts changed after the slow attempt stopped');
	for (const request of crmRequests)
		if (request.attemptId === null || !attemptNumber.has(request.attemptId))
			violations.push(`CRM request for the slow job names attempt ${request.attemptId}`);
	const staleRequests = crmRequests.filter((request) => request.attemptId === firstAttemptId);
	const freshRequests = crmRequests.filter(
		(request) => request.attemptId === after.attempts[1]?.attempt_id,
	);
	if (freshRequests.length !== 1 || freshRequests[0].createdRecordId === null)
		violations.push(
			`the new attempt sent ${freshRequests.length} CRM requests (expected one that creates a record)`,
		);
	const freshRecord = freshRequests[0]?.createdRecordId ?? null;
	if (after.job.result?.crm_record_id !== freshRecord)
		violations.push(
			`result names ${after.job.result?.crm_record_id}, the new attempt created ${freshRecord}`,
		);
	if (after.job.result?.fields?.name === STALE_FIELDS.name)
		violations.push("the result holds the slow attempt's AI fields");
	if (after.attempts[1]?.checkpoint !== CRM_CHECKPOINT)
		violations.push(`the new attempt recorded checkpoint ${after.attempts[1]?.checkpoint}`);
	if (!reportRow) violations.push('the slow attempt is not in the unknown-outcomes report');
	violations.push(
		...reportConsistency(report).map((problem) => `reconciliation report: ${problem}`),
	);
	if (lateService === 'CRM') {
		// Past the checkpoint: the record exists, and the report says to check the CRM.
		if (staleRequests.length !== 1 || staleRequests[0].createdRecordId === null)
			violations.push(
				`the slow attempt sent ${staleRequests.length} CRM requests (expected one that creates a record; the CRM ignores keys)`,
			);
		else if (staleRequests[0].answerDelayMs !== lateAnswerMs)
			violations.push(
				`the CRM answered the slow attempt after ${staleRequests[0].answerDelayMs} ms, not ${lateAnswerMs} ms`,
			);
		if (leaseLostOutput && leaseLostOutput.current_status !== 'done')
			violations.push(
				`the slow attempt's Job Complete found the job ${String(leaseLostOutput.current_status)}, not done`,
			);
		if (after.attempts[0]?.checkpoint !== CRM_CHECKPOINT)
			violations.push(
				`the slow attempt recorded checkpoint ${after.attempts[0]?.checkpoint}, expected ${CRM_CHECKPOINT}`,
			);
		if (
			reportRow &&
			(reportRow.checkpoint !== CRM_CHECKPOINT ||
				reportRow.external_call !== EXTERNAL_CALL_MAY_HAVE_HAPPENED)
		)
			violations.push(
				`report row of the slow attempt: checkpoint ${reportRow.checkpoint}, external_call "${reportRow.external_call}"`,
			);
		if (!inCheckExternalSystem) violations.push('the slow job is not under check_external_system');
	} else {
		// Before the checkpoint: the checkpoint stops it, no CRM request, nothing to check.
		if (staleRequests.length !== 0)
			violations.push(
				`the slow attempt sent ${staleRequests.length} CRM requests after its checkpoint came out on Lease Lost`,
			);
		if (crmRequests.filter((request) => request.createdRecordId !== null).length !== 1)
			violations.push(
				`the slow job has ${crmRequests.filter((request) => request.createdRecordId !== null).length} CRM records, expected 1`,
			);
		if (
			env.standins.ai.calls.filter((call) => attemptHeader(call.headers) === firstAttemptId)
				.length !== 1
		)
			violations.push("the slow attempt's AI request is not in the journal");
		if (after.attempts[0]?.checkpoint !== null)
			violations.push(
				`the slow attempt recorded checkpoint ${after.attempts[0]?.checkpoint} although its lease was lost`,
			);
		if (
			reportRow &&
			(reportRow.checkpoint !== null || reportRow.external_call !== EXTERNAL_CALL_NOT_MADE)
		)
			violations.push(
				`report row of the slow attempt: checkpoint ${reportRow.checkpoint}, external_call "${reportRow.external_call}"`,
			);
		if (inCheckExternalSystem)
			violations.push(
				'the slow job is under check_external_system although no attempt reached the CRM without its result being kept',
			);
	}
	return {
		jobId,
		lateService,
		lateAnswerMs,
		attempts: after.attempts.map((attempt) => ({
			attempt: attempt.attempt,
			outcome: attempt.outcome,
			checkpoint: attempt.checkpoint,
		})),
		crmRequests: crmRequests.map((request) => ({
			attempt: request.attemptId === null ? null : (attemptNumber.get(request.attemptId) ?? null),
			createdRecordId: request.createdRecordId,
			answerDelayMs: request.answerDelayMs,
		})),
		resultRecordId: after.job.result?.crm_record_id ?? null,
		resultName: after.job.result?.fields?.name ?? null,
		stoppedAt,
		leaseLostOutput,
		jobUnchangedAfterStaleAttempt: unchanged,
		reportRow,
		inCheckExternalSystem,
		violations,
	};
}

/**
 * Two jobs whose first attempt outlives its lease, one after the other. Late CRM answer: the
 * attempt passed the checkpoint, so its record exists; its Job Complete lands on Lease Lost and
 * the report says to check the CRM. Late AI answer: the attempt reaches the checkpoint after its
 * lease was taken over, lands on Lease Lost there and never calls the CRM.
 */
export async function runSlowWorkerScenario(
	env: Environment,
	options: { leaseSeconds: number; runId: string; log?: Log },
): Promise<SlowWorkerResult> {
	const log = options.log ?? (() => undefined);
	// A CRM that does not honour keys makes a stale attempt's side effect visible: if its
	// completion were applied, the job's result would name its record.
	env.standins.crm.honourKeys = false;
	env.standins.crm.delayMs = 0;
	env.standins.ai.latencyMs = 0;
	try {
		const lateCrm = await runSlowCase(env, {
			docId: `${options.runId}-slow-crm`,
			lateService: 'CRM',
			lateAnswerMs: (options.leaseSeconds + 12) * 1000,
			leaseSeconds: options.leaseSeconds,
			log,
		});
		const lateAi = await runSlowCase(env, {
			docId: `${options.runId}-slow-ai`,
			lateService: 'AI',
			lateAnswerMs: (options.leaseSeconds + 10) * 1000,
			leaseSeconds: options.leaseSeconds,
			log,
		});
		return {
			leaseSeconds: options.leaseSeconds,
			lateCrm,
			lateAi,
			violations: [
				...lateCrm.violations.map((v) => `late CRM answer: ${v}`),
				...lateAi.violations.map((v) => `late AI answer: ${v}`),
			],
		};
	} finally {
		env.standins.crm.honourKeys = true;
	}
}

// ---------------------------------------------------------------------------------------------
// docs/RELIABILITY.md

export interface RunInfo {
	command: string;
	date: Date;
	n8nVersion: string;
	postgres: string;
	totalMs: number;
	/** What the packed package was built from (commit, uncommitted changes). */
	source?: string;
}

export function machineDescription(): string {
	const list = cpus();
	return `${list.length} × ${list[0]?.model?.trim() ?? 'CPU'}, ${Math.round(totalmem() / 2 ** 30)} GB RAM, Node ${process.version} (harness), ${process.platform}`;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
function median(values: number[]): number {
	if (values.length === 0) return 0;
	const sorted = [...values].sort((a, b) => a - b);
	return sorted[Math.floor(sorted.length / 2)];
}

export function renderKillSection(result: KillRehearsalResult, info: RunInfo): string {
	const { config } = result;
	const restart = result.kills.map((kill) => kill.restartMs);
	const windowsPerKill = result.kills.map(
		(kill) => WINDOWS.filter((w) => kill.windows[w] > 0).length,
	);
	const aimed = result.kills.filter((kill) => kill.aimed).length;
	const causes = (counts: Record<OrphanCause, number>) =>
		CAUSES.filter((cause) => counts[cause] > 0)
			.map((cause) => `${cause}: ${counts[cause]}`)
			.join(', ') || 'none';
	const { report } = result;
	const gapWindows = Object.entries(report.checkedKilledBeforeRequestByWindow)
		.map(([w, n]) => `${w}: ${n}`)
		.join(', ');
	const lines = [
		`### ${config.honourKeys ? 'CRM honours Idempotency-Key' : 'CRM ignores Idempotency-Key'} — ${result.kills.length} kills`,
		'',
		`- Command: \`${info.command}\``,
		`- Date: ${info.date.toISOString()}; rehearsal ${seconds(result.durationMs)} (drain after the last kill ${seconds(result.drainMs)}), whole command so far ${seconds(info.totalMs)}`,
		`- Environment: ${machineDescription()}; n8n ${info.n8nVersion} (regular mode, one main process) with the package packed from ${info.source ?? 'this checkout'}; ${info.postgres}; machine shared with other test runs`,
		`- Settings: lease ${config.leaseSeconds} s for the Dispatcher's Job Trigger and the Worker's checkpoint (bundled: 120 s), backstop ${REHEARSAL_BACKSTOP_SECONDS} s (bundled: 30 s); ${config.inFlight} jobs kept in flight; AI answers after ${config.aiLatencyMs} ms, CRM after ${config.crmDelayMs} ms; n8n up ${seconds(config.minUpMs)}–${seconds(config.maxUpMs)} before each kill is aimed; seed ${config.seed}`,
		`- Restart after SIGKILL until every workflow is published and the webhooks answer: median ${seconds(median(restart))}, max ${seconds(Math.max(0, ...restart))}`,
		'',
		'| window | meaning | (kill, job) pairs | distinct jobs | kills that caught it | killed attempts n8n ran again at boot (kept the lease / superseded / of those stopped at the checkpoint) | killed attempts with a CRM request |',
		'|---|---|---:|---:|---:|---:|---:|',
		...WINDOWS.map((w) => {
			const f = result.windows[w];
			return `| ${w} | ${WINDOW_LABELS[w]} | ${f.pairs} | ${f.jobs} | ${f.kills} of ${result.kills.length} | ${w === 'T0' ? '—' : `${f.rerunHeld} / ${f.rerunSuperseded} / ${f.rerunStoppedAtCheckpoint}`} | ${w === 'T0' ? '—' : f.withCrmRequest} |`;
		}),
		'',
		`Kills were aimed in turn at ${config.targets.join(', ')} (at a random moment inside the window once it was seen; ${aimed} of ${result.kills.length} saw their target) and caught whatever else was in flight: on average ${(windowsPerKill.reduce((a, b) => a + b, 0) / Math.max(1, windowsPerKill.length)).toFixed(1)} windows per kill, ${windowsPerKill.filter((n) => n >= 3).length} kills caught three or more. ` +
			`T1 attempts by the state of their execution at the kill: ${result.t1Workers.new ?? 0} queued in n8n (\`new\`: n8n runs these again at boot), ${result.t1Workers.running ?? 0} started, ${result.t1Workers.none ?? 0} not created yet (n8n died between the Job Trigger's lease and the execution's start).`,
		'',
		'| outcome | figure |',
		'|---|---:|',
		`| jobs submitted through the receiver / answered 202 / stored | ${result.jobs.submitted} / ${result.jobs.accepted} / ${result.jobs.inDb} |`,
		`| receiver requests cut off by a kill or refused while n8n restarted (retried with the same key) | ${result.submissions.unansweredTries} |`,
		`| … requests whose job had committed before the kill: the retry got the same job (\`deduplicated: true\`) | ${result.submissions.lostAnswersRecovered} |`,
		`| receiver requests answered by n8n itself while booting: HTTP 200 "n8n is starting up. Please wait" (no job; retried) | ${result.submissions.startingUp} |`,
		`| jobs done / failed | ${result.jobs.done} / ${result.jobs.failed}${
			result.jobs.failed > 0
				? ` (${Object.entries(result.jobs.failedByCode)
						.map(([code, n]) => `${code}: ${n}`)
						.join(', ')})`
				: ''
		} |`,
		`| **lost jobs** (202 without a stored job, or never answered) | **${result.lost}** |`,
		`| **stuck jobs** (not done or failed when the run got quiet) | **${result.stuck}** |`,
		`| jobs killed in flight more than once | ${result.jobs.killedMoreThanOnce} (most attempts used by one job: ${result.jobs.maxAttempts}) |`,
		`| attempts: total / killed in flight / run again by n8n at boot / outlived their lease while alive | ${result.attempts.total} / ${result.attempts.killed} / ${result.attempts.rerunAtBoot} / ${result.attempts.slow} |`,
		`| **results applied from an attempt that did not hold the lease** | **${result.attempts.staleApplied}** |`,
		`| CRM requests / records created / answered as replay | ${result.crm.requests} / ${result.crm.created} / ${result.crm.replayed} |`,
		`| attempts that reached the CRM but whose result the job does not hold, by cause | ${causes(result.crm.orphans)} |`,
		config.honourKeys
			? `| **job ids with more than one CRM record** | **${result.crm.jobsWithMoreThanOneRecord}** (the CRM answered ${result.crm.replayed} repeats as replays — ${causes(result.crm.replaysByCause)}) |`
			: `| job ids with more than one CRM record (extra records) | ${result.crm.jobsWithMoreThanOneRecord} (${result.crm.extraRecords}) — extra records by cause: ${causes(result.crm.duplicatesByCause)} |`,
		...LATE_CAUSES.map(
			(cause) =>
				`| ${cause === 'slow' ? 'attempts that outlived their lease while alive' : 'attempts n8n ran again at boot after their job was leased anew'}: stopped at the checkpoint (Lease Lost in the Worker execution, no CRM request) / reached the CRM (passed the checkpoint in time) / neither (no finished execution reached the checkpoint) | ${result.lateAttempts.stoppedAtCheckpoint[cause]} / ${result.lateAttempts.withCrmRequest[cause]} / ${result.lateAttempts.noCrmRequestNotAtCheckpoint[cause]} |`,
		),
		`| unknown-outcomes report: attempts / jobs listed | ${report.rows} / ${report.jobs} (${report.exact ? `exactly the ${report.leaseExpiredAttempts} attempts that ended \`lease_expired\`` : 'MISMATCH'}) |`,
		`| … with checkpoint \`${CRM_CHECKPOINT}\`: "check the CRM" (\`check_external_system\`) — attempts / jobs to check | ${report.withCheckpoint} / ${report.jobsToCheck} (${report.checkpointRowsExact ? 'exactly the `lease_expired` attempts that recorded it' : 'MISMATCH with the recorded checkpoints'}) |`,
		`| … without checkpoint: no CRM call made (\`no_external_call\`) — attempts / jobs | ${report.withoutCheckpoint} / ${report.jobsWithoutCheckpoint} |`,
		`| attempts to check: the CRM got their request / checkpoint recorded, killed before the CRM request arrived | ${report.checkedWithCrmRequest} / ${report.checkedKilledBeforeRequest}${gapWindows ? ` (window at the kill: ${gapWindows})` : ''} |`,
		`| "check the CRM" list = the attempts that reached the CRM without their result being kept | ${report.checkListMatchesCrmRequests ? `yes: the ${report.leaseExpiredWithCrmRequest} \`lease_expired\` attempts the CRM journal holds a request from${report.checkedKilledBeforeRequest > 0 ? `, plus ${report.checkedKilledBeforeRequest} killed between checkpoint and request` : ''}; no row without checkpoint reached the CRM` : '**NO**'} |`,
		`| every attempt with a CRM request but no kept result is listed with checkpoint \`${CRM_CHECKPOINT}\` | ${report.coversEveryOrphan ? 'yes' : '**NO**'} |`,
		`| CRM records their job does not hold / created by an attempt under \`check_external_system\` | ${report.unheldRecords} / ${report.unheldRecordsListed} |`,
		`| longest a dead attempt's job stayed \`running\` past its lease, seen at a kill (n8n was down meanwhile) | ${seconds(result.maxExpiredLeaseAgeMs)} |`,
		`| **violations of the checks** | **${result.violations.length}** |`,
		'',
	];
	if (result.violations.length > 0)
		lines.push('Violations:', '', ...result.violations.slice(0, 40).map((v) => `- ${v}`), '');
	return lines.join('\n');
}

export function renderOutageSection(result: OutageResult, info: RunInfo): string {
	const restart = result.kind === 'restart';
	const outage = restart
		? `the job database's own PostgreSQL was shut down (fast shutdown: open sessions terminated; ${seconds(result.shutdownMs ?? 0)}), kept down ${seconds(result.cutMs)} and started again on the same data and port (${seconds(result.startupMs ?? 0)} until it accepted connections); the job credential goes through a TCP proxy that stayed up, so n8n's new connections were accepted and dropped at once instead of refused; n8n's own database is on another server and stayed up.`
		: `the TCP proxy in front of the job database dropped every connection and refused new ones for ${seconds(result.cutMs)} (the job database shares its server with n8n's own database, which stayed up).`;
	return [
		restart
			? `### Job database restarted mid-run (${seconds(result.downMs)} down)`
			: `### Job database unreachable for ${seconds(result.cutMs)} mid-run (TCP proxy cut)`,
		'',
		`- Command: \`${info.command}\`; date ${info.date.toISOString()}`,
		`- ${result.jobs} jobs in flight (AI 1.5 s, CRM 1.5 s, CRM honours keys); ${outage}`,
		`- Receiver while down: ${result.receiverAnswers.length} requests, answers ${[...new Set(result.receiverAnswers.map((answer) => answer.status))].join(', ')}; detail: "${result.receiverAnswers[0]?.detail ?? '—'}"`,
		`- n8n executions that failed while down: ${
			Object.entries(result.failedExecutions)
				.map(([id, n]) => `${id} × ${n}`)
				.join(', ') || 'none'
		}`,
		`- Node errors recorded by n8n: ${result.errorMessages.join('; ') || 'none'}`,
		`- n8n not restarted (pid ${result.pidBefore} before and ${result.pidAfter} after); the receiver took jobs again ${result.recoveryMs >= 0 ? seconds(result.recoveryMs) : '—'} after ${restart ? 'PostgreSQL accepted connections again' : 'the proxy was restored'}.`,
		`- End state: ${result.done} done, ${result.failed} failed, ${result.jobs - result.done - result.failed} other; ${result.reLeasedJobs} jobs were re-leased after a worker's Job Complete failed during the outage; CRM records per done job: ${[...new Set(result.crmRecordsPerDoneJob)].join(', ') || '—'}.`,
		`- Violations: ${result.violations.length}${result.violations.length ? ` — ${result.violations.join('; ')}` : ''}`,
		'',
	].join('\n');
}

function renderSlowCase(result: SlowCaseResult): string[] {
	const attempts = result.attempts
		.map(
			(attempt) =>
				`${attempt.attempt} → ${attempt.outcome} (checkpoint ${attempt.checkpoint ? `\`${attempt.checkpoint}\`` : 'none'})`,
		)
		.join(', ');
	const requests =
		result.crmRequests
			.map(
				(request) =>
					`attempt ${request.attempt ?? '?'} → ${request.createdRecordId ?? 'no record'}${request.answerDelayMs > 0 ? ` (answered after ${seconds(request.answerDelayMs)})` : ''}`,
			)
			.join(', ') || 'none';
	const staleAttempt = result.attempts[0]?.attempt ?? 1;
	const staleRequests = result.crmRequests.filter(
		(request) => request.attempt === staleAttempt,
	).length;
	const shown = ['job_id', 'attempt_id', 'outcome', 'lease_lost', 'reason', 'current_status'];
	const leaseLost = result.leaseLostOutput
		? Object.fromEntries(
				shown
					.filter((key) => key in (result.leaseLostOutput ?? {}))
					.map((key) => [key, result.leaseLostOutput?.[key]]),
			)
		: null;
	const row = result.reportRow;
	return [
		`  - Attempts: ${attempts}; CRM requests: ${requests}${staleRequests === 0 ? ` (none from attempt ${staleAttempt})` : ''}; the job's result names ${result.resultRecordId} (fields name "${result.resultName}").`,
		`  - The slow attempt came out of *${result.stoppedAt}* on **Lease Lost**: \`${JSON.stringify(leaseLost)}\`; job row and attempts unchanged afterwards: ${result.jobUnchangedAfterStaleAttempt ? 'yes' : 'NO'}.`,
		`  - Unknown-outcomes report: ${row ? `attempt ${staleAttempt} listed with checkpoint ${row.checkpoint ? `\`${row.checkpoint}\`` : 'none'}, external_call "${row.external_call}"` : 'attempt not listed'}; job under \`check_external_system\`: ${result.inCheckExternalSystem ? 'yes' : 'no'}.`,
	];
}

export function renderSlowWorkerSection(result: SlowWorkerResult, info: RunInfo): string {
	return [
		`### A worker slower than its lease`,
		'',
		`- Command: \`${info.command}\`; date ${info.date.toISOString()}`,
		`- Lease ${result.leaseSeconds} s (the Dispatcher's, and the Worker's checkpoint right before the CRM call extends it by as much); the CRM ignores keys, so each CRM request creates its own record. The first attempt's AI fields name "stale attempt".`,
		`- **Late CRM answer, past the checkpoint**: the CRM stores the first attempt's record at once and answers after ${seconds(result.lateCrm.lateAnswerMs)}; the job is leased again meanwhile.`,
		...renderSlowCase(result.lateCrm),
		`- **Late AI answer, before the checkpoint**: the AI answers the first attempt after ${seconds(result.lateAi.lateAnswerMs)}; the job is leased again meanwhile.`,
		...renderSlowCase(result.lateAi),
		`- Violations: ${result.violations.length}${result.violations.length ? ` — ${result.violations.join('; ')}` : ''}`,
		'',
	].join('\n');
}

/** Replaces (or appends) the block between `<!-- rehearsal:<id>:begin -->` and `:end -->`. */
export function updateReliabilityDoc(path: string, id: string, markdown: string): void {
	const begin = `<!-- rehearsal:${id}:begin -->`;
	const end = `<!-- rehearsal:${id}:end -->`;
	const block = `${begin}\n${markdown.trimEnd()}\n${end}`;
	const text = existsSync(path) ? readFileSync(path, 'utf8') : '# Reliability\n';
	const from = text.indexOf(begin);
	const to = text.indexOf(end);
	let next: string;
	if (from >= 0 && to > from) next = text.slice(0, from) + block + text.slice(to + end.length);
	else {
		const anchor = '<!-- rehearsal:results:end -->';
		const at = text.indexOf(anchor);
		next =
			at >= 0
				? `${text.slice(0, at)}${block}\n\n${text.slice(at)}`
				: `${text.trimEnd()}\n\n${block}\n`;
	}
	writeFileSync(path, next);
}
