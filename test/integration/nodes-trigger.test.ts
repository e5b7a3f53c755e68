import type { INodeExecutionData } from 'n8n-workflow';
import type pg from 'pg';

import { closeAllPools, JobStore } from '../../src/core';
import { JobComplete } from '../../nodes/JobComplete/JobComplete.node';
import { JobLease } from '../../nodes/JobLease/JobLease.node';
import { JobTrigger, TEST_LEASE_MAX_SECONDS } from '../../nodes/JobTrigger/JobTrigger.node';
import {
	databaseUrl,
	dropSchema,
	freshStore,
	newPool,
	ok,
	sleep,
	testSchema,
	waitFor,
} from '../helpers/db';
import { credentialFor, nodeRunner } from '../helpers/n8n-context';
import { triggerRunner } from '../helpers/trigger-context';

/**
 * Job Trigger as n8n drives it (test/helpers/trigger-context.ts): activation, emissions with
 * the donePromise, deactivation, test runs in the editor. The executions it starts are played
 * by the package's own Job Complete node.
 */
const schema = testSchema(__filename);
let pool: pg.Pool;
let store: JobStore;
const createTrigger = triggerRunner(schema);
const nodes = nodeRunner(schema);
const NIL_UUID = '00000000-0000-0000-0000-000000000000';
const LISTENER_APP_PREFIX = 'n8n-nodes-durable-jobs trigger pid=';

beforeAll(async () => {
	pool = newPool(10);
	store = await freshStore(pool, schema);
});

afterAll(async () => {
	await closeAllPools();
	await dropSchema(pool, schema);
	await pool.query(`DROP ROLE IF EXISTS "${schema}_cycles"`);
	await pool.end();
});

async function enqueue(queue: string, count = 1, extra: Record<string, unknown> = {}) {
	return (
		await store.enqueue(
			Array.from({ length: count }, (_, n) => ({ queue, payload: { n }, ...extra })),
		)
	).map((result) => ok(result).jobId);
}

async function jobRow(id: string) {
	const { rows } = await pool.query(
		`SELECT status, attempts, attempt_id, lease_until FROM "${schema}".jobs WHERE id = $1`,
		[id],
	);
	return rows[0] as {
		status: string;
		attempts: number;
		attempt_id: string | null;
		lease_until: Date | null;
	};
}

async function attempts(id: string) {
	const { rows } = await pool.query(
		`SELECT attempt, outcome, workflow_id, execution_id FROM "${schema}".job_attempts WHERE job_id = $1 ORDER BY attempt`,
		[id],
	);
	return rows;
}

/**
 * Backends of this database by application: the trigger's LISTEN connections and the pool's.
 * With `user`, only that role's (other test files run next to this one, with pools of their own).
 */
async function backends(user?: string): Promise<{ listeners: number; pool: number }> {
	const { rows } = await pool.query<{ listeners: number; pool: number }>(
		`SELECT count(*) FILTER (WHERE application_name LIKE $1 || '%')::int AS listeners,
			count(*) FILTER (WHERE application_name = 'n8n-nodes-durable-jobs')::int AS pool
		FROM pg_stat_activity WHERE datname = current_database() AND ($2::text IS NULL OR usename = $2)`,
		[LISTENER_APP_PREFIX, user ?? null],
	);
	return rows[0];
}

/** The execution a production emission starts: Job Complete (Succeeded) on the trigger's items. */
function completeExecution(executionId: () => string) {
	return async (items: INodeExecutionData[]) => {
		const result = await nodes.run(new JobComplete(), {
			items: items.map((item) => item.json),
			parameters: { outcome: 'succeeded' },
			executionId: executionId(),
			workflowId: 'wf-trigger-1',
		});
		expect(result.output('Completed')).toHaveLength(items.length);
	};
}

