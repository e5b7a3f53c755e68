/**
 * What the checks look at: the job database (jobs, attempts of this run's documents) and the
 * stand-ins' journals (AI calls by attempt, CRM requests by Idempotency-Key), as one snapshot.
 */
import type { Environment } from '../environment';
import { ATTEMPT_HEADER, QUEUE, sleep } from './constants';

export interface JobRow {
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

export interface AttemptRow {
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

export interface CallView {
	at: number;
	attemptId: string | null;
}

export interface CrmView extends CallView {
	key: string | null;
	status: number | string;
	createdRecordId: string | null;
	recordId: string | null;
	replayed: boolean;
	responded: boolean;
	answerDelayMs: number;
}

export interface Snapshot {
	at: number;
	jobs: JobRow[];
	attempts: AttemptRow[];
	/** AI requests by attempt id. */
	ai: Map<string, CallView[]>;
	/** CRM requests by Idempotency-Key (the job id). */
	crm: Map<string, CrmView[]>;
}

export function quoteSchema(schema: string): string {
	if (!/^[a-z_][a-z0-9_]{0,49}$/.test(schema)) throw new Error(`unexpected schema name ${schema}`);
	return `"${schema}"`;
}

export function attemptHeader(
	headers: Record<string, string | string[] | undefined>,
): string | null {
	const value = headers[ATTEMPT_HEADER.toLowerCase()];
	return (Array.isArray(value) ? value[0] : value) ?? null;
}

export async function readJobs(env: Environment, prefix: string): Promise<JobRow[]> {
	const s = quoteSchema(env.schema);
	const { rows } = await env.jobsDb.query<JobRow>(
		`SELECT id, status, attempts, max_attempts, attempt_id, lease_until, result, error_code,
			payload->'document'->>'id' AS doc_id
		FROM ${s}.jobs WHERE queue = $1 AND payload->'document'->>'id' LIKE $2 || '%'`,
		[QUEUE, prefix],
	);
	return rows;
}

export const ATTEMPT_COLUMNS =
	'a.attempt_id, a.job_id, a.attempt, a.started_at, a.lease_until, a.finished_at, a.outcome, a.error_code, a.checkpoint, a.checkpoint_at';

export async function readAttempts(env: Environment, prefix: string): Promise<AttemptRow[]> {
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

export function aiView(env: Environment): Map<string, CallView[]> {
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

export function crmView(env: Environment): Map<string, CrmView[]> {
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

export async function snapshot(env: Environment, prefix: string): Promise<Snapshot> {
	const [jobs, attempts] = await Promise.all([readJobs(env, prefix), readAttempts(env, prefix)]);
	return { at: Date.now(), jobs, attempts, ai: aiView(env), crm: crmView(env) };
}

/** Jobs of this run still queued or running. */
export async function countLive(env: Environment, prefix: string): Promise<number> {
	const s = quoteSchema(env.schema);
	const { rows } = await env.jobsDb.query<{ n: number }>(
		`SELECT count(*)::int AS n FROM ${s}.jobs WHERE queue = $1 AND status IN ('queued', 'running') AND payload->'document'->>'id' LIKE $2 || '%'`,
		[QUEUE, prefix],
	);
	return rows[0].n;
}

export async function waitQuiet(
	env: Environment,
	prefix: string,
	submitter: { pending(): unknown[] } | undefined,
	timeoutMs: number,
): Promise<boolean> {
	const deadline = Date.now() + timeoutMs;
	let lastCalls = -1;
	let stableSince = Date.now();
	while (Date.now() < deadline) {
		const live = await countLive(env, prefix);
		const calls = env.standins.crm.journal.length + env.standins.ai.calls.length;
		if (calls !== lastCalls) {
			lastCalls = calls;
			stableSince = Date.now();
		}
		// Quiet: nothing left to do and neither the AI nor the CRM has seen a request for 3 s
		// (a stale worker may still be running after its job finished).
		if (live === 0 && (submitter?.pending().length ?? 0) === 0 && Date.now() - stableSince > 3_000)
			return true;
		await sleep(500);
	}
	return false;
}
