/**
 * Monitoring (08) and the Callback relay (05) in a real n8n, with the settings a user might
 * publish them with: Monitoring's alert receiver refusing alerts, and the relay's signing key
 * credential created without its secret. Alerts go to the stand-in callback receiver
 * (`/alerts`); Monitoring runs on its own schedule (every minute), so the first test takes two
 * to four minutes.
 *
 * The known jobs are written straight through the core (JobStore on the job database) into
 * queues no bundled workflow leases, so what Monitoring sees of them is exact. Monitoring runs
 * with two thresholds lowered (`MONITORING_THRESHOLDS`) so that a test sees them pass in minutes.
 */
import {
	SIGNING_CREDENTIAL,
	startEnvironment,
	workflowNode,
	type Environment,
} from '../../scripts/lib/environment';
import { failedExecutions } from '../../scripts/lib/rehearsal/executions';
import { waitFor, type ReceivedCallback } from '../../scripts/lib/standins';
import { DurableJobsError, JobStore, migrate } from '../../src/core';
import { allowLoopbackCallbacks } from './callback-hosts';
import { e2eLog } from './progress';
import { databaseUrl } from '../helpers/db';

const SCHEMA = 'dj_e2e_monitoring';
const DEAD = 'mon-dead';
const EXPIRED = 'mon-expired';
/** Three dead letters: more than this file's `max_dead_letters`. */
const BACKLOG = 'mon-backlog';
/** One job, due at once, that nothing takes. */
const WAITING = 'mon-waiting';
/** One job scheduled a week ahead: queued, but not due. */
const SCHEDULED = 'mon-scheduled';
/** Monitoring's Config here: a waiting job is late after 20 s, more than 2 dead letters alert. */
const MONITORING_THRESHOLDS = { max_oldest_ready_seconds: 20, max_dead_letters: 2 };
const MONITORING_ID = 'DjMonitoring0001';
const RELAY_ID = 'DjCallbackRelay1';

let env: Environment;
let store: JobStore;

function ok<T>(result: T | DurableJobsError): T {
	if (result instanceof DurableJobsError) throw result;
	return result;
}

beforeAll(async () => {
	env = await startEnvironment({
		databaseUrl: databaseUrl(),
		schema: SCHEMA,
		pollSeconds: 1,
		log: e2eLog,
		customize: (workflows) => {
			allowLoopbackCallbacks(workflows);
			const thresholds = (
				workflowNode(workflows, MONITORING_ID, 'Config').parameters.assignments as {
					assignments: Array<{ name: string; value: unknown }>;
				}
			).assignments;
			for (const [name, value] of Object.entries(MONITORING_THRESHOLDS)) {
				const entry = thresholds.find((assignment) => assignment.name === name);
				if (!entry) throw new Error(`Monitoring has no Config → ${name}`);
				entry.value = value;
			}
		},
	});
	// The relay's signing key credential as a user might create it: without its secret.
	await env.n8n.importCredentials([{ ...SIGNING_CREDENTIAL, data: { hmacSecret: '' } }]);
	await migrate(env.jobsDb, SCHEMA);
	store = new JobStore(env.jobsDb, { schema: SCHEMA });
});

afterAll(async () => {
	await env?.stop();
});

