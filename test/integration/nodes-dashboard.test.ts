import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';

import { NodeOperationError, type IDataObject } from 'n8n-workflow';
import type pg from 'pg';

import { closeAllPools, JobStore, migrate } from '../../src/core';
import { JobStatus } from '../../nodes/JobStatus/JobStatus.node';
import { dropSchema, newPool, ok, tableSnapshot, testSchema } from '../helpers/db';
import { nodeRunner, webhookItem } from '../helpers/n8n-context';

/**
 * Job Status → the dashboard operations, as the bundled workflow 10-dashboard.json calls them:
 * parameters at their defaults, which read the webhook request (query, body, headers).
 */
const schema = testSchema(__filename);
const nodes = nodeRunner(schema);
const root = path.resolve(__dirname, '../..');
let pool: pg.Pool;
let store: JobStore;
let failedId: string;
let queuedId: string;

beforeAll(async () => {
	pool = newPool();
	await dropSchema(pool, schema);
	await migrate(pool, schema);
	store = new JobStore(pool, { schema });
	[failedId, queuedId] = (
		await store.enqueue([
			{ queue: 'node-dash', payload: { a: 1 }, idempotencyKey: 'nd-1' },
			{ queue: 'node-dash', payload: { a: 2 } },
		])
	).map((result) => ok(result).jobId);
	const [leased] = await store.lease({ queue: 'node-dash' });
	ok(
		(
			await store.complete([
				{ jobId: leased.id, attemptId: leased.attempt_id, outcome: 'failed', errorCode: 'x' },
			])
		)[0],
	);
	// The page's script is built by `npm run build`; build it here when the tree was not built.
	const built = path.join(root, 'dist', 'dashboard');
	if (!existsSync(path.join(built, 'dashboard.js'))) {
		execFileSync('npx', ['tsc', '-p', 'dashboard/tsconfig.json'], { cwd: root });
		mkdirSync(built, { recursive: true });
		for (const file of ['index.html', 'dashboard.css'])
			copyFileSync(path.join(root, 'dashboard', file), path.join(built, file));
	}
});

afterAll(async () => {
	await closeAllPools();
	await dropSchema(pool, schema);
	await pool.end();
});

async function run(operation: string, item: IDataObject, parameters: IDataObject = {}) {
	return await nodes.run(new JobStatus(), {
		parameters: { operation, ...parameters },
		items: [item],
		onError: 'continueErrorOutput',
	});
}

