/**
 * Smoke test of the e2e harness itself: a real n8n 2.x on PostgreSQL answering a published
 * webhook workflow that uses a community node (a throw-away probe package) and a Code node (task
 * runner on Node 24), this package's tarball installed too when a build exists, and the stand-in
 * services. The first run installs n8n into the cache (minutes).
 */
import {
	existsSync,
	mkdirSync,
	mkdtempSync,
	readdirSync,
	readFileSync,
	rmSync,
	writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { ensureN8n, packPackage, startN8n, type N8nInstance } from '../../scripts/lib/n8n';
import { startPostgres, type RunningPostgres } from '../../scripts/lib/postgres';
import { findRedis, startRedis } from '../../scripts/lib/redis';
import { startStandins, type Standins } from '../../scripts/lib/standins';

const repoDir = resolve(__dirname, '../..');
const log = (line: string) => console.log(`[harness] ${line}`);

const WORKFLOW_ID = 'HarnessSmoke0001';
const workflow = {
	id: WORKFLOW_ID,
	name: 'Harness smoke: echo',
	settings: { executionOrder: 'v1' },
	active: false,
	nodes: [
		{
			id: 'a3c1c7f0-5f0b-4c55-9a43-2d6a1d0e0001',
			name: 'Webhook',
			type: 'n8n-nodes-base.webhook',
			typeVersion: 2.1,
			position: [0, 0],
			webhookId: '6f1e9a52-8a2b-4d0c-b1a4-2f3c4d5e6f70',
			parameters: {
				httpMethod: 'POST',
				path: 'harness-echo',
				responseMode: 'responseNode',
				options: {},
			},
		},
		{
			id: 'a3c1c7f0-5f0b-4c55-9a43-2d6a1d0e0003',
			name: 'Harness Probe',
			type: 'n8n-nodes-harness-probe.harnessProbe',
			typeVersion: 1,
			position: [220, 0],
			parameters: {},
		},
		{
			id: 'a3c1c7f0-5f0b-4c55-9a43-2d6a1d0e0004',
			name: 'Code',
			type: 'n8n-nodes-base.code',
			typeVersion: 2,
			position: [440, 0],
			parameters: {
				jsCode: "return $input.all().map((i) => ({ json: { ...i.json, code: 'ran' } }));",
			},
		},
		{
			id: 'a3c1c7f0-5f0b-4c55-9a43-2d6a1d0e0002',
			name: 'Respond',
			type: 'n8n-nodes-base.respondToWebhook',
			typeVersion: 1.5,
			position: [660, 0],
			parameters: {
				respondWith: 'json',
				responseBody:
					'={{ { echo: $json.body.message ?? null, probe: $json.probe, code: $json.code } }}',
				options: { responseCode: 201 },
			},
		},
	],
	connections: {
		Webhook: { main: [[{ node: 'Harness Probe', type: 'main', index: 0 }]] },
		'Harness Probe': { main: [[{ node: 'Code', type: 'main', index: 0 }]] },
		Code: { main: [[{ node: 'Respond', type: 'main', index: 0 }]] },
	},
};
const expected = (message: string) => ({ echo: message, probe: 'loaded', code: 'ran' });

/**
 * A throw-away community package, so the install path (npm tarball into .n8n/nodes, n8n-workflow
 * resolved from n8n itself) is proven even before this package has been built.
 */
async function packProbePackage(dir: string): Promise<string> {
	const pkgDir = join(dir, 'probe-package');
	mkdirSync(join(pkgDir, 'dist'), { recursive: true });
	writeFileSync(
		join(pkgDir, 'package.json'),
		JSON.stringify({
			name: 'n8n-nodes-harness-probe',
			version: '0.0.1',
			keywords: ['n8n-community-node-package'],
			files: ['dist'],
			n8n: { n8nNodesApiVersion: 1, nodes: ['dist/HarnessProbe.node.js'] },
			peerDependencies: { 'n8n-workflow': '*' },
		}),
	);
	writeFileSync(
		join(pkgDir, 'dist', 'HarnessProbe.node.js'),
		`const { NodeConnectionTypes } = require('n8n-workflow');
class HarnessProbe {
	constructor() {
		this.description = {
			displayName: 'Harness Probe', name: 'harnessProbe', group: ['transform'], version: 1,
			description: 'Marks items to prove the package loaded', defaults: { name: 'Harness Probe' },
			inputs: [NodeConnectionTypes.Main], outputs: [NodeConnectionTypes.Main], properties: [],
		};
	}
	async execute() {
		return [this.getInputData().map((item) => ({ json: { ...item.json, probe: 'loaded' } }))];
	}
}
module.exports = { HarnessProbe };
`,
	);
	return await packPackage(pkgDir, { outDir: dir });
}

/** The real package when it has been built; packing triggers a full build via prepack. */
function packageBuilt(): boolean {
	const dist = join(repoDir, 'dist', 'nodes');
	return existsSync(dist) && readdirSync(dist).length > 0;
}

describe('e2e harness', () => {
	let pgServer: RunningPostgres | undefined;
	let databaseUrl: string;
	let n8n: N8nInstance | undefined;
	let standins: Standins;
	let workDir: string;
	let tarball: string | undefined;
	let probeTarball: string;

	beforeAll(async () => {
		// The e2e project's global setup provides one server; without that config, start our own.
		const provided = process.env.DATABASE_URL as string | undefined;
		if (provided) databaseUrl = provided;
		else {
			pgServer = await startPostgres();
			databaseUrl = pgServer.url;
		}
		standins = await startStandins({ ai: { latencyMs: 20 } });
		workDir = mkdtempSync(join(tmpdir(), 'harness-smoke-'));
		const wfDir = join(workDir, 'workflows');
		mkdirSync(wfDir);
		writeFileSync(join(wfDir, 'echo.json'), JSON.stringify(workflow));

		const t0 = Date.now();
		await ensureN8n({ log });
		log(`ensureN8n: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
		probeTarball = await packProbePackage(workDir);
		if (packageBuilt()) tarball = await packPackage(repoDir, { outDir: workDir, log });
		else log('no dist/ yet: installing only the probe package');

		const t1 = Date.now();
		n8n = await startN8n({
			databaseUrl,
			packageTarball: tarball ? [probeTarball, tarball] : probeTarball,
			workflowsDir: wfDir,
			publishIds: [WORKFLOW_ID],
			log,
		});
		log(`startN8n (import + publish + start): ${((Date.now() - t1) / 1000).toFixed(1)} s`);
	}, 20 * 60_000);

	afterAll(async () => {
		await n8n?.stop();
		await standins?.close();
		await pgServer?.stop();
		if (workDir) rmSync(workDir, { recursive: true, force: true });
	}, 120_000);

	it('answers a published production webhook', async () => {
		const inst = n8n!;
		const t = Date.now();
		await inst.waitForWebhook('harness-echo', {
			method: 'POST',
			headers: { 'content-type': 'application/json' },
			body: '{}',
		});
		log(`webhook answered ${((Date.now() - t) / 1000).toFixed(1)} s after healthz`);

		const res = await fetch(inst.webhookUrl('harness-echo'), {
			method: 'POST',
			headers: { 'content-type': 'application/json' },
			body: JSON.stringify({ message: 'hello' }),
		});
		expect(res.status).toBe(201);
		expect(await res.json()).toEqual(expected('hello'));

		expect(await inst.activeWorkflowIds()).toContain(WORKFLOW_ID);
	}, 300_000);

	it('installed the packed packages into the nodes folder', () => {
		const modules = join(n8n!.userFolder, '.n8n', 'nodes', 'node_modules');
		expect(existsSync(join(modules, 'n8n-nodes-harness-probe', 'package.json'))).toBe(true);
		const types = n8n!.loadedNodeTypes();
		expect(types).toContain('n8n-nodes-harness-probe.harnessProbe');
		if (tarball) {
			expect(existsSync(join(modules, 'n8n-nodes-durable-jobs', 'package.json'))).toBe(true);
			expect(types).toContain('n8n-nodes-durable-jobs.jobEnqueue');
			const pkg = JSON.parse(readFileSync(join(repoDir, 'package.json'), 'utf8')) as {
				n8n: { nodes: string[] };
			};
			const ours = types.filter((t) => t.startsWith('n8n-nodes-durable-jobs.'));
			expect(ours.length).toBeGreaterThanOrEqual(pkg.n8n.nodes.length);
		}
		// Peer n8n-workflow must come from n8n itself, not a second copy next to the package.
		expect(existsSync(join(n8n!.userFolder, '.n8n', 'nodes', 'node_modules', 'n8n-workflow'))).toBe(
			false,
		);
	});

	it('survives SIGKILL and restart on the same folder and database', async () => {
		const inst = n8n!;
		const before = inst.pid;
		await inst.kill('SIGKILL');
		expect(inst.running).toBe(false);
		await expect(fetch(`${inst.baseUrl}/healthz`)).rejects.toThrow();

		const t = Date.now();
		await inst.restart();
		const first = await inst.waitForWebhook('harness-echo', {
			method: 'POST',
			headers: { 'content-type': 'application/json' },
			body: JSON.stringify({ message: 'again' }),
		});
		log(`restart to first webhook answer: ${((Date.now() - t) / 1000).toFixed(1)} s`);
		expect(inst.pid).not.toBe(before);
		expect(first.status).toBe(201);
		expect(JSON.parse(first.body)).toEqual(expected('again'));
	}, 300_000);

	it('n8n itself answers malformed JSON with 422', async () => {
		const res = await fetch(n8n!.webhookUrl('harness-echo'), {
			method: 'POST',
			headers: { 'content-type': 'application/json' },
			body: '{"broken":',
		});
		expect(res.status).toBe(422);
	});

	it('AI stand-in extracts fields and follows its failure script', async () => {
		const { ai } = standins;
		const post = (body: unknown) =>
			fetch(ai.extractUrl, {
				method: 'POST',
				headers: { 'content-type': 'application/json' },
				body: JSON.stringify(body),
			});

		const ok = await post({
			document_id: 'doc-ok',
			document: 'Name: Ada Lovelace, email ada@example.com, amount: 42.50',
		});
		expect(ok.status).toBe(200);
		expect(await ok.json()).toMatchObject({
			fields: { name: 'Ada Lovelace', email: 'ada@example.com', amount: 42.5 },
			model: 'stand-in',
			source_document_id: 'doc-ok',
		});

		ai.script('doc-flaky', [500, { status: 429, retryAfter: 2 }]);
		expect((await post({ document_id: 'doc-flaky', document: 'x' })).status).toBe(500);
		const limited = await post({ document_id: 'doc-flaky', document: 'x' });
		expect(limited.status).toBe(429);
		expect(limited.headers.get('retry-after')).toBe('2');
		expect((await post({ document_id: 'doc-flaky', document: 'x' })).status).toBe(200);
		expect(ai.callCount('doc-flaky')).toBe(3);

		// Same thing over the control API, as a workflow-driving test would do it.
		const ctl = await fetch(`${ai.url}/__control`, {
			method: 'POST',
			headers: { 'content-type': 'application/json' },
			body: JSON.stringify({ always: { key: 'doc-bad', step: 400 } }),
		});
		expect(ctl.status).toBe(200);
		for (let i = 0; i < 3; i++)
			expect((await post({ document_id: 'doc-bad', document: 'x' })).status).toBe(400);

		expect((await post({ document_id: 'no-doc' })).status).toBe(400);

		ai.script('doc-hang', [{ hang: true }]);
		await expect(
			fetch(ai.extractUrl, {
				method: 'POST',
				body: JSON.stringify({ document_id: 'doc-hang', document: 'x' }),
				signal: AbortSignal.timeout(300),
			}),
		).rejects.toThrow();
	});

	it('CRM stand-in honours idempotency keys and journals every request', async () => {
		const { crm } = standins;
		const create = (key: string | undefined, body: unknown) =>
			fetch(crm.recordsUrl, {
				method: 'POST',
				headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
				body: JSON.stringify(body),
			});

		const first = await create('job-1', { name: 'Ada' });
		expect(first.status).toBe(201);
		const rec = (await first.json()) as { id: string };
		const replay = await create('job-1', { name: 'Ada' });
		expect(replay.status).toBe(200);
		expect(replay.headers.get('idempotent-replayed')).toBe('true');
		expect(((await replay.json()) as { id: string }).id).toBe(rec.id);
		expect(crm.recordsForKey('job-1')).toHaveLength(1);

		crm.honourKeys = false;
		expect((await create('job-1', { name: 'Ada' })).status).toBe(201);
		expect(crm.recordsForKey('job-1')).toHaveLength(2);
		crm.honourKeys = true;

		crm.down = true;
		expect((await create('job-2', {})).status).toBe(503);
		crm.down = false;

		// Delayed answer: the record exists before the caller gets (or misses) the response.
		crm.delayMs = 1000;
		await expect(create('job-3', { name: 'Grace' }).then((r) => r.status)).resolves.toBe(201);
		crm.delayMs = 2000;
		const aborted = fetch(crm.recordsUrl, {
			method: 'POST',
			headers: { 'content-type': 'application/json', 'idempotency-key': 'job-4' },
			body: '{}',
			signal: AbortSignal.timeout(300),
		});
		await expect(aborted).rejects.toThrow();
		crm.delayMs = 0;
		expect(crm.recordsForKey('job-4')).toHaveLength(1);

		const journal = (await (await fetch(`${crm.url}/__journal`)).json()) as Array<{
			key: string | null;
			status: number;
		}>;
		expect(journal.map((j) => [j.key, j.status])).toEqual([
			['job-1', 201],
			['job-1', 200],
			['job-1', 201],
			['job-2', 503],
			['job-3', 201],
			['job-4', 201],
		]);
		expect(crm.journal.find((j) => j.key === 'job-4')?.responded).toBe(false);
	});

	it('callback receiver keeps headers and the raw body', async () => {
		const { callbacks } = standins;
		const raw = '{"type":"job.finished", "spacing" :  "kept"}';
		callbacks.script([503]);
		const r1 = await fetch(`${callbacks.url}/hooks/a?x=1`, {
			method: 'POST',
			headers: { 'content-type': 'application/json', 'webhook-id': 'msg_1' },
			body: raw,
		});
		expect(r1.status).toBe(503);
		const r2 = await fetch(`${callbacks.url}/hooks/a?x=1`, {
			method: 'POST',
			headers: { 'webhook-id': 'msg_1' },
			body: raw,
		});
		expect(r2.status).toBe(200);
		const got = await callbacks.waitFor((c) => c.headers['webhook-id'] === 'msg_1', {
			count: 2,
			timeoutMs: 1000,
		});
		expect(got[1]!.body).toBe(raw);
		expect(got[1]!.path).toBe('/hooks/a');
		expect(got[1]!.json).toEqual({ type: 'job.finished', spacing: 'kept' });
	});

	const redisPlan = findRedis();
	if (!redisPlan.available) log(`queue mode skipped: ${redisPlan.reason}`);
	(redisPlan.available ? it : it.skip)(
		'runs in queue mode with workers over Redis',
		async () => {
			const redis = await startRedis(redisPlan);
			// The single-main instance is not needed any more; two n8n at once would crowd 2 cores.
			await n8n?.stop();
			n8n = undefined;
			const queued = await startN8n({
				databaseUrl,
				packageTarball: probeTarball,
				workflowsDir: join(workDir, 'workflows'),
				publishIds: [WORKFLOW_ID],
				queue: { workers: 1, redisHost: redis.host, redisPort: redis.port },
				log,
			});
			try {
				const post = async (message: string) => {
					const res = await fetch(queued.webhookUrl('harness-echo'), {
						method: 'POST',
						headers: { 'content-type': 'application/json' },
						body: JSON.stringify({ message }),
					});
					return { status: res.status, body: (await res.json()) as unknown };
				};
				expect(await post('queued')).toEqual({ status: 201, body: expected('queued') });
				expect(queued.env.EXECUTIONS_MODE).toBe('queue');

				await queued.workers.kill(0, 'SIGKILL');
				await queued.workers.restart(0);
				expect(await post('after worker restart')).toEqual({
					status: 201,
					body: expected('after worker restart'),
				});
				expect(readFileSync(queued.workers.logFile(0), 'utf8')).toMatch(/Worker started execution/);
			} finally {
				await queued.stop();
				await redis.stop();
			}
		},
		600_000,
	);
});