describe('Monitoring (08)', () => {
	it('alerts on a dead letter once; on a backlog of dead letters, a late due job and an expired lease every minute, not on a job scheduled for later; an alert the receiver refuses fails the execution, which n8n keeps', async () => {
		// A running job whose lease has expired: alerted every minute while it lasts.
		ok((await store.enqueue([{ queue: EXPIRED, payload: { n: 1 } }]))[0]);
		expect(await store.lease({ queue: EXPIRED, limit: 1, leaseMs: 1_000 })).toHaveLength(1);
		// A job due now that nothing takes (late after 20 s), and one due in a week (never late).
		ok((await store.enqueue([{ queue: WAITING, payload: { n: 1 } }]))[0]);
		const nextWeek = new Date(Date.now() + 7 * 24 * 3_600_000);
		ok((await store.enqueue([{ queue: SCHEDULED, payload: { n: 1 }, runAt: nextWeek }]))[0]);

		// Every alert is answered HTTP 500 until the dead letter's alert has come.
		env.standins.callbacks.status = 500;
		const since = new Date();
		// Three dead letters kept (more than max_dead_letters, 2), made before the one of DEAD: they
		// are new no later than DEAD's, so the run after DEAD's first alert finds none of them new.
		for (const enqueued of await store.enqueue(
			[1, 2, 3].map((n) => ({ queue: BACKLOG, payload: { n }, maxAttempts: 1 })),
		))
			ok(enqueued);
		const backlog = await store.lease({ queue: BACKLOG, limit: 3, leaseMs: 60_000 });
		expect(backlog).toHaveLength(3);
		for (const result of await store.complete(
			backlog.map((job) => ({
				jobId: job.id,
				attemptId: job.attempt_id,
				outcome: 'failed' as const,
				errorCode: 'http_422',
				errorClass: 'needs_mapping' as const,
				errorMessage: 'The CRM answered HTTP 422',
			})),
		))
			expect(ok(result).applied).toBe(true);
		ok((await store.enqueue([{ queue: DEAD, payload: { n: 1 }, maxAttempts: 1 }]))[0]);
		const [leased] = await store.lease({ queue: DEAD, limit: 1, leaseMs: 60_000 });
		const [completed] = await store.complete([
			{
				jobId: leased.id,
				attemptId: leased.attempt_id,
				outcome: 'failed',
				errorCode: 'http_400',
				errorClass: 'needs_mapping',
				errorMessage: 'The AI endpoint answered HTTP 400',
			},
		]);
		expect(ok(completed).applied).toBe(true);
		e2eLog('waiting for the Monitoring run after the dead letter’s minute (up to 2 minutes)');

		const alert = (queue: string, after: number) => (request: ReceivedCallback) =>
			request.path === '/alerts' &&
			new Date(request.at).getTime() > after &&
			(request.json as { queue?: string } | undefined)?.queue === queue;
		const [first] = await env.standins.callbacks.waitFor(alert(DEAD, since.getTime()), {
			timeoutMs: 150_000,
		});
		env.standins.callbacks.status = 200;
		expect(first.status).toBe(500);
		const body = first.json as {
			reasons: string[];
			stats: { new_dead_letters: number; dead_letter: number };
		};
		expect(body.stats).toMatchObject({ new_dead_letters: 1, dead_letter: 1 });
		expect(body.reasons.join('; ')).toMatch(/^1 job\(s\) dead-lettered between /);

		// The refused alert failed its execution, and n8n kept it with the reason.
		const kept = await waitFor(
			async () =>
				(await failedExecutions(env, MONITORING_ID, since)).find((execution) =>
					execution.data.includes('Alert not delivered: alert_url answered HTTP 500'),
				),
			{ timeoutMs: 30_000, intervalMs: 500, what: 'a failed Monitoring execution kept by n8n' },
		);
		expect(kept.id).toMatch(/^\d+$/);

		// The next run, a minute later: the expired lease again, the same dead letter not again.
		const firstAt = new Date(first.at).getTime();
		e2eLog('waiting for the next Monitoring run (about a minute)');
		const [next] = await env.standins.callbacks.waitFor(alert(EXPIRED, firstAt + 30_000), {
			timeoutMs: 100_000,
		});
		expect(next.status).toBe(200);
		expect((next.json as { reasons: string[] }).reasons.join('; ')).toMatch(
			/^1 running job\(s\) with an expired lease/,
		);

		// The same run: the backlog of dead letters alerts again, with none of them new.
		type Alert = { reasons: string[]; stats: Record<string, number | null> };
		const [backlogAgain] = await env.standins.callbacks.waitFor(alert(BACKLOG, firstAt + 30_000), {
			timeoutMs: 30_000,
		});
		expect(backlogAgain.json as Alert).toMatchObject({
			reasons: [
				expect.stringMatching(/^3 dead letters kept \(limit 2\): they stay until replayed/),
			],
			stats: { dead_letter: 3, new_dead_letters: 0 },
		});
		// Their one alert as new dead letters came in an earlier run (with the backlog's reason).
		const backlogAlerts = env.standins.callbacks.received.filter(alert(BACKLOG, since.getTime()));
		const asNew = backlogAlerts.filter((request) =>
			(request.json as Alert).reasons.some((reason) =>
				/^3 job\(s\) dead-lettered between /.test(reason),
			),
		);
		expect(asNew).toHaveLength(1);
		expect(new Date(asNew[0].at).getTime()).toBeLessThan(firstAt + 30_000);

		// The job due for a minute and more is late; the one due next week alerts nothing.
		const [late] = await env.standins.callbacks.waitFor(alert(WAITING, firstAt + 30_000), {
			timeoutMs: 30_000,
		});
		const lateAlert = late.json as Alert;
		expect(lateAlert.reasons).toEqual([
			expect.stringMatching(/^oldest due job has waited \d+ s \(limit 20 s\)/),
		]);
		expect(lateAlert.stats.oldest_ready_age_seconds).toBeGreaterThan(20);

		await new Promise((resolve) => setTimeout(resolve, 5_000));
		expect(env.standins.callbacks.received.filter(alert(DEAD, firstAt + 30_000))).toEqual([]);
		expect(env.standins.callbacks.received.filter(alert(SCHEDULED, since.getTime()))).toEqual([]);
	});
});

