/// <reference lib="dom" />
/**
 * The jobs dashboard (workflows/10-dashboard.json) in a real n8n, with the packed package and
 * every bundled workflow, driven over HTTP and in headless Chromium.
 *
 * Known jobs are written straight through the core (JobStore on the job database) into queues no
 * bundled workflow leases, so their counts are exact; one job goes through the receiver, the
 * dispatcher and the worker, so its attempts carry real n8n execution ids.
 *
 * Without Chromium the browser part is skipped with a message (see test/helpers/browser.ts);
 * the HTTP part (authentication, the action header, CORS) always runs.
 */
import { createHmac } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

import pg from 'pg';
import type { Page } from 'playwright-core';

import {
	DASHBOARD_LOGIN,
	DASHBOARD_SESSION_SECRET,
	REPO_DIR,
	startEnvironment,
	type Environment,
} from '../../scripts/lib/environment';
import { waitFor } from '../../scripts/lib/standins';
import { DurableJobsError, JobStore, migrate, type EnqueueResult } from '../../src/core';
import {
	CHROMIUM_MISSING_MESSAGE,
	chromiumPath,
	launchBrowser,
	type Browser,
} from '../helpers/browser';
import { databaseUrl } from '../helpers/db';

const SCHEMA = 'dj_e2e_dashboard';
const KNOWN = 'dash-known';
const HOSTILE = 'dash-hostile';
const BULK = 'dash-bulk';
const HISTORY = 'dash-history';
const IMAGES = join(REPO_DIR, 'docs', 'images');

const HOSTILE_KEY = `<img src=x onerror="window.__pwned='key'">`;
const HOSTILE_CORRELATION = `<script>window.__pwned='correlation'</script>`;
const HOSTILE_PAYLOAD = {
	html: `<script>window.__pwned='payload-script';alert('payload')</script>`,
	image: `<img src=x onerror="window.__pwned='payload-img';alert('img')">`,
};
const HOSTILE_ERROR = `<img src=x onerror="window.__pwned='error';alert('error')"><script>alert('error2')</script>`;

let env: Environment;
let store: JobStore;
let jobsDb: pg.Pool;
const known: Record<string, string> = {};
let hostileJobId: string;
const bulkFailed: string[] = [];

function ok<T>(result: T | DurableJobsError): T {
	if (result instanceof DurableJobsError) throw result;
	return result;
}

async function enqueue(queue: string, count: number, extra: object = {}): Promise<string[]> {
	const results = await store.enqueue(
		Array.from({ length: count }, (_, index) => ({
			queue,
			payload: { n: index, queue },
			...extra,
		})),
	);
	return results.map((result) => ok<EnqueueResult>(result).jobId);
}

async function leaseAndFinish(
	queue: string,
	count: number,
	outcome: 'succeeded' | 'failed' | 'retry' | null,
	options: { leaseMs?: number; errorMessage?: string; delayMs?: number } = {},
): Promise<string[]> {
	const leased = await store.lease({ queue, limit: count, leaseMs: options.leaseMs ?? 3_600_000 });
	expect(leased).toHaveLength(count);
	if (outcome !== null) {
		const results = await store.complete(
			leased.map((job) => ({
				jobId: job.id,
				attemptId: job.attempt_id,
				outcome,
				result: { ok: true },
				errorCode: outcome === 'succeeded' ? null : 'http_400',
				errorClass: outcome === 'failed' ? ('needs_mapping' as const) : null,
				errorMessage: options.errorMessage ?? 'The AI endpoint answered HTTP 400',
				delayMs: options.delayMs,
			})),
		);
		for (const result of results) expect(ok(result).applied).toBe(true);
	}
	return leased.map((job) => job.id);
}

async function statusOf(jobId: string): Promise<string> {
	const { rows } = await jobsDb.query(`SELECT status FROM "${SCHEMA}".jobs WHERE id = $1`, [jobId]);
	return rows[0]?.status;
}

/** HS256 JWT, to forge tokens the way an attacker (wrong secret) or a stale page (expired) would. */
function jwt(payload: object, secret: string): string {
	const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
	const unsigned = `${part({ alg: 'HS256', typ: 'JWT' })}.${part(payload)}`;
	return `${unsigned}.${createHmac('sha256', secret).update(unsigned).digest('base64url')}`;
}

function basic(user: string, password: string): string {
	return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}

