import { readFileSync } from 'node:fs';

import { startEnvironment, type Environment } from '../../scripts/lib/environment';
import { findRedis, startRedis, type RunningRedis } from '../../scripts/lib/redis';
import { waitFor } from '../../scripts/lib/standins';
import { e2eLog } from './progress';
import { databaseUrl } from '../helpers/db';

/**
 * Scale-out: the same bundled workflows in n8n queue mode (a main process plus two workers over
 * Redis). The Job Triggers run on the main process (n8n runs triggers only on its leader) and
 * lease the jobs there; the executions they start go through Redis to the workers, and each
 * execution's end comes back to the main as the trigger's donePromise. The guarantees must not
 * change. Each worker runs at most 3 executions at once, so that both have to take jobs.
 *
 * Redis: REDIS_URL, else a private redis-server on a free port when the binary is installed,
 * else one on 127.0.0.1:6379; without any, this file is skipped and says why.
 */
const redisPlan = findRedis();
if (!redisPlan.available) e2eLog(`queue mode skipped: ${redisPlan.reason}`);
const describeWithRedis = redisPlan.available ? describe : describe.skip;

describeWithRedis('n8n queue mode', () => {
	let redis: RunningRedis | undefined;
	let env: Environment;

	beforeAll(async () => {
		redis = await startRedis(redisPlan);
		e2eLog(`queue mode on ${redis.description}`);
		env = await startEnvironment({
			databaseUrl: databaseUrl(),
			schema: 'dj_e2e_queue_mode',
			pollSeconds: 1,
			queue: { workers: 2, concurrency: 3, redis: { host: redis.host, port: redis.port } },
			log: e2eLog,
		});
	});

	afterAll(async () => {
		await env?.stop();
		await redis?.stop();
	});

	it('jobs posted to the receiver are leased by the trigger on the main and run on both workers, once each, with one CRM record per job', async () => {
		env.standins.ai.latencyMs = 300;
		const accepted: Array<{ job_id: string; status_url: string }> = [];
		for (let n = 0; n < 24; n++) {
			const key = `queue-mode-${n}`;
			const body = { document: { id: `qm-${n}`, text: `name: Worker ${n}, amount: ${n}` } };
			const first = await env.request('jobs', {
				method: 'POST',
				body,
				headers: { 'Idempotency-Key': key },
			});
			const retry = await env.request('jobs', {
				method: 'POST',
				body,
				headers: { 'Idempotency-Key': key },
			});
			expect(first.status).toBe(202);
			expect((retry.body as { job_id: string }).job_id).toBe(
				(first.body as { job_id: string }).job_id,
			);
			accepted.push(first.body as { job_id: string; status_url: string });
		}
		const jobIds = accepted.map((job) => job.job_id);
		await waitFor(
			async () => {
				const { rows } = await env.jobsDb.query(
					`SELECT count(*)::int AS n FROM "${env.schema}".jobs WHERE id = ANY($1::uuid[]) AND status = 'done'`,
					[jobIds],
				);
				return rows[0].n === accepted.length;
			},
			{ timeoutMs: 180_000, intervalMs: 500, what: 'all queue-mode jobs done' },
		);
		for (const job of accepted) {
			expect(env.standins.crm.recordsForKey(job.job_id)).toHaveLength(1);
			const status = await env.request(job.status_url.replace(/^\/webhook\//, ''));
			expect(status.body).toMatchObject({ status: 'done', attempts: 1 });
		}
		const { rows } = await env.jobsDb.query(
			`SELECT count(*)::int AS attempts, count(DISTINCT execution_id)::int AS executions FROM "${env.schema}".job_attempts WHERE job_id = ANY($1::uuid[])`,
			[jobIds],
		);
		// One attempt per job: no job ran twice, concurrently or not; each in its own execution.
		expect(rows[0].attempts).toBe(accepted.length);
		expect(rows[0].executions).toBe(accepted.length);

		// The attempts name the executions that ran them (filled in by Job Complete); every one
		// was started by exactly one worker, and both workers ran some.
		const { rows: attempts } = await env.jobsDb.query<{ execution_id: string }>(
			`SELECT execution_id FROM "${env.schema}".job_attempts WHERE job_id = ANY($1::uuid[])`,
			[jobIds],
		);
		const startedBy = (index: number) =>
			new Set(
				[
					...readFileSync(env.n8n.workers.logFile(index), 'utf8').matchAll(
						/Worker started execution (\d+)/g,
					),
				].map((match) => match[1]),
			);
		const workers = [startedBy(0), startedBy(1)];
		const perWorker = workers.map(
			(started) => attempts.filter((attempt) => started.has(attempt.execution_id)).length,
		);
		console.log(`[queue-mode] executions per worker: ${perWorker.join(' / ')}`);
		expect(perWorker[0] + perWorker[1]).toBe(accepted.length);
		expect(perWorker[0]).toBeGreaterThan(0);
		expect(perWorker[1]).toBeGreaterThan(0);
		expect(
			attempts.every(
				(attempt) =>
					!(workers[0].has(attempt.execution_id) && workers[1].has(attempt.execution_id)),
			),
		).toBe(true);

		// The triggers (Dispatcher, Callback relay, Outbox relay) listen from the main process only.
		const { rows: listeners } = await env.jobsDb.query<{ application_name: string }>(
			`SELECT application_name FROM pg_stat_activity WHERE application_name LIKE 'n8n-nodes-durable-jobs trigger%'`,
		);
		expect(listeners.map((row) => row.application_name)).toEqual(
			Array.from({ length: 3 }, () => `n8n-nodes-durable-jobs trigger pid=${env.n8n.pid}`),
		);
		env.standins.ai.latencyMs = 0;
	});
});