describe('Job Trigger: production activation', () => {
	it('emits each job with the same item as Job Lease → Leased; Job Complete finishes it and records its execution on the attempt', async () => {
		const [leasedByNode, emittedByTrigger] = [
			(await enqueue('same-shape-lease', 1, { idempotencyKey: 'k-lease' }))[0],
			(await enqueue('same-shape-trigger', 1, { idempotencyKey: 'k-trigger' }))[0],
		];
		const lease = await nodes.run(new JobLease(), { parameters: { queue: 'same-shape-lease' } });
		const [leaseItem] = lease.output('Leased');
		expect(leaseItem.json.job_id).toBe(leasedByNode);

		let executions = 0;
		const trigger = createTrigger(new JobTrigger(), {
			parameters: { queue: 'same-shape-trigger' },
			execution: completeExecution(() => `exec-${++executions}`),
		});
		await trigger.activate();
		try {
			const emission = await waitFor(() => trigger.emissions[0], 'emission');
			await waitFor(() => emission.finished, 'the execution');
			expect(emission.items).toHaveLength(1);
			const item = emission.items[0].json;
			expect(Object.keys(item).sort()).toEqual(Object.keys(leaseItem.json).sort());
			expect(item).toMatchObject({
				job_id: emittedByTrigger,
				attempt: 1,
				queue: 'same-shape-trigger',
				payload: { n: 0 },
				idempotency_key: emittedByTrigger,
				enqueue_idempotency_key: 'k-trigger',
				recovered: false,
				lease_seconds: 300,
			});
			expect(emission.items[0]).not.toHaveProperty('pairedItem');
			expect(await jobRow(emittedByTrigger)).toMatchObject({ status: 'done', attempts: 1 });
			// The lease knew the workflow; Job Complete filled in the execution that ran the job.
			expect(await attempts(emittedByTrigger)).toEqual([
				{ attempt: 1, outcome: 'succeeded', workflow_id: 'wf-trigger-1', execution_id: 'exec-1' },
			]);
		} finally {
			await trigger.deactivate();
		}
	});

	it('Include Job Metadata off: emits the same item as Job Lease with the option off, and the test run shows that shape', async () => {
		const [leasedByNode, emittedByTrigger] = [
			(await enqueue('lean-lease', 1, { correlationId: 'c-lease' }))[0],
			(await enqueue('lean-trigger', 1, { correlationId: 'c-trigger' }))[0],
		];
		const lease = await nodes.run(new JobLease(), {
			parameters: { queue: 'lean-lease', options: { includeMetadata: false } },
		});
		const [leaseItem] = lease.output('Leased');
		expect(leaseItem.json.job_id).toBe(leasedByNode);
		expect(leaseItem.json).not.toHaveProperty('correlation_id');

		const sample = createTrigger(new JobTrigger(), {
			mode: 'manual',
			parameters: { queue: 'lean-trigger', options: { includeMetadata: false } },
		});
		const [sampled] = await sample.runManual();
		const { test_run: testRun, ...sampledItem } = sampled.json;
		expect(testRun).toMatch(/without leasing it/);
		expect(Object.keys(sampledItem).sort()).toEqual(Object.keys(leaseItem.json).sort());

		let executions = 0;
		const trigger = createTrigger(new JobTrigger(), {
			parameters: { queue: 'lean-trigger', options: { includeMetadata: false } },
			execution: completeExecution(() => `exec-lean-${++executions}`),
		});
		await trigger.activate();
		try {
			const emission = await waitFor(() => trigger.emissions[0], 'emission');
			await waitFor(() => emission.finished, 'the execution');
			const item = emission.items[0].json;
			expect(Object.keys(item).sort()).toEqual(Object.keys(leaseItem.json).sort());
			expect(item).toMatchObject({ job_id: emittedByTrigger, attempt: 1, lease_seconds: 300 });
			expect(await jobRow(emittedByTrigger)).toMatchObject({ status: 'done', attempts: 1 });
		} finally {
			await trigger.deactivate();
		}
	});

	it('attempt history: the first heartbeat (Extend Lease) names the execution the trigger started; later writes never replace an id', async () => {
		const queue = 'history';
		const [id] = await enqueue(queue);
		const trigger = createTrigger(new JobTrigger(), {
			parameters: { queue },
			workflowId: 'wf-history',
		});
		await trigger.activate();
		try {
			const emission = await waitFor(() => trigger.emissions[0], 'emission');
			expect(await attempts(id)).toEqual([
				{ attempt: 1, outcome: null, workflow_id: 'wf-history', execution_id: null },
			]);
			const item = emission.items[0].json;
			const heartbeat = async (executionId: string, checkpoint = '') =>
				await nodes.run(new JobLease(), {
					items: [item],
					parameters: { operation: 'extendLease', checkpoint },
					executionId,
					workflowId: 'wf-history',
				});
			expect((await heartbeat('exec-7')).output('Extended')).toHaveLength(1);
			expect(await attempts(id)).toEqual([
				{ attempt: 1, outcome: null, workflow_id: 'wf-history', execution_id: 'exec-7' },
			]);
			await heartbeat('exec-other', 'crm_request');
			const completed = await nodes.run(new JobComplete(), {
				items: [item],
				parameters: { outcome: 'succeeded' },
				executionId: 'exec-other',
			});
			expect(completed.output('Completed')).toHaveLength(1);
			expect(await attempts(id)).toEqual([
				{ attempt: 1, outcome: 'succeeded', workflow_id: 'wf-history', execution_id: 'exec-7' },
			]);
			const { rows } = await pool.query(
				`SELECT checkpoint FROM "${schema}".job_attempts WHERE job_id = $1`,
				[id],
			);
			expect(rows).toEqual([{ checkpoint: 'crm_request' }]);
			emission.finish();
		} finally {
			await trigger.deactivate();
		}
	});

	it('Max Jobs in Flight 2: a third job is leased only when an execution has finished (its donePromise)', async () => {
		const queue = 'in-flight';
		const ids = await enqueue(queue, 5);
		const trigger = createTrigger(new JobTrigger(), {
			parameters: { queue, maxJobsInFlight: 2 },
		});
		await trigger.activate();
		try {
			await waitFor(() => trigger.emissions.length === 2, 'two emissions');
			await sleep(300);
			expect(trigger.emissions).toHaveLength(2);
			// The first execution ends without Job Complete: its slot is free, its job keeps its lease.
			trigger.emissions[0].finish();
			await waitFor(() => trigger.emissions.length === 3, 'a third emission');
			await sleep(300);
			expect(trigger.emissions).toHaveLength(3);
			trigger.emissions[1].fail(new Error('the execution could not be enqueued'));
			await waitFor(() => trigger.emissions.length === 4, 'a fourth emission');
			const emitted = trigger.emissions.map((emission) => emission.items[0].json.job_id);
			expect(emitted).toEqual(ids.slice(0, 4));
			expect((await jobRow(ids[0])).status).toBe('running');
			expect(trigger.logs.some((entry) => /ended without a result/.test(entry.message))).toBe(true);
		} finally {
			await trigger.deactivate();
		}
	});

	it('one execution per batch: Emit = batch hands several jobs to one execution', async () => {
		const queue = 'batch-emit';
		await enqueue(queue, 5);
		const trigger = createTrigger(new JobTrigger(), {
			parameters: { queue, emit: 'batch', batchSize: 3, maxJobsInFlight: 10 },
			execution: completeExecution(() => 'exec-batch'),
		});
		await trigger.activate();
		try {
			await waitFor(
				() => trigger.emissions.reduce((sum, emission) => sum + emission.items.length, 0) === 5,
				'5 jobs',
			);
			expect(trigger.emissions.map((emission) => emission.items.length).sort()).toEqual([2, 3]);
		} finally {
			await trigger.deactivate();
		}
	});

	it('20 activate/deactivate cycles leave no connection behind (pg_stat_activity)', async () => {
		const queue = 'cycles';
		// A role of its own, so only this trigger's backends are counted.
		const user = `${schema}_cycles`;
		const password = 'cycles-test';
		await pool.query(`DROP ROLE IF EXISTS "${user}"`);
		await pool.query(`CREATE ROLE "${user}" LOGIN SUPERUSER PASSWORD '${password}'`);
		const credential = credentialFor(databaseUrl(), schema, { user, password });
		const before = await backends(user);
		const counts: Array<{ active: number; afterClose: number; pool: number }> = [];
		for (let cycle = 0; cycle < 20; cycle++) {
			const trigger = createTrigger(new JobTrigger(), { parameters: { queue }, credential });
			await trigger.activate();
			const active = await waitFor(
				async () => ((await backends(user)).listeners === before.listeners + 1 ? 1 : undefined),
				'the LISTEN connection',
			);
			await trigger.deactivate();
			// The server ends the backend when it reads the client's Terminate message.
			const after = await waitFor(async () => {
				const now = await backends(user);
				return now.listeners === before.listeners ? now : undefined;
			}, 'the LISTEN connection to close');
			counts.push({ active, afterClose: after.listeners - before.listeners, pool: after.pool });
		}
		expect(counts.every((count) => count.active === 1 && count.afterClose === 0)).toBe(true);
		// The pool's connections are reused from cycle to cycle, not added.
		expect(counts[19].pool).toBeLessThanOrEqual(counts[0].pool);
		expect(counts[0].pool).toBeLessThanOrEqual(3);
	});

	it('Poll Interval: no LISTEN connection; polls that find nothing emit nothing; a job is emitted at the next poll', async () => {
		const queue = 'node-polling';
		const before = await backends();
		const trigger = createTrigger(new JobTrigger(), {
			parameters: { queue, options: { pollIntervalSeconds: 0.3 } },
		});
		await trigger.activate();
		try {
			await sleep(1_000);
			expect(trigger.emissions).toHaveLength(0);
			expect((await backends()).listeners).toBe(before.listeners);
			const [id] = await enqueue(queue);
			const emission = await waitFor(() => trigger.emissions[0], 'polled job');
			expect(emission.items[0].json.job_id).toBe(id);
		} finally {
			await trigger.deactivate();
		}
	});

	it('a job database that cannot be reached does not fail the activation (it is waited for); one that refuses does', async () => {
		const unreachable = createTrigger(new JobTrigger(), {
			parameters: { queue: 'nowhere' },
			credential: credentialFor(databaseUrl(), schema, { host: '127.0.0.1', port: 1 }),
		});
		await unreachable.activate();
		await unreachable.deactivate();
		expect(
			unreachable.logs.some(
				(entry) => entry.level === 'warn' && /cannot be reached.*keeps trying/.test(entry.message),
			),
		).toBe(true);

		const refused = createTrigger(new JobTrigger(), {
			parameters: { queue: 'nowhere' },
			credential: credentialFor(databaseUrl(), schema, { database: 'durable_jobs_missing_db' }),
		});
		await expect(refused.activate()).rejects.toMatchObject({
			message: expect.stringMatching(/database named in the credential does not exist/),
			description: expect.stringMatching(/Check Database/),
		});
	});

	it('bad settings fail the activation naming the field; Engine 2.0 is refused with the fix', async () => {
		const zero = createTrigger(new JobTrigger(), {
			parameters: { queue: 'q', maxJobsInFlight: 0 },
		});
		await expect(zero.activate()).rejects.toThrow(/^Max Jobs in Flight: must be a whole number/);
		// Durations are checked in the field's own name and unit, counts in the field's own name,
		// before anything connects; a Concurrency Limit that is no number is not "no limit".
		const durations: Array<[Record<string, unknown>, RegExp]> = [
			[{ concurrencyLimit: "={{ 'ten' }}" }, /^Concurrency Limit: must be a whole number/],
			[{ concurrencyLimit: -1 }, /^Concurrency Limit: must be a whole number/],
			[{ emit: 'batch', batchSize: 0 }, /^Batch Size: must be a whole number/],
			[{ leaseSeconds: 0.5 }, /^Lease Seconds: must be a number of seconds from 1 to 86400/],
			[{ leaseSeconds: 90_000 }, /^Lease Seconds: must be a number of seconds from 1 to 86400/],
			[
				{ options: { backstopSeconds: 0.2 } },
				/^Backstop Seconds: must be a number of seconds from 1 to 86400/,
			],
			[
				{ options: { pollIntervalSeconds: 0.05 } },
				/^Poll Interval \(Seconds\): must be a number of seconds from 0.1 to 86400/,
			],
		];
		for (const [parameters, message] of durations) {
			const trigger = createTrigger(new JobTrigger(), {
				parameters: { queue: 'q', ...parameters },
			});
			await expect(trigger.activate()).rejects.toMatchObject({
				message: expect.stringMatching(message),
			});
		}
		const badQueue = createTrigger(new JobTrigger(), { parameters: { queue: 'no spaces' } });
		await expect(badQueue.activate()).rejects.toMatchObject({
			message: expect.stringMatching(/not a valid queue name/),
		});
		const engineV2 = createTrigger(new JobTrigger(), {
			parameters: { queue: 'q' },
			workflowSettings: { engineType: 'v2' },
		});
		await expect(engineV2.activate()).rejects.toMatchObject({
			message: expect.stringMatching(/default execution engine/),
		});
	});
});