async function http(
	path: string,
	init: { method?: string; headers?: Record<string, string>; body?: string } = {},
) {
	const response = await fetch(env.n8n.webhookUrl(path), {
		method: init.method ?? 'GET',
		headers: init.headers,
		body: init.body,
	});
	return { status: response.status, headers: response.headers, text: await response.text() };
}

/** The session token a page load hands to the browser (the admin's login opens the page). */
async function sessionToken(): Promise<string> {
	const page = await http('jobs/dashboard', {
		headers: { Authorization: basic(DASHBOARD_LOGIN.user, DASHBOARD_LOGIN.password) },
	});
	expect(page.status).toBe(200);
	const config = /<script type="application\/json" id="dj-config">\s*([\s\S]*?)\s*<\/script>/.exec(
		page.text,
	);
	return (JSON.parse(config![1]) as { token: string }).token;
}

beforeAll(async () => {
	env = await startEnvironment({
		databaseUrl: databaseUrl(),
		schema: SCHEMA,
		pollSeconds: 1,
		log: (line) => {
			if (process.env.DEBUG_E2E) console.log(line);
		},
	});
	jobsDb = env.jobsDb;
	await migrate(jobsDb, SCHEMA);
	store = new JobStore(jobsDb, { schema: SCHEMA });

	// A known set in a queue no workflow leases: 2 done, 1 failed, 1 cancelled, 2 running (one
	// with an expired lease), 1 waiting for its retry, 1 scheduled, 3 ready.
	await enqueue(KNOWN, 2);
	[known.done1, known.done2] = await leaseAndFinish(KNOWN, 2, 'succeeded');
	await enqueue(KNOWN, 1, { idempotencyKey: 'known-failed-key', correlationId: 'known-corr' });
	[known.failed] = await leaseAndFinish(KNOWN, 1, 'failed');
	[known.cancelled] = await enqueue(KNOWN, 1);
	await store.cancel([known.cancelled]);
	await enqueue(KNOWN, 1);
	[known.running] = await leaseAndFinish(KNOWN, 1, null);
	await enqueue(KNOWN, 1);
	[known.expired] = await leaseAndFinish(KNOWN, 1, null, { leaseMs: 1_000 });
	await enqueue(KNOWN, 1);
	[known.retrying] = await leaseAndFinish(KNOWN, 1, 'retry', { delayMs: 3_600_000 });
	[known.scheduled] = await enqueue(KNOWN, 1, {
		runAt: new Date(Date.now() + 3_600_000).toISOString(),
	});
	[known.ready1, known.ready2, known.ready3] = await enqueue(KNOWN, 3, {
		correlationId: 'known-ready',
	});

	// Hostile strings in every text a job carries.
	[hostileJobId] = ok(
		(
			await store.enqueue([
				{
					queue: HOSTILE,
					payload: HOSTILE_PAYLOAD,
					idempotencyKey: HOSTILE_KEY,
					correlationId: HOSTILE_CORRELATION,
				},
			])
		).map((result) => ok(result).jobId),
	);
	await leaseAndFinish(HOSTILE, 1, 'failed', { errorMessage: HOSTILE_ERROR });

	// Three failed jobs for the requeue of a filtered set.
	await enqueue(BULK, 3);
	bulkFailed.push(...(await leaseAndFinish(BULK, 3, 'failed')));
	// An hour of history: 200 done and 40 failed jobs, finished at different minutes.
	await enqueue(HISTORY, 200);
	await leaseAndFinish(HISTORY, 200, 'succeeded');
	await enqueue(HISTORY, 40);
	await leaseAndFinish(HISTORY, 40, 'failed');
	await jobsDb.query(
		`UPDATE "${SCHEMA}".jobs
		 SET finished_at = now() - make_interval(mins => 1 + ((seq * seq) % 50)::int, secs => (seq % 50)::int),
		     created_at = now() - make_interval(mins => 2 + ((seq * seq) % 50)::int)
		 WHERE queue = $1`,
		[HISTORY],
	);
	// The expired lease must have run out before the counts are read.
	await new Promise((resolve) => setTimeout(resolve, 1_200));
});

afterAll(async () => {
	await env?.stop();
});

// ---------------------------------------------------------------------------------------- HTTP

