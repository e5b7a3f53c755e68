import { startEnvironment, type Environment } from '../../scripts/lib/environment';
import { findRedis, startRedis, type RunningRedis } from '../../scripts/lib/redis';
import { waitFor } from '../../scripts/lib/standins';
import { e2eLog } from './progress';
import { databaseUrl } from '../helpers/db';

/**
 * Scale-out: the same bundled workflows in n8n queue mode (a main process plus two workers over
 * Redis). Executions, including the dispatcher's leases and the workers' completions, run on
 * the worker processes; the guarantees must not change.
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
			queue: { workers: 2, redis: { host: redis.host, port: redis.port } },
			log: e2eLog,
		});
	});

	afterAll(async () => {
		await env?.stop();
		await redis?.stop();
	});

	it('jobs posted to the receiver are leased and finished by the workers, once each, with one CRM record per job', async () => {
		const accepted: Array<{ job_id: string; status_url: string }> = [];
		for (let n = 0; n < 12; n++) {
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
		await waitFor(
			async () => {
				const { rows } = await env.jobsDb.query(
					`SELECT count(*)::int AS n FROM "${env.schema}".jobs WHERE queue = 'documents' AND status = 'done'`,
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
			`SELECT count(*)::int AS attempts, count(DISTINCT execution_id)::int AS executions FROM "${env.schema}".job_attempts a JOIN "${env.schema}".jobs j ON j.id = a.job_id WHERE j.queue = 'documents'`,
		);
		expect(rows[0].attempts).toBe(accepted.length);
		expect(rows[0].executions).toBeGreaterThan(0);
	});
});