describe('Job Trigger: test runs in the editor', () => {
	it('default (Show Next Job): the next due job, not leased; Job Complete on it lands on Lease Lost and nothing changes', async () => {
		const queue = 'manual-sample';
		const [first, second] = await enqueue(queue, 2);
		const trigger = createTrigger(new JobTrigger(), {
			mode: 'manual',
			parameters: { queue, leaseSeconds: 90 },
		});
		const [item] = await trigger.runManual();
		expect(item.json).toMatchObject({
			job_id: first,
			attempt_id: NIL_UUID,
			attempt: 1,
			lease_seconds: 90,
			payload: { n: 0 },
			test_run: expect.stringMatching(/without leasing it/),
		});
		expect(await jobRow(first)).toMatchObject({ status: 'queued', attempts: 0, attempt_id: null });
		expect(await attempts(first)).toEqual([]);
		const complete = await nodes.run(new JobComplete(), {
			items: [item.json],
			parameters: { outcome: 'succeeded' },
		});
		expect(complete.output('Lease Lost')).toEqual([
			expect.objectContaining({
				json: expect.objectContaining({
					job_id: first,
					lease_lost: true,
					current_status: 'queued',
				}),
			}),
		]);
		expect(await jobRow(first)).toMatchObject({ status: 'queued', attempts: 0 });
		expect((await jobRow(second)).status).toBe('queued');

		const empty = createTrigger(new JobTrigger(), {
			mode: 'manual',
			parameters: { queue: 'manual-empty' },
		});
		const [example] = await empty.runManual();
		expect(example.json).toMatchObject({
			job_id: NIL_UUID,
			queue: 'manual-empty',
			test_run: expect.stringMatching(/example/),
		});
	});

	it('Lease One Job: leases one job (lease capped for tests) and gives it back when the test execution ends unfinished', async () => {
		const queue = 'manual-lease';
		const [first, second] = await enqueue(queue, 2);
		const trigger = createTrigger(new JobTrigger(), {
			mode: 'manual',
			parameters: { queue, leaseSeconds: 300, options: { testRun: 'leaseOne' } },
		});
		const items = await trigger.runManual();
		expect(items).toHaveLength(1);
		expect(items[0].json).toMatchObject({
			job_id: first,
			attempt: 1,
			lease_seconds: TEST_LEASE_MAX_SECONDS,
		});
		const leased = await jobRow(first);
		expect(leased.status).toBe('running');
		expect(leased.lease_until!.getTime() - Date.now()).toBeLessThanOrEqual(
			TEST_LEASE_MAX_SECONDS * 1000,
		);
		expect((await jobRow(second)).status).toBe('queued');
		trigger.endManualExecution();
		await waitFor(async () => (await jobRow(first)).status === 'queued', 'the release');
		expect(await jobRow(first)).toMatchObject({ status: 'queued', attempts: 0 });
		expect(await attempts(first)).toEqual([
			expect.objectContaining({ attempt: 1, outcome: 'released' }),
		]);
		// The closeFunction ran right after the output: nothing else is leased.
		await sleep(300);
		expect((await jobRow(second)).status).toBe('queued');
	});

	it('Lease One Job: a job finished by Job Complete in the test stays finished; with no job due it waits for one', async () => {
		const queue = 'manual-lease-wait';
		const trigger = createTrigger(new JobTrigger(), {
			mode: 'manual',
			parameters: { queue, options: { testRun: 'leaseOne' } },
		});
		const output = trigger.runManual();
		await sleep(300);
		const [id] = await enqueue(queue);
		const [item] = await output;
		expect(item.json.job_id).toBe(id);
		await nodes.run(new JobComplete(), {
			items: [item.json],
			parameters: { outcome: 'succeeded' },
			executionId: 'manual-exec-1',
		});
		trigger.endManualExecution();
		await sleep(300);
		expect(await jobRow(id)).toMatchObject({ status: 'done', attempts: 1 });
		expect(await attempts(id)).toEqual([
			expect.objectContaining({ outcome: 'succeeded', execution_id: 'manual-exec-1' }),
		]);
	});
});