describe('dashboard endpoints over HTTP', () => {
	const apiCalls = [
		{ path: 'jobs/dashboard/api/overview', method: 'GET' },
		{ path: 'jobs/dashboard/api/jobs?queue=dash-known', method: 'GET' },
		{ path: 'jobs/dashboard/api/job?job_id=JOB', method: 'GET' },
		{ path: 'jobs/dashboard/api/action', method: 'POST' },
	];

	it('the page answers 401 without the login and with a wrong password, and shows nothing', async () => {
		for (const headers of [
			{} as Record<string, string>,
			{ Authorization: basic(DASHBOARD_LOGIN.user, 'wrong') },
		]) {
			const answer = await http('jobs/dashboard', { headers });
			expect(answer.status).toBe(401);
			expect(answer.headers.get('www-authenticate')).toMatch(/^Basic/);
			expect(answer.text).not.toMatch(/dj-config|dash-known|<html/i);
		}
	});

	it('every JSON call answers 401 without a session token and 403 with a wrong, forged or expired one; no data in any answer', async () => {
		const now = Math.floor(Date.now() / 1000);
		const variants: Array<[Record<string, string>, number]> = [
			[{}, 401],
			[{ Authorization: basic(DASHBOARD_LOGIN.user, DASHBOARD_LOGIN.password) }, 403],
			[{ Authorization: `Bearer ${jwt({ sub: 'x', exp: now + 600 }, 'not-the-secret')}` }, 403],
			[
				{ Authorization: `Bearer ${jwt({ sub: 'x', exp: now - 60 }, DASHBOARD_SESSION_SECRET)}` },
				403,
			],
			[{ Authorization: 'Bearer not.a.jwt' }, 403],
		];
		for (const call of apiCalls) {
			for (const [headers, expected] of variants) {
				const answer = await http(call.path.replace('JOB', known.failed), {
					method: call.method,
					headers: {
						...headers,
						'Content-Type': 'application/json',
						'X-Durable-Jobs-Action': 'requeue',
					},
					body:
						call.method === 'POST'
							? JSON.stringify({
									action: 'requeue',
									job_ids: [known.failed],
									as_of: new Date().toISOString(),
								})
							: undefined,
				});
				expect(answer.status, `${call.method} ${call.path} ${JSON.stringify(headers)}`).toBe(
					expected,
				);
				expect(answer.text).not.toMatch(/dash-known|known-failed-key|"queues"|"jobs"/);
			}
		}
		expect(await statusOf(known.failed)).toBe('failed');
	});

	it('with the session token: the JSON calls answer; a write without the action header (or with another action in it) is refused with 403 and changes nothing', async () => {
		const token = await sessionToken();
		const auth = { Authorization: `Bearer ${token}` };
		const overview = await http('jobs/dashboard/api/overview', { headers: auth });
		expect(overview.status).toBe(200);
		expect(overview.headers.get('content-type')).toMatch(/application\/json/);
		const queues = (JSON.parse(overview.text) as { queues: Array<{ queue: string }> }).queues;
		expect(queues.map((queue) => queue.queue)).toEqual(
			expect.arrayContaining([KNOWN, HOSTILE, BULK]),
		);

		const list = JSON.parse(
			(await http(`jobs/dashboard/api/jobs?queue=${KNOWN}&status=failed`, { headers: auth })).text,
		) as { jobs: Array<{ job_id: string }>; as_of: string };
		expect(list.jobs.map((job) => job.job_id)).toEqual([known.failed]);

		const body = JSON.stringify({ action: 'requeue', job_ids: [known.failed], as_of: list.as_of });
		for (const header of [undefined, 'cancel', '']) {
			const refused = await http('jobs/dashboard/api/action', {
				method: 'POST',
				headers: {
					...auth,
					'Content-Type': 'application/json',
					...(header === undefined ? {} : { 'X-Durable-Jobs-Action': header }),
				},
				body,
			});
			expect(refused.status).toBe(403);
			expect(JSON.parse(refused.text)).toMatchObject({
				status: 403,
				code: 'action_header_missing',
			});
		}
		// A form-encoded body (what a cross-site form sends) is refused the same way.
		const form = await http('jobs/dashboard/api/action', {
			method: 'POST',
			headers: { ...auth, 'Content-Type': 'application/x-www-form-urlencoded' },
			body: `action=requeue&job_ids=${known.failed}&as_of=${encodeURIComponent(list.as_of)}`,
		});
		expect(form.status).toBe(403);
		expect(await statusOf(known.failed)).toBe('failed');

		// Not found and bad input.
		const missing = await http(
			'jobs/dashboard/api/job?job_id=0190d1a2-0000-7000-8000-000000000000',
			{
				headers: auth,
			},
		);
		expect(missing.status).toBe(404);
		const bad = await http(
			`jobs/dashboard/api/jobs?status=${encodeURIComponent("done' OR 1=1 --")}`,
			{
				headers: auth,
			},
		);
		expect(bad.status).toBe(400);
		expect(JSON.parse(bad.text)).toMatchObject({ status: 400, field: 'status' });
	});

	// The workflow keeps no data of its successful executions, and an error output makes the
	// execution succeed: the answer itself must say what went wrong, by its code.
	it('with the job database cut off, a JSON call answers 503 naming the error code, without internal detail; it recovers', async () => {
		const token = await sessionToken();
		const auth = { Authorization: `Bearer ${token}` };
		await env.proxy.cut();
		try {
			const answer = await http('jobs/dashboard/api/overview', { headers: auth });
			expect(answer.status).toBe(503);
			expect(answer.headers.get('content-type')).toContain('application/problem+json');
			const body = JSON.parse(answer.text) as { status: number; code: string; detail: string };
			expect(body).toMatchObject({ status: 503, code: 'database_unavailable' });
			expect(body.detail).toContain('(database_unavailable)');
			expect(body.detail).not.toMatch(/execution has the cause/);
			expect(answer.text).not.toMatch(/ECONNREFUSED|ECONNRESET|127\.0\.0\.1|password|credential/i);
		} finally {
			await env.proxy.restore();
		}
		await waitFor(
			async () =>
				(await http('jobs/dashboard/api/overview', { headers: auth })).status === 200
					? true
					: undefined,
			{ timeoutMs: 30_000, intervalMs: 500, what: 'the dashboard to recover' },
		);
	});

	it("n8n's CORS preflight echoes any origin (Allowed Origins defaults to *) but never allows credentials, so only a request carrying the session token itself can pass", async () => {
		const preflight = await fetch(env.n8n.webhookUrl('jobs/dashboard/api/action'), {
			method: 'OPTIONS',
			headers: {
				Origin: 'https://attacker.example',
				'Access-Control-Request-Method': 'POST',
				'Access-Control-Request-Headers': 'content-type,x-durable-jobs-action',
			},
		});
		expect(preflight.status).toBe(204);
		expect(preflight.headers.get('access-control-allow-origin')).toBe('https://attacker.example');
		expect(preflight.headers.get('access-control-allow-credentials')).toBeNull();
	});
});