describe('Job Status dashboard operations', () => {
	it('Dashboard Page: the page with its script, style and config, the token inert inside its JSON', async () => {
		const token = 'eyJ.x</script><script>alert(1)</script>';
		const result = await run('dashboardPage', { token });
		const [item] = result.output('Success');
		const html = String(item.json.html);
		expect(html).toMatch(/^<!doctype html>/i);
		expect(html).toContain('function main()');
		expect(html).toContain('--accent');
		expect(html).not.toMatch(/__DJ_(CSS|SCRIPT|CONFIG)__/);
		expect(html.match(/<\/script>/g)).toHaveLength(2);
		const config = JSON.parse(
			/<script type="application\/json" id="dj-config">\s*([\s\S]*?)\s*<\/script>/.exec(html)![1],
		);
		expect(config).toEqual({
			token,
			apiPath: '',
			editorUrl: '',
			refreshSeconds: 5,
			additionalAttempts: 3,
		});
		expect(item.pairedItem).toEqual({ item: 0 });
		// Without a token (no JWT node before it) the page is not built.
		const missing = await run('dashboardPage', {});
		expect(missing.output('Error')[0].json).toMatchObject({
			details: { field: 'dashboardToken' },
		});
		const badUrl = await run('dashboardPage', { token }, { editorUrl: 'javascript:alert(1)' });
		expect(badUrl.output('Error')[0].json).toMatchObject({ details: { field: 'editorUrl' } });
	});

	it('Queue Overview, List Jobs and Job Story read the request query', async () => {
		const overview = (await run('queueOverview', webhookItem({}, {}, { query: {} }))).output(
			'Success',
		)[0].json as { queues: Array<{ queue: string; failed: number }> };
		expect(overview.queues).toEqual([expect.objectContaining({ queue: 'node-dash', failed: 1 })]);

		const list = (
			await run(
				'listJobs',
				webhookItem({}, {}, { query: { queue: 'node-dash', status: 'failed', limit: '10' } }),
			)
		).output('Success')[0].json as { jobs: Array<{ job_id: string }> };
		expect(list.jobs.map((job) => job.job_id)).toEqual([failedId]);

		const bad = await run('listJobs', webhookItem({}, {}, { query: { limit: '5000' } }));
		expect(bad.output('Error')[0].json).toMatchObject({
			details: { field: 'limit', http_status: 400 },
		});

		const story = (
			await run('jobStory', webhookItem({}, {}, { query: { job_id: failedId } }))
		).output('Success')[0].json;
		expect(story).toMatchObject({ found: true, job: { job_id: failedId, status: 'failed' } });
		const unknown = (
			await run(
				'jobStory',
				webhookItem({}, {}, { query: { job_id: '0190d1a2-0000-7000-8000-000000000000' } }),
			)
		).output('Success')[0].json;
		expect(unknown).toEqual({ found: false, job_id: '0190d1a2-0000-7000-8000-000000000000' });
	});

	it("List Jobs' time range without an offset is in the workflow's time zone; a time the core cannot place is refused by name", async () => {
		const filterOf = async (from: string, to: string) => {
			const result = await nodes.run(new JobStatus(), {
				parameters: { operation: 'listJobs' },
				items: [webhookItem({}, {}, { query: { queue: 'node-dash', from, to } })],
				onError: 'continueErrorOutput',
				timezone: 'Asia/Kathmandu',
			});
			return result;
		};
		// Kathmandu is UTC+5:45.
		const ranged = (await filterOf('2030-12-05T10:00:00', '2030-12-06')).output('Success')[0].json;
		expect(ranged.filter).toMatchObject({
			from: '2030-12-05T04:15:00.000Z',
			to: '2030-12-05T18:15:00.000Z',
		});
		const zoned = (await filterOf('2030-12-05T10:00:00Z', '')).output('Success')[0].json;
		expect(zoned.filter).toMatchObject({ from: '2030-12-05T10:00:00.000Z', to: null });
		const refused = (await filterOf('Dec 5 2030 10:00', '')).output('Error')[0].json;
		expect(refused).toMatchObject({ details: { field: 'Received From', http_status: 400 } });
		expect(String(refused.error)).toMatch(/^Received From: .* has no time zone/);
	});

	it('Dashboard Action needs the action header with the same action, and writes nothing without it', async () => {
		const seen = await store.listJobs({ queue: 'node-dash', status: 'failed' });
		const body = { action: 'requeue', job_ids: [failedId], as_of: seen.as_of };
		const before = await tableSnapshot(pool, schema);
		for (const item of [
			body,
			webhookItem(body),
			webhookItem(body, { 'x-durable-jobs-action': 'cancel' }),
			webhookItem(body, { 'x-durable-jobs-action': '' }),
		]) {
			const refused = await run('dashboardAction', item);
			expect(refused.output('Error')[0].json).toMatchObject({
				details: { code: 'action_header_missing', http_status: 403 },
			});
		}
		expect(await tableSnapshot(pool, schema)).toEqual(before);

		const done = await run(
			'dashboardAction',
			webhookItem(body, { 'X-Durable-Jobs-Action': 'requeue' }),
		);
		expect(done.output('Success')[0].json).toMatchObject({ action: 'requeue', changed: 1 });
		const again = await run(
			'dashboardAction',
			webhookItem(body, { 'x-durable-jobs-action': 'requeue' }),
		);
		expect(again.output('Success')[0].json).toMatchObject({ action: 'requeue', changed: 0 });

		const cancel = await run(
			'dashboardAction',
			webhookItem({ action: 'cancel', job_ids: [queuedId] }, { 'x-durable-jobs-action': 'cancel' }),
		);
		expect(cancel.output('Success')[0].json).toMatchObject({
			action: 'cancel',
			changed: 1,
			jobs: [{ job_id: queuedId, changed: true, status: 'cancelled' }],
		});

		const unknownAction = await run(
			'dashboardAction',
			webhookItem({ action: 'purge', job_ids: [queuedId] }, { 'x-durable-jobs-action': 'purge' }),
		);
		expect(unknownAction.output('Error')[0].json).toMatchObject({
			details: { field: 'action', http_status: 400 },
		});
	});

	it('without "continue" a bad request stops the node with the field and the fix', async () => {
		const error = (await nodes
			.run(new JobStatus(), {
				parameters: { operation: 'dashboardAction' },
				items: [webhookItem({ action: 'requeue', job_ids: [failedId] })],
			})
			.catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.message).toMatch(/X-Durable-Jobs-Action/);
		expect(error.description).toMatch(/POST with the header/);
	});
});
