/**
 * The job database goes away for a few seconds mid-run while n8n's own database stays up, and
 * comes back without restarting n8n: by default its private PostgreSQL is really restarted
 * (fast shutdown, same data and port); with the job database on a shared server, the
 * environment's TCP proxy cuts it instead.
 */
import { DISPATCHER_ID, sleep, type Log } from './constants';
import type { OutageKind, RehearsalEnvironment } from './environment';
import { parseRunData, readExecutions } from './executions';
import { crmView, readAttempts, readJobs, waitQuiet } from './observations';
import { seconds } from './report';

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
	const kind = env.outageKind;
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
		log(
			kind === 'crash'
				? `crashing the job database's PostgreSQL (immediate shutdown, down for ${cutMs / 1000} s)`
				: `restarting the job database's PostgreSQL (fast shutdown, down for ${cutMs / 1000} s)`,
		);
		await (kind === 'crash' ? server.crash() : server.stop());
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