describe('Callback relay (05) with a signing key credential without its secret', () => {
	it('sends nothing: the event is retried with signing_key_missing, and the failed execution says what to set', async () => {
		const since = new Date();
		const path = `/hooks/placeholder-${Date.now()}`;
		const answer = await env.request('jobs', {
			method: 'POST',
			body: {
				document: { id: `placeholder-${Date.now()}`, text: 'name: Ada Lovelace, amount: 1' },
				callback_url: `${env.standins.callbacks.url}${path}`,
			},
		});
		expect(answer.status).toBe(202);
		const jobId = (answer.body as { job_id: string }).job_id;

		const attempt = await waitFor(
			async () => {
				const { rows } = await env.jobsDb.query<{
					outcome: string;
					error_code: string | null;
					error_message: string | null;
				}>(
					`SELECT a.outcome, a.error_code, a.error_message
					FROM "${SCHEMA}".job_attempts a JOIN "${SCHEMA}".jobs j ON j.id = a.job_id
					WHERE j.queue = 'callbacks' AND j.payload->'payload'->>'job_id' = $1
						AND a.attempt = 1 AND a.outcome IS NOT NULL`,
					[jobId],
				);
				return rows[0];
			},
			{ timeoutMs: 90_000, intervalMs: 250, what: 'the first delivery attempt of the event' },
		);
		expect(attempt).toMatchObject({ outcome: 'retry', error_code: 'signing_key_missing' });
		expect(attempt.error_message).toMatch(
			/^Not sent: the Sign node could not sign, because its credential "Durable Jobs callback signing key" is missing or its Hmac Secret is empty/,
		);

		const failed = await waitFor(
			async () =>
				(await failedExecutions(env, RELAY_ID, since)).find((execution) =>
					execution.data.includes('Callback not sent: the credential'),
				),
			{ timeoutMs: 30_000, intervalMs: 500, what: 'a failed Callback relay execution' },
		);
		expect(failed.id).toMatch(/^\d+$/);
		await new Promise((resolve) => setTimeout(resolve, 2_000));
		expect(env.standins.callbacks.received.filter((request) => request.path === path)).toEqual([]);
	});
});
