import { startEnvironment, type Environment } from '../../scripts/lib/environment';
import { waitFor } from '../../scripts/lib/standins';
import { databaseUrl } from '../helpers/db';

/**
 * Deactivating a workflow that starts from Job Trigger releases its connection, in a real n8n:
 * the Dispatcher is unpublished and published again 20 times through n8n's own REST API (what
 * the editor's Publish toggle calls), and the job database's backends are counted in
 * pg_stat_activity after every step.
 */
let env: Environment;
const BROWSER_ID = 'durable-jobs-e2e-browser';
let cookie = '';

beforeAll(async () => {
	env = await startEnvironment({
		databaseUrl: databaseUrl(),
		schema: 'dj_e2e_trigger_cycles',
		log: (line) => {
			if (process.env.DEBUG_E2E) console.log(line);
		},
	});
	const setup = await rest('POST', 'owner/setup', {
		email: 'owner@example.com',
		firstName: 'Durable',
		lastName: 'Jobs',
		password: 'Durable-Jobs-e2e-1',
	});
	expect(setup.status).toBe(200);
});

afterAll(async () => {
	await env?.stop();
});

async function rest(
	method: string,
	path: string,
	body?: unknown,
): Promise<{ status: number; body: { data?: Record<string, unknown> } }> {
	const response = await fetch(`${env.n8n.baseUrl}/rest/${path}`, {
		method,
		headers: {
			'content-type': 'application/json',
			'browser-id': BROWSER_ID,
			...(cookie ? { cookie } : {}),
		},
		body: body === undefined ? undefined : JSON.stringify(body),
	});
	const setCookie = response.headers.get('set-cookie');
	if (setCookie) cookie = setCookie.split(';')[0];
	const text = await response.text();
	let parsed: { data?: Record<string, unknown> } = {};
	try {
		parsed = JSON.parse(text) as typeof parsed;
	} catch {
		// not JSON
	}
	if (response.status >= 400)
		throw new Error(`${method} /rest/${path} answered ${response.status}: ${text.slice(0, 300)}`);
	return { status: response.status, body: parsed };
}

/** Backends of the job database opened by the package in n8n: LISTEN connections and pool. */
async function backends(): Promise<{ listeners: number; pool: number }> {
	const { rows } = await env.jobsDb.query<{ listeners: number; pool: number }>(
		`SELECT count(*) FILTER (WHERE application_name LIKE 'n8n-nodes-durable-jobs trigger%')::int AS listeners,
			count(*) FILTER (WHERE application_name = 'n8n-nodes-durable-jobs')::int AS pool
		FROM pg_stat_activity WHERE datname = current_database()`,
	);
	return rows[0];
}

describe('Job Trigger in n8n: publish / unpublish', () => {
	it('20 unpublish/publish cycles of the Dispatcher: its LISTEN connection closes every time, none accumulates, jobs still run', async () => {
		// The Dispatcher, the Callback relay and the Outbox relay listen.
		await waitFor(async () => ((await backends()).listeners === 3 ? true : undefined), {
			timeoutMs: 30_000,
			intervalMs: 200,
			what: 'three LISTEN connections',
		});
		const before = await backends();
		const counts: Array<{ published: number; unpublished: number; pool: number }> = [];
		for (let cycle = 0; cycle < 20; cycle++) {
			await rest('POST', 'workflows/DjDispatcher0001/deactivate', {});
			const unpublished = await waitFor(
				async () => {
					const now = await backends();
					return now.listeners === 2 ? now : undefined;
				},
				{ timeoutMs: 30_000, intervalMs: 100, what: 'the LISTEN connection to close' },
			);
			const { body } = await rest('GET', 'workflows/DjDispatcher0001');
			await rest('POST', 'workflows/DjDispatcher0001/activate', {
				versionId: body.data?.versionId,
			});
			const published = await waitFor(
				async () => {
					const now = await backends();
					return now.listeners === 3 ? now : undefined;
				},
				{ timeoutMs: 30_000, intervalMs: 100, what: 'the LISTEN connection to open' },
			);
			counts.push({
				published: published.listeners,
				unpublished: unpublished.listeners,
				pool: published.pool,
			});
		}
		const after = await backends();
		console.log(
			`[trigger-cycles] LISTEN connections before ${before.listeners}, after 20 cycles ${after.listeners}; pool connections before ${before.pool}, after ${after.pool}, most during the cycles ${Math.max(...counts.map((count) => count.pool))}`,
		);
		expect(counts.every((count) => count.published === 3 && count.unpublished === 2)).toBe(true);
		expect(after.listeners).toBe(3);

		const accepted = await env.request('jobs', {
			method: 'POST',
			body: { document: { id: 'after-cycles', text: 'name: Ada' } },
		});
		expect(accepted.status).toBe(202);
		const statusUrl = (accepted.body as { status_url: string }).status_url;
		await waitFor(
			async () => {
				const answer = await env.request(statusUrl.replace(/^\/webhook\//, ''));
				return (answer.body as { status: string }).status === 'done' ? true : undefined;
			},
			{ timeoutMs: 60_000, intervalMs: 250, what: 'the job after the cycles' },
		);
	});
});