// ---------------------------------------------------------------------------------------- browser

const chromium = chromiumPath();
if (!chromium) console.warn(`[dashboard.test] ${CHROMIUM_MISSING_MESSAGE}`);

(!chromium ? describe.skip : describe)('the dashboard in headless Chromium', () => {
	let browser: Browser;
	let page: Page;
	const dialogs: string[] = [];
	let documentJob: { job_id: string; document_id: string };

	beforeAll(async () => {
		mkdirSync(IMAGES, { recursive: true });
		browser = await launchBrowser({
			httpCredentials: {
				username: DASHBOARD_LOGIN.user,
				password: DASHBOARD_LOGIN.password,
				origin: env.n8n.baseUrl,
			},
		});
		page = await browser.context.newPage();
		page.on('dialog', (dialog) => {
			dialogs.push(dialog.message());
			void dialog.dismiss();
		});

		// Some traffic through the bundled workflows (for the chart), and one document the AI
		// rejects once: its job fails, and after a requeue it runs to done.
		const documentId = `dash-doc-${Date.now()}`;
		env.standins.ai.script(documentId, [400]);
		const accepted = await env.request('jobs', {
			body: { document: { id: documentId, text: 'name: Grace Hopper, amount: 12' } },
			headers: { 'Idempotency-Key': `dash-${documentId}` },
		});
		expect(accepted.status).toBe(202);
		documentJob = { job_id: (accepted.body as { job_id: string }).job_id, document_id: documentId };
		for (let index = 0; index < 12; index++)
			await env.request('jobs', {
				body: { document: { id: `dash-ok-${index}`, text: `amount: ${index}` } },
			});
		await waitFor(
			async () => ((await statusOf(documentJob.job_id)) === 'failed' ? true : undefined),
			{
				timeoutMs: 90_000,
				intervalMs: 250,
				what: 'the rejected document to fail',
			},
		);
	});

	afterAll(async () => {
		await browser?.close();
	});

	async function openDashboard(): Promise<void> {
		await page.goto(env.n8n.webhookUrl('jobs/dashboard'));
		await page.waitForSelector(`#queues-body tr[data-queue="${KNOWN}"]`, { timeout: 30_000 });
	}

	async function queueRow(queue: string): Promise<string[]> {
		return await page
			.locator(`#queues-body tr[data-queue="${queue}"] td`)
			.evaluateAll((cells) => cells.map((cell) => cell.textContent?.trim() ?? ''));
	}

	async function applyFilter(filter: {
		queue?: string;
		status?: string;
		text?: string;
		from?: string;
	}) {
		await page.selectOption('#f-queue', filter.queue ?? '');
		await page.selectOption('#f-status', filter.status ?? '');
		await page.fill('#f-text', filter.text ?? '');
		await page.fill('#f-from', filter.from ?? '');
		// The answer to this filter (not an auto-refresh with the previous one, not a CORS preflight).
		const answered = page.waitForResponse((response) => {
			if (response.request().method() !== 'GET' || !response.url().includes('/api/jobs?'))
				return false;
			const query = new URL(response.url()).searchParams;
			return (
				(query.get('queue') ?? '') === (filter.queue ?? '') &&
				(query.get('status') ?? '') === (filter.status ?? '') &&
				(query.get('text') ?? '') === (filter.text ?? '').trim() &&
				query.has('from') === Boolean(filter.from)
			);
		});
		await page.click('#filter button[type=submit]');
		const response = await answered;
		// Shown once the table lists the answer's jobs (or says none match): a fixed pause here
		// let a loaded machine read the previous filter's rows.
		const { jobs } = (await response.json()) as { jobs: Array<{ job_id: string }> };
		await page.waitForFunction(
			(ids) => {
				const rows = Array.from(document.querySelectorAll<HTMLElement>('#jobs-body tr'));
				const shown = rows.flatMap((row) => (row.dataset.jobId ? [row.dataset.jobId] : []));
				if (ids.length === 0)
					return rows.length === 1 && rows[0].querySelector('td.empty') !== null;
				return shown.join(',') === ids.join(',');
			},
			jobs.map((job) => job.job_id),
		);
	}

	async function listedIds(): Promise<string[]> {
		return await page
			.locator('#jobs-body tr[data-job-id]')
			.evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset.jobId ?? ''));
	}

	async function openStory(jobId: string): Promise<void> {
		const answered = page.waitForResponse(
			(response) =>
				response.request().method() === 'GET' &&
				response.url().includes('/api/job?') &&
				new URL(response.url()).searchParams.get('job_id') === jobId,
		);
		await page.evaluate((id) => {
			location.hash = `job=${id}`;
		}, jobId);
		await answered;
		await page.waitForFunction(
			(id) => document.getElementById('story-title')?.textContent === `Job ${id}`,
			jobId,
		);
	}

	async function confirm(button: string): Promise<void> {
		await page.click(button);
		await page.waitForSelector('#confirm[open]');
		const answered = page.waitForResponse(
			(response) =>
				response.request().method() === 'POST' && response.url().includes('/api/action'),
		);
		await page.click('#confirm-yes');
		const response = await answered;
		expect(response.status()).toBe(200);
		await page.waitForSelector('#notice:not([hidden])');
	}

	it('the page loads (opaque-origin sandbox, no external requests) and shows every queue with the right counts and chart', async () => {
		const external: string[] = [];
		page.on('request', (request) => {
			if (!request.url().startsWith(env.n8n.baseUrl)) external.push(request.url());
		});
		await openDashboard();
		// Ready, Scheduled, Retrying, Running, Expired leases, Done, Failed, Cancelled.
		expect((await queueRow(KNOWN)).slice(1, 9)).toEqual(['3', '2', '1', '2', '1', '2', '1', '1']);
		expect((await queueRow(BULK)).slice(1, 9)).toEqual(['0', '0', '0', '0', '0', '0', '3', '0']);
		const chart = page.locator(`#queues-body tr[data-queue="${KNOWN}"] svg.chart`);
		expect(await chart.getAttribute('data-done')).toBe('2');
		expect(await chart.getAttribute('data-failed')).toBe('1');
		// Each job is charted in the minute it finished.
		const history = page.locator(`#queues-body tr[data-queue="${HISTORY}"] svg.chart`);
		expect(await history.getAttribute('data-done')).toBe('200');
		expect(await history.getAttribute('data-failed')).toBe('40');
		const { rows: minutes } = await jobsDb.query(
			`SELECT status, count(DISTINCT date_trunc('minute', finished_at))::int AS n
			 FROM "${SCHEMA}".jobs WHERE queue = $1 GROUP BY status ORDER BY status`,
			[HISTORY],
		);
		expect(minutes).toEqual([
			{ status: 'done', n: await history.locator('rect.done').count() },
			{ status: 'failed', n: await history.locator('rect.failed').count() },
		]);
		// The page runs in n8n's webhook sandbox: an opaque origin, so no cookies and no storage.
		expect(await page.evaluate(() => origin)).toBe('null');
		// Every resource is in the page or on this n8n: nothing from a CDN, no external fonts.
		expect(external).toEqual([]);
		await waitFor(async () => (Number((await queueRow('documents'))[6]) > 0 ? true : undefined), {
			timeoutMs: 60_000,
			intervalMs: 500,
			what: 'documents done in the overview',
		});
		await page.screenshot({ path: join(IMAGES, 'dashboard-queues.png') });
	});

	it('refreshes by itself without reloading the page', async () => {
		await page.evaluate(() => {
			(window as unknown as { __sameDocument: boolean }).__sameDocument = true;
		});
		const [newJob] = await enqueue(KNOWN, 1);
		await page.waitForFunction(
			(queue) =>
				document.querySelector(`#queues-body tr[data-queue="${queue}"] td:nth-child(2)`)
					?.textContent === '4',
			KNOWN,
			{ timeout: 20_000 },
		);
		expect(
			await page.evaluate(() => (window as unknown as { __sameDocument?: boolean }).__sameDocument),
		).toBe(true);
		await store.cancel([newJob]);
	});

	it('filters: queue, status, text (job id, idempotency key, correlation id) and time range', async () => {
		await applyFilter({ queue: KNOWN, status: 'failed' });
		expect(await listedIds()).toEqual([known.failed]);
		await applyFilter({ queue: KNOWN, status: 'running' });
		expect((await listedIds()).sort()).toEqual([known.running, known.expired].sort());
		await applyFilter({ queue: KNOWN });
		expect((await listedIds()).length).toBe(12);
		await applyFilter({ text: 'known-failed-key' });
		expect(await listedIds()).toEqual([known.failed]);
		await applyFilter({ text: 'known-ready' });
		expect(await listedIds()).toEqual([known.ready3, known.ready2, known.ready1]);
		await applyFilter({ text: known.scheduled });
		expect(await listedIds()).toEqual([known.scheduled]);
		await applyFilter({ queue: KNOWN, from: '2099-01-01T00:00:00' });
		expect(await listedIds()).toEqual([]);
		expect(await page.textContent('#jobs-body')).toContain('No jobs match this filter.');
	});

	it("a job's story shows its attempts with links to the n8n executions, and a requeue of the failed job runs it to done", async () => {
		await openStory(documentJob.job_id);
		const story = page.locator('#story');
		expect(await story.textContent()).toContain(`dash-${documentJob.document_id}`);
		const links = await page
			.locator('#story a[href*="/executions/"]')
			.evaluateAll((anchors) => anchors.map((anchor) => anchor.getAttribute('href') ?? ''));
		// The Dispatcher starts from Job Trigger and runs the job's steps itself: the attempt and
		// the error it recorded both link to that one execution.
		expect(links.length).toBeGreaterThanOrEqual(2);
		expect(new Set(links).size).toBe(1);
		expect(links[0]).toMatch(/^\/workflow\/DjDispatcher0001\/executions\/\d+$/);
		const n8nDb = new pg.Client({ connectionString: env.n8n.databaseUrl });
		await n8nDb.connect();
		try {
			for (const link of links) {
				const [, workflowId, executionId] = /^\/workflow\/([^/]+)\/executions\/(\d+)$/.exec(link)!;
				const { rows } = await n8nDb.query(
					`SELECT 1 FROM execution_entity WHERE id = $1 AND "workflowId" = $2`,
					[executionId, workflowId],
				);
				expect(rows, link).toHaveLength(1);
			}
		} finally {
			await n8nDb.end();
		}
		expect(await page.isVisible('#story-requeue')).toBe(true);
		expect(await page.isVisible('#story-cancel')).toBe(false);

		await confirm('#story-requeue');
		expect(await page.textContent('#notice')).toBe('Requeued 1 of 1 job.');
		await waitFor(
			async () => ((await statusOf(documentJob.job_id)) === 'done' ? true : undefined),
			{
				timeoutMs: 90_000,
				intervalMs: 250,
				what: 'the requeued job to be done',
			},
		);
		await page.waitForFunction(
			() => document.querySelector('#story .badge')?.textContent === 'done',
			undefined,
			{ timeout: 30_000 },
		);
		const outcomes = await page
			.locator('#story table.attempts')
			.first()
			.locator('tbody tr td:nth-child(2)')
			.allTextContents();
		expect(outcomes).toEqual(['failed', 'succeeded']);
		// The picture for the README: the whole story of the requeued job.
		await page.setViewportSize({ width: 1440, height: 1700 });
		await page.locator('#story-panel').screenshot({ path: join(IMAGES, 'dashboard-story.png') });
		await page.setViewportSize({ width: 1440, height: 900 });
	});

	it('cancel of a queued job, after a confirmation', async () => {
		await openStory(known.ready1);
		expect(await page.isVisible('#story-requeue')).toBe(false);
		// Dismissing the confirmation changes nothing.
		await page.click('#story-cancel');
		await page.waitForSelector('#confirm[open]');
		await page.click('#confirm-no');
		expect(await statusOf(known.ready1)).toBe('queued');
		await confirm('#story-cancel');
		expect(await page.textContent('#notice')).toBe('Cancelled 1 of 1 job.');
		expect(await statusOf(known.ready1)).toBe('cancelled');
		await page.waitForFunction(
			() => document.querySelector('#story .badge')?.textContent === 'cancelled',
			undefined,
			{ timeout: 20_000 },
		);
		// The reason of the cancel, not an error.
		const headings = await page.locator('#story h3').allTextContents();
		expect(headings).toContain('Cancelled');
		expect(headings).not.toContain('Error');
		const reason = page.locator('#story h3:text-is("Cancelled") + dl.facts');
		expect(await reason.locator('dt').allTextContents()).toEqual(['Reason']);
		expect(await reason.locator('dd').textContent()).toBe('Cancelled from the jobs dashboard');
	});

	it('requeue of a filtered set with a limit; repeating the request changes nothing more', async () => {
		await applyFilter({ queue: BULK });
		await page.fill('#bulk-limit', '2');
		const actions: string[] = [];
		page.on('request', (request) => {
			if (request.method() === 'POST' && request.url().includes('/api/action'))
				actions.push(request.postData() ?? '');
		});
		await confirm('#bulk-requeue');
		expect(await page.textContent('#notice')).toBe('Requeued 2 of 2 jobs.');
		const statuses = await Promise.all(bulkFailed.map((id) => statusOf(id)));
		expect(statuses.filter((status) => status === 'queued')).toHaveLength(2);
		expect(statuses.filter((status) => status === 'failed')).toHaveLength(1);
		// The same request again (a double submit, a retry): nothing more changes.
		const token = await sessionToken();
		const again = await http('jobs/dashboard/api/action', {
			method: 'POST',
			headers: {
				Authorization: `Bearer ${token}`,
				'Content-Type': 'application/json',
				'X-Durable-Jobs-Action': 'requeue',
			},
			body: actions[0],
		});
		expect(again.status).toBe(200);
		expect(JSON.parse(again.text)).toMatchObject({ action: 'requeue', requested: 2, changed: 0 });
		expect(await Promise.all(bulkFailed.map((id) => statusOf(id)))).toEqual(statuses);
	});

	it('payload, keys and error with <script> and <img onerror> are shown as text: no dialog, no script runs', async () => {
		await applyFilter({ text: HOSTILE_KEY });
		expect(await listedIds()).toEqual([hostileJobId]);
		const row = page.locator(`#jobs-body tr[data-job-id="${hostileJobId}"]`);
		expect(await row.textContent()).toContain(HOSTILE_KEY);
		expect(await row.textContent()).toContain(HOSTILE_CORRELATION);
		await openStory(hostileJobId);
		await page.click('#story details summary');
		const storyText = (await page.textContent('#story')) ?? '';
		expect(storyText).toContain(HOSTILE_PAYLOAD.html);
		expect(storyText).toContain(HOSTILE_PAYLOAD.image.replace(/"/g, '\\"'));
		expect(storyText).toContain(HOSTILE_ERROR);
		expect(storyText).toContain(HOSTILE_KEY);
		await page.waitForTimeout(1_000);
		expect(
			await page.evaluate(() => ({
				pwned: (window as unknown as { __pwned?: string }).__pwned ?? null,
				injected: document.querySelectorAll(
					'#jobs-body img, #jobs-body script, #story img, #story script',
				).length,
			})),
		).toEqual({ pwned: null, injected: 0 });
		expect(dialogs).toEqual([]);
		await page.screenshot({ path: join(IMAGES, 'dashboard-hostile.png') });
	});

	it('another site cannot act through the browser of a signed-in admin: cross-origin POSTs without the header change nothing, and the page cannot be read', async () => {
		let server: Server | undefined;
		try {
			const target = env.n8n.webhookUrl('jobs/dashboard/api/action');
			const pageUrl = env.n8n.webhookUrl('jobs/dashboard');
			const evil = `<!doctype html><html><body>
<form id="f" method="POST" action="${target}" target="sink">
<input name="action" value="requeue"><input name="job_ids" value="${known.failed}"><input name="as_of" value="2099-01-01T00:00:00Z">
</form><iframe name="sink"></iframe>
<script>
window.results = {};
const body = JSON.stringify({ action: 'requeue', job_ids: ['${known.failed}'], as_of: '2099-01-01T00:00:00Z' });
(async () => {
	try { await fetch('${target}', { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'Content-Type': 'text/plain' }, body }); window.results.simple = 'sent'; } catch (e) { window.results.simple = 'blocked'; }
	try { const r = await fetch('${target}', { method: 'POST', credentials: 'include', headers: { 'Content-Type': 'application/json', 'X-Durable-Jobs-Action': 'requeue' }, body }); window.results.withHeader = 'status ' + r.status; } catch (e) { window.results.withHeader = 'blocked'; }
	try { const r = await fetch('${pageUrl}', { credentials: 'include' }); window.results.readPage = (await r.text()).slice(0, 50); } catch (e) { window.results.readPage = 'blocked'; }
	document.getElementById('f').submit();
	window.results.done = true;
})();
</script></body></html>`;
			server = createServer((_request, response) => {
				response.writeHead(200, { 'Content-Type': 'text/html' });
				response.end(evil);
			});
			await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
			const attacker = await browser.context.newPage();
			// What n8n answered to the attacker's requests to the action endpoint.
			const answered: Array<{ method: string; status: number; withHeader: boolean }> = [];
			attacker.on('response', (response) => {
				if (response.url() !== target) return;
				const request = response.request();
				answered.push({
					method: request.method(),
					status: response.status(),
					withHeader: 'x-durable-jobs-action' in request.headers(),
				});
			});
			await attacker.goto(`http://localhost:${(server.address() as AddressInfo).port}/`);
			await attacker.waitForFunction(
				() => (window as unknown as { results: { done?: boolean } }).results?.done,
			);
			await attacker.waitForTimeout(2_000);
			const results = await attacker.evaluate(
				() => (window as unknown as { results: Record<string, string> }).results,
			);
			// The JSON request with the action header needs a preflight, which n8n answers without
			// Access-Control-Allow-Credentials: the browser never sends it. Reading the page (and its
			// session token) from another origin is refused the same way.
			expect(results.withHeader).toBe('blocked');
			expect(results.readPage).toBe('blocked');
			// Only the preflight and the two header-less POSTs reached n8n; each POST was refused.
			expect(answered.filter((answer) => answer.method === 'POST' && answer.withHeader)).toEqual(
				[],
			);
			expect(answered.filter((answer) => answer.method === 'POST').length).toBeGreaterThanOrEqual(
				2,
			);
			for (const answer of answered.filter((entry) => entry.method === 'POST'))
				expect([401, 403]).toContain(answer.status);
			await attacker.close();
			expect(await statusOf(known.failed)).toBe('failed');
			const { rows } = await jobsDb.query(
				`SELECT count(*)::int AS n FROM "${SCHEMA}".job_attempts WHERE job_id = $1`,
				[known.failed],
			);
			expect(rows[0].n).toBe(1);
		} finally {
			server?.close();
		}
	});
});
