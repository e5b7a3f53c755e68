/**
 * When is a started n8n ready? Healthy (`/healthz/readiness`, a worker's `/healthz`), every
 * published workflow applied by n8n's publication outbox (read from its own tables), and the
 * production webhooks answering. Each wait fails fast, with n8n's own message or its log tail,
 * when n8n exits or reports a failure, and says every 15 s what it is still waiting for.
 */
import pg from 'pg';

import { sleep } from '../processes';

type Log = (line: string) => void;

/** What a wait needs to know about the instance it waits for. */
export interface Watched {
	/** True once the process being waited for has exited. */
	exited(): boolean;
	/** Tail of the log to put into an error. */
	logTail(lines?: number): string;
	logFile: string;
	log: Log;
	timeoutMs: number;
}

const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;

/** Logs `still waiting for <what> (<n> s)` every `everyMs` until the returned stop is called. */
export function heartbeat(log: Log, what: string, everyMs = 15_000): () => void {
	const started = Date.now();
	const timer = setInterval(
		() => log(`still waiting for ${what} (${seconds(Date.now() - started)})`),
		everyMs,
	);
	timer.unref();
	return () => clearInterval(timer);
}

export async function waitHealthy(url: string, what: string, watched: Watched): Promise<void> {
	const deadline = Date.now() + watched.timeoutMs;
	const stop = heartbeat(watched.log, `${what} to answer ${new URL(url).pathname}`);
	try {
		for (;;) {
			if (watched.exited())
				throw new Error(
					`${what} exited during startup (log: ${watched.logFile})\n${watched.logTail(80)}`,
				);
			try {
				const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
				if (res.ok) return;
			} catch {
				// Not listening yet.
			}
			if (Date.now() > deadline)
				throw new Error(
					`${what} not healthy after ${watched.timeoutMs} ms (log: ${watched.logFile})\n${watched.logTail(80)}`,
				);
			await sleep(300);
		}
	} finally {
		stop();
	}
}

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
 * Waits until n8n has applied the publication of every workflow in `ids`. In 2.x a
 * publication outbox does this asynchronously after start: it writes
 * `workflow_published_version` (what webhooks and sub-workflow calls execute) first and
 * registers webhooks (`webhook_entity`) and triggers after, so all of it is checked. A failed
 * publication or trigger activation fails the start with n8n's own error message.
 */
export async function waitForPublications(
	databaseUrl: string,
	ids: string[],
	since: Date,
	watched: Watched & { allowActivationErrors: boolean },
): Promise<void> {
	if (ids.length === 0) return;
	const deadline = Date.now() + watched.timeoutMs;
	const client = new pg.Client({ connectionString: databaseUrl });
	client.on('error', () => undefined);
	await client.connect();
	const stop = heartbeat(watched.log, `n8n to publish ${ids.length} workflows`);
	try {
		for (;;) {
			const { rows } = await client.query<PublicationState>(PUBLICATION_STATE_SQL, [
				ids,
				since.toISOString(),
			]);
			const problems = rows.flatMap((r) => [
				...(r.latest_status === 'failed' || r.latest_status === 'partial_success'
					? [`${r.id}: publication ${r.latest_status}: ${r.latest_error ?? '(no message)'}`]
					: []),
				...(r.trigger_errors ?? []).map((e) => `${r.id}: trigger ${e}`),
			]);
			if (problems.length > 0 && !watched.allowActivationErrors) {
				throw new Error(
					`n8n could not publish:\n${problems.join('\n')}\n(log: ${watched.logFile})`,
				);
			}
			const waiting = rows
				.filter((r) => !r.published || r.pending || Number(r.missing_webhooks) > 0)
				.map((r) => r.id);
			if (rows.length === ids.length && waiting.length === 0) return;
			if (watched.exited()) throw new Error(`n8n exited while publishing\n${watched.logTail()}`);
			if (Date.now() > deadline) {
				throw new Error(
					`n8n did not finish publishing ${waiting.join(', ')} in time\n${watched.logTail()}`,
				);
			}
			await sleep(250);
		}
	} finally {
		stop();
		await client.end();
	}
}

/**
 * n8n's own 404 answers while a production webhook is not (yet) served: not registered, or
 * registered but its published version not yet materialised by the publication outbox.
 */
const N8N_NOT_READY_404 =
	/is not registered|Published version not found|Active version not found|Could not find workflow with id/i;

/** Polls until the production webhook answers anything but "not ready"; returns that answer. */
export async function waitForWebhook(
	url: string,
	init: RequestInit | undefined,
	watched: Watched,
): Promise<{ status: number; body: string }> {
	const deadline = Date.now() + watched.timeoutMs;
	const path = new URL(url).pathname;
	const stop = heartbeat(watched.log, `webhook ${path}`);
	let last = '';
	try {
		for (;;) {
			if (watched.exited())
				throw new Error(`n8n exited while waiting for webhook ${path}\n${watched.logTail()}`);
			try {
				const res = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
				const body = await res.text();
				if (!(res.status === 404 && N8N_NOT_READY_404.test(body)))
					return { status: res.status, body };
				last = `${res.status} ${body.slice(0, 200)}`;
			} catch (err) {
				last = err instanceof Error ? err.message : String(err);
			}
			if (Date.now() > deadline)
				throw new Error(`webhook ${path} not ready: ${last}\n${watched.logTail()}`);
			await sleep(500);
		}
	} finally {
		stop();
	}
}

/**
 * n8n starts even when a community package fails to load; the workflows then fail with
 * "Unrecognized node type", far from the cause. Throws with n8n's message instead.
 */
export function assertPackagesLoaded(startLog: string, logFile: string): void {
	const failed = /Failed to load package "[^"]+"[\s\S]{0,600}/.exec(startLog);
	if (failed) throw new Error(`${failed[0]}\n(log: ${logFile})`);
}
