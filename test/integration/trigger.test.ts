import { createConnection, createServer, type Server, type Socket } from 'node:net';

import pg from 'pg';

import {
	JobStore,
	JobTriggerEngine,
	closeAllPools,
	openStore,
	type ConnectionConfig,
	type JobTriggerOptions,
	type LeasedJob,
	type LeasedJobEssentials,
} from '../../src/core';
import {
	connectionConfig,
	databaseUrl,
	dropSchema,
	freshStore,
	newPool,
	ok,
	sleep,
	testSchema,
	waitFor,
} from '../helpers/db';

/**
 * The trigger's engine (src/core/trigger/) on a real PostgreSQL, without n8n: every wake-up
 * path, the in-flight bound and the per-queue concurrency limit. An "execution" here is an
 * async function that the engine starts through `emit` and whose promise settles when it ends.
 */
const schema = testSchema(__filename);
let pool: pg.Pool;
let store: JobStore;
const triggers: JobTriggerEngine[] = [];
const LISTENER_APP = 'durable-jobs trigger test';

beforeAll(async () => {
	pool = newPool(30);
	store = await freshStore(pool, schema);
});

afterEach(async () => {
	await Promise.all(triggers.splice(0).map(async (trigger) => await trigger.stop()));
});

afterAll(async () => {
	await dropSchema(pool, schema);
	await pool.end();
});

interface Emission {
	jobs: LeasedJob[];
	at: number;
}

/** What every trigger of this file shares: this file's store, LISTEN connection and no backstop. */
function triggerBase() {
	return {
		store,
		schema,
		connection: connectionConfig(),
		applicationName: LISTENER_APP,
		backstopMs: 600_000,
	};
}

/** Starts the trigger, and stops it after the test. */
async function started(trigger: JobTriggerEngine): Promise<JobTriggerEngine> {
	triggers.push(trigger);
	await trigger.start();
	return trigger;
}

/** A started trigger whose executions run `work` (default: nothing; the job stays running). */
async function startTrigger(
	options: Partial<JobTriggerOptions> & { queue: string },
	work: (jobs: LeasedJob[]) => Promise<void> = async () => undefined,
): Promise<{ trigger: JobTriggerEngine; emissions: Emission[] }> {
	const emissions: Emission[] = [];
	const trigger = await started(
		new JobTriggerEngine({
			...triggerBase(),
			leaseMs: 60_000,
			...options,
			// LeasedJob unless a test turns includeMetadata off (and then reads only the essentials).
			emit: async (jobs: Array<LeasedJob | LeasedJobEssentials>) => {
				emissions.push({ jobs: jobs as LeasedJob[], at: Date.now() });
				await work(jobs as LeasedJob[]);
			},
		}),
	);
	return { trigger, emissions };
}

async function enqueue(queue: string, count = 1, extra: Record<string, unknown> = {}) {
	const results = await store.enqueue(
		Array.from({ length: count }, (_, n) => ({ queue, payload: { n }, ...extra })),
	);
	return results.map((result) => ok(result));
}

async function complete(
	job: Pick<LeasedJobEssentials, 'id' | 'attempt_id'>,
	outcome: 'succeeded' | 'retry' = 'succeeded',
	delayMs?: number,
) {
	const [result] = await store.complete([
		{ jobId: job.id, attemptId: job.attempt_id, outcome, delayMs },
	]);
	expect(ok(result).applied).toBe(true);
}

async function waitDone(queue: string, count: number): Promise<void> {
	await waitFor(
		async () => {
			const { rows } = await pool.query(
				`SELECT count(*)::int AS n FROM "${schema}".jobs WHERE queue = $1 AND status = 'done'`,
				[queue],
			);
			return rows[0].n === count;
		},
		`${count} jobs of ${queue} done`,
		60_000,
	);
}

async function listenerBackends(): Promise<Array<{ pid: number }>> {
	const { rows } = await pool.query<{ pid: number }>(
		'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
		[LISTENER_APP],
	);
	return rows;
}

describe('wake-up by NOTIFY', () => {
	it('a job inserted in a transaction wakes the trigger only after COMMIT; a rolled-back insert never does', async () => {
		const queue = 'notify-commit';
		const { trigger, emissions } = await startTrigger({ queue });
		await waitFor(() => trigger.stats.leases > 0, 'LISTEN and the first look');

		const client = await pool.connect();
		try {
			await client.query('BEGIN');
			const { rows } = await client.query<{ id: string }>(
				`INSERT INTO "${schema}".jobs (id, queue, payload) VALUES (gen_random_uuid(), $1, '{"in":"tx"}') RETURNING id`,
				[queue],
			);
			await sleep(500);
			expect(trigger.stats.notices).toBe(0);
			expect(emissions).toHaveLength(0);
			await client.query('COMMIT');
			const [emission] = await waitFor(() => emissions.length > 0 && emissions, 'the emission');
			expect(emission.jobs.map((job) => job.id)).toEqual([rows[0].id]);
			expect(trigger.stats.notices).toBe(1);
			await trigger.settled();
			await sleep(200);
			const leasesBefore = trigger.stats.leases;

			await client.query('BEGIN');
			await client.query(
				`INSERT INTO "${schema}".jobs (id, queue, payload) VALUES (gen_random_uuid(), $1, '{"in":"rolled back"}')`,
				[queue],
			);
			await client.query('ROLLBACK');
			await sleep(500);
			expect(trigger.stats.notices).toBe(1);
			expect(emissions).toHaveLength(1);
			expect(trigger.stats.leases).toBe(leasesBefore);
		} finally {
			client.release();
		}
		const { rows } = await pool.query(
			`SELECT count(*)::int AS n FROM "${schema}".jobs WHERE queue = $1`,
			[queue],
		);
		expect(rows[0].n).toBe(1);
	});

	it('retry, release and requeue notify too: each brings the job back without waiting for the backstop', async () => {
		const queue = 'notify-back';
		const { emissions } = await startTrigger({ queue });
		const [job] = await enqueue(queue, 1, { maxAttempts: 1 });
		await waitFor(() => emissions.length === 1, 'first emission');
		const first = emissions[0].jobs[0];
		expect(first.id).toBe(job.jobId);
		await store.complete([{ jobId: first.id, attemptId: first.attempt_id, outcome: 'release' }]);
		await waitFor(() => emissions.length === 2, 'emission after release');
		const second = emissions[1].jobs[0];
		// Last attempt: a retry fails the job, and requeue (replay) brings it back.
		await complete(second, 'retry', 0);
		const [requeued] = await store.requeue({ jobIds: [job.jobId] });
		expect(requeued.status).toBe('queued');
		await waitFor(() => emissions.length === 3, 'emission after requeue');
		expect(emissions.map((emission) => emission.jobs[0].id)).toEqual([
			job.jobId,
			job.jobId,
			job.jobId,
		]);
	});
});

describe('wake-up when a job finishes elsewhere', () => {
	/**
	 * Another n8n instance: its own pool and store, leasing and completing with Job Lease and
	 * Job Complete. The trigger learns of those ends only from the finish notice (no backstop).
	 */
	async function otherInstance() {
		const otherPool = newPool(4);
		return { otherPool, other: new JobStore(otherPool, { schema }) };
	}

	it.each([
		['completed', 'succeeded'],
		['failed', 'failed'],
	] as const)(
		'a job held back by the Concurrency Limit starts when a job leased elsewhere is %s',
		async (_name, outcome) => {
			const queue = `limit-elsewhere-${outcome}`;
			const { otherPool, other } = await otherInstance();
			try {
				const [held] = await enqueue(queue);
				const [elsewhere] = await other.lease({ queue, limit: 1, concurrencyLimit: 1 });
				expect(elsewhere.id).toBe(held.jobId);
				const { trigger, emissions } = await startTrigger({ queue, concurrencyLimit: 1 });
				const [waiting] = await enqueue(queue);
				await waitFor(() => trigger.stats.notices >= 1, 'the enqueue notice');
				await trigger.settled();
				await sleep(300);
				expect(emissions).toHaveLength(0);

				const finishedAt = Date.now();
				ok(
					(
						await other.complete([
							{ jobId: elsewhere.id, attemptId: elsewhere.attempt_id, outcome },
						])
					)[0],
				);
				const emitted = await waitFor(() => emissions[0], 'the held-back job', 5_000);
				expect(emitted.jobs[0].id).toBe(waiting.jobId);
				expect(emitted.at - finishedAt).toBeLessThan(5_000);
				expect(trigger.stats.wakes.backstop).toBe(0);
				expect(trigger.stats.notices).toBeGreaterThanOrEqual(2);
			} finally {
				await otherPool.end();
			}
		},
	);

	it('a job held back by the Concurrency Limit starts when a lease elsewhere fails the job whose lease expired on its last attempt', async () => {
		const queue = 'limit-expired-elsewhere';
		const { otherPool, other } = await otherInstance();
		try {
			const [dying] = await enqueue(queue, 1, { maxAttempts: 1 });
			const [elsewhere] = await other.lease({
				queue,
				limit: 1,
				concurrencyLimit: 1,
				leaseMs: 1_000,
			});
			expect(elsewhere.id).toBe(dying.jobId);
			const { trigger, emissions } = await startTrigger({ queue, concurrencyLimit: 1 });
			const [waiting] = await enqueue(queue);
			await waitFor(() => trigger.stats.notices >= 1, 'the enqueue notice');
			await trigger.settled();
			await sleep(1_200);
			expect(emissions).toHaveLength(0);

			// The other instance's next lease finds the lease expired on the last attempt: it
			// fails that job, and its slot is free only after that lease.
			expect(await other.lease({ queue, limit: 1, concurrencyLimit: 1, leaseMs: 1_000 })).toEqual(
				[],
			);
			const emitted = await waitFor(() => emissions[0], 'the held-back job', 5_000);
			expect(emitted.jobs[0].id).toBe(waiting.jobId);
			expect(trigger.stats.wakes.backstop).toBe(0);
			const { rows } = await pool.query(
				`SELECT status, error_code FROM "${schema}".jobs WHERE id = $1`,
				[dying.jobId],
			);
			expect(rows).toEqual([{ status: 'failed', error_code: 'lease_expired' }]);
		} finally {
			await otherPool.end();
		}
	});

	it('the next job of an ordering key starts when a delayed job before it is cancelled from the dashboard', async () => {
		const queue = 'ordered-dashboard-cancel';
		const [delayed] = await enqueue(queue, 1, { orderingKey: 'customer-3', delayMs: 600_000 });
		const [next] = await enqueue(queue, 1, { orderingKey: 'customer-3' });
		const { trigger, emissions } = await startTrigger({ queue });
		await waitFor(() => trigger.stats.leases >= 1, 'the first look');
		await trigger.settled();
		await sleep(300);
		// The delayed job holds the key: the one behind it waits.
		expect(emissions).toHaveLength(0);
		const { otherPool, other } = await otherInstance();
		try {
			const cancelled = await other.cancelQueuedJobs({ jobIds: [delayed.jobId] });
			expect(cancelled.jobs).toEqual([
				{ job_id: delayed.jobId, changed: true, status: 'cancelled' },
			]);
			const emitted = await waitFor(() => emissions[0], 'the job behind it', 5_000);
			expect(emitted.jobs[0].id).toBe(next.jobId);
			expect(trigger.stats.wakes.backstop).toBe(0);
		} finally {
			await otherPool.end();
		}
	});

	it('the next job of an ordering key starts when the one before it, leased elsewhere, is done or cancelled', async () => {
		const queue = 'ordered-elsewhere';
		const { otherPool, other } = await otherInstance();
		try {
			const ids = (await enqueue(queue, 3, { orderingKey: 'customer-9' })).map((job) => job.jobId);
			const [first] = await other.lease({ queue, limit: 1 });
			expect(first.id).toBe(ids[0]);
			const { trigger, emissions } = await startTrigger({ queue }, async (jobs) => {
				for (const job of jobs) if (job.id !== ids[1]) await complete(job);
			});
			await waitFor(() => trigger.stats.leases >= 1, 'the first look');
			await trigger.settled();
			await sleep(300);
			expect(emissions).toHaveLength(0);

			ok(
				(
					await other.complete([
						{ jobId: first.id, attemptId: first.attempt_id, outcome: 'succeeded' },
					])
				)[0],
			);
			const second = await waitFor(() => emissions[0], 'the second job of the key', 5_000);
			expect(second.jobs[0].id).toBe(ids[1]);

			// The second job stays running in this trigger's execution until it is cancelled
			// elsewhere (Job Status → Cancel); its worker would get Lease Lost.
			await sleep(300);
			expect(emissions).toHaveLength(1);
			const [cancelled] = await other.cancel([ids[1]]);
			expect(cancelled.cancelled).toBe(true);
			const third = await waitFor(() => emissions[1], 'the third job of the key', 5_000);
			expect(third.jobs[0].id).toBe(ids[2]);
			expect(trigger.stats.wakes.backstop).toBe(0);
		} finally {
			await otherPool.end();
		}
	});
});

describe('wake-up by timer and backstop', () => {
	it('a delayed job and a retry backoff are emitted by the timer at their run_at, with no backstop sweep', async () => {
		const queue = 'timer';
		const { trigger, emissions } = await startTrigger({ queue });
		await waitFor(() => trigger.listenerPid !== null, 'LISTEN');
		const [delayed] = await enqueue(queue, 1, { delayMs: 1_500 });
		const emitted = await waitFor(() => emissions[0], 'delayed job');
		expect(emitted.jobs[0].id).toBe(delayed.jobId);
		expect(emitted.at).toBeGreaterThanOrEqual(delayed.runAt.getTime());
		expect(trigger.stats.wakes.timer).toBeGreaterThanOrEqual(1);

		const retryAt = Date.now() + 1_200;
		await complete(emitted.jobs[0], 'retry', 1_200);
		const again = await waitFor(() => emissions[1], 'retried job');
		expect(again.jobs[0].id).toBe(delayed.jobId);
		expect(again.jobs[0].attempts).toBe(2);
		expect(again.at).toBeGreaterThanOrEqual(retryAt - 50);
		expect(trigger.stats.wakes.timer).toBeGreaterThanOrEqual(2);
		expect(trigger.stats.wakes.backstop).toBe(0);
	});

	it('the backstop recovers a job whose lease expired (its worker died; no notice tells of it)', async () => {
		const queue = 'backstop';
		const [job] = await enqueue(queue);
		// Leased by a worker elsewhere that then dies: a 1 s lease nobody extends or completes.
		const [lost] = await store.lease({ queue, limit: 1, leaseMs: 1_000 });
		expect(lost.id).toBe(job.jobId);
		const { trigger, emissions } = await startTrigger({ queue, backstopMs: 1_000 });
		const emitted = await waitFor(() => emissions[0], 'recovered job', 10_000);
		expect(emitted.jobs[0]).toMatchObject({ id: job.jobId, attempts: 2, recovered: true });
		expect(emitted.jobs[0].attempt_id).not.toBe(lost.attempt_id);
		expect(trigger.stats.notices).toBe(0);
		expect(trigger.stats.wakes.backstop).toBeGreaterThanOrEqual(1);
		const { rows } = await pool.query(
			`SELECT attempt, outcome FROM "${schema}".job_attempts WHERE job_id = $1 ORDER BY attempt`,
			[job.jobId],
		);
		expect(rows).toEqual([
			{ attempt: 1, outcome: 'lease_expired' },
			{ attempt: 2, outcome: null },
		]);
	});
});

describe('connection loss', () => {
	it('pg_terminate_backend of the LISTEN connection: it reconnects and claims the job enqueued while it was gone', async () => {
		const queue = 'reconnect';
		const { trigger, emissions } = await startTrigger({
			queue,
			listener: { reconnectInitialMs: 1_500 },
		});
		const firstPid = await waitFor(() => trigger.listenerPid ?? undefined, 'LISTEN');
		expect(await listenerBackends()).toEqual([{ pid: firstPid }]);
		await pool.query('SELECT pg_terminate_backend($1)', [firstPid]);
		await waitFor(() => trigger.listenerPid === null, 'the loss to be noticed');
		// The notice of this job goes to nobody: the trigger is not listening right now.
		const [job] = await enqueue(queue);
		const emitted = await waitFor(() => emissions[0], 'the job after reconnecting');
		expect(emitted.jobs[0].id).toBe(job.jobId);
		expect(trigger.stats.notices).toBe(0);
		expect(trigger.stats.wakes.connect).toBe(1);
		expect(trigger.listenerConnects).toBe(2);
		const secondPid = trigger.listenerPid;
		expect(secondPid).not.toBe(firstPid);
		expect(await listenerBackends()).toEqual([{ pid: secondPid }]);
	});

	it('a connection that stops answering (half-open, no FIN) is found by the keep-alive query and replaced', async () => {
		const queue = 'keepalive';
		const proxy = await freezableProxy();
		try {
			const { trigger, emissions } = await startTrigger({
				queue,
				connection: { ...connectionConfig(), host: '127.0.0.1', port: proxy.port },
				listener: { keepAliveMs: 300, keepAliveTimeoutMs: 500, reconnectInitialMs: 100 },
			});
			const firstPid = await waitFor(() => trigger.listenerPid ?? undefined, 'LISTEN');
			// Bytes stop flowing both ways on the open connection, as when a peer vanishes.
			proxy.freezeOpenConnections();
			await waitFor(() => trigger.listenerConnects === 2, 'a new LISTEN connection', 10_000);
			expect(trigger.listenerPid).not.toBe(firstPid);
			const [job] = await enqueue(queue);
			const emitted = await waitFor(() => emissions[0], 'the job on the new connection');
			expect(emitted.jobs[0].id).toBe(job.jobId);
			expect(trigger.stats.notices).toBeGreaterThanOrEqual(1);
		} finally {
			await proxy.close();
		}
	});

	it('a database unreachable at start is waited for, then caught up; a database that refuses is an error at start', async () => {
		const queue = 'unreachable';
		const proxy = await freezableProxy();
		await proxy.refuse();
		const config: ConnectionConfig = {
			...connectionConfig(),
			host: '127.0.0.1',
			port: proxy.port,
			connectionTimeoutMs: 2_000,
		};
		const unreachablePool = new pg.Pool({
			host: config.host,
			port: config.port,
			user: config.user,
			password: config.password,
			database: config.database,
			connectionTimeoutMillis: 2_000,
		});
		unreachablePool.on('error', () => undefined);
		try {
			const [job] = await enqueue(queue);
			const { trigger, emissions } = await startTrigger({
				queue,
				store: async () => {
					await (await unreachablePool.connect()).release();
					return new JobStore(unreachablePool, { schema });
				},
				connection: config,
				listener: { reconnectInitialMs: 200, reconnectMaxMs: 400 },
			});
			expect(trigger.listenerPid).toBeNull();
			await sleep(600);
			expect(emissions).toHaveLength(0);
			await proxy.accept();
			const emitted = await waitFor(() => emissions[0], 'the job once the database is back');
			expect(emitted.jobs[0].id).toBe(job.jobId);
		} finally {
			await unreachablePool.end();
			await proxy.close();
		}

		const refused = new JobTriggerEngine({
			store,
			schema,
			queue,
			connection: connectionConfig(databaseUrl(), { database: 'durable_jobs_no_such_database' }),
			emit: async () => undefined,
		});
		await expect(refused.start()).rejects.toThrow(/does not exist/);
	});

	it('a server that stops answering after the login: start gives up within the connection timeout and the keep-alive timeout, and the trigger keeps trying', async () => {
		const queue = 'mute-after-login';
		const proxy = await muteAfterLoginProxy();
		try {
			const trigger = new JobTriggerEngine({
				...triggerBase(),
				queue,
				connection: {
					...connectionConfig(),
					host: '127.0.0.1',
					port: proxy.port,
					connectionTimeoutMs: 1_000,
				},
				listener: { keepAliveTimeoutMs: 500, reconnectInitialMs: 200, reconnectMaxMs: 400 },
				emit: async () => undefined,
			});
			triggers.push(trigger);
			const started = await settlesWithin(trigger.start(), 6_000);
			expect(started).toBe(true);
			expect(proxy.mutedQueries()).toBeGreaterThanOrEqual(1);
			expect(trigger.listenerPid).toBeNull();
			await waitFor(() => proxy.mutedQueries() >= 2, 'a second try in the background', 8_000);
		} finally {
			await proxy.close();
		}
	});

	it('stopped while its LISTEN connection is still connecting (a test run cancelled at once): start settles', async () => {
		const silent = createServer((socket) => socket.resume());
		await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
		const { port } = silent.address() as { port: number };
		try {
			const trigger = new JobTriggerEngine({
				...triggerBase(),
				queue: 'stopped-while-connecting',
				connection: { ...connectionConfig(), host: '127.0.0.1', port, connectionTimeoutMs: 60_000 },
				listener: { keepAliveTimeoutMs: 60_000 },
				emit: async () => undefined,
			});
			const starting = trigger.start();
			await sleep(200);
			await trigger.stop();
			expect(await settlesWithin(starting, 3_000)).toBe(true);
		} finally {
			silent.close();
		}
	});
});

describe('the pool the trigger keeps', () => {
	afterEach(() => {
		jest.restoreAllMocks();
	});

	/** The store as the node opens it: from the process's pool cache. */
	const cachedConfig = () => ({
		...connectionConfig(undefined, { applicationName: 'durable-jobs trigger cached pool' }),
		schema,
	});

	it('a queue quiet for longer than idle pools live: another node using the credential does not close the pool under the trigger', async () => {
		const queue = 'quiet-for-long';
		const realNow = Date.now.bind(Date);
		let offset = 0;
		jest.spyOn(Date, 'now').mockImplementation(() => realNow() + offset);
		let opened = 0;
		const { trigger, emissions } = await startTrigger({
			queue,
			store: async () => {
				opened++;
				return await openStore(cachedConfig());
			},
		});
		await waitFor(() => trigger.listenerPid ?? undefined, 'LISTEN');
		// Hours without a job, its backstop a day apart: the trigger asks the cache for nothing.
		offset = 3 * 60 * 60_000;
		// A Job Enqueue with the same credential opens its store (the cache sweeps idle pools).
		const receiver = await openStore(cachedConfig());
		const [result] = await receiver.enqueue([{ queue, payload: {} }]);
		const emitted = await waitFor(() => emissions[0], 'the job after hours of quiet');
		expect(emitted.jobs[0].id).toBe(ok(result).jobId);
		expect(trigger.stats.leaseErrors).toBe(0);
		// The same store and pool throughout: nothing was closed under the trigger and reopened.
		expect(opened).toBe(1);
	});

	it('a pool closed under the trigger all the same (closeAllPools): it opens the store again and leases on', async () => {
		const queue = 'pool-closed';
		const { trigger, emissions } = await startTrigger({
			queue,
			store: async () => await openStore(cachedConfig()),
		});
		await waitFor(() => trigger.listenerPid ?? undefined, 'LISTEN');
		await closeAllPools();
		const [job] = await enqueue(queue);
		const emitted = await waitFor(() => emissions[0], 'the job after the pool was closed');
		expect(emitted.jobs[0].id).toBe(job.jobId);
	});
});

describe('back-pressure and limits', () => {
	it('a burst of 500 jobs: never more than Max Jobs in Flight running, each job emitted once, all done', async () => {
		const queue = 'burst';
		let running = 0;
		let maxRunning = 0;
		const seen = new Map<string, number>();
		const { trigger } = await startTrigger({ queue, maxInFlight: 10 }, async (jobs) => {
			running += jobs.length;
			maxRunning = Math.max(maxRunning, running);
			for (const job of jobs) seen.set(job.id, (seen.get(job.id) ?? 0) + 1);
			await sleep(Math.random() * 15);
			for (const job of jobs) await complete(job);
			running -= jobs.length;
		});
		const ids = (await enqueue(queue, 500)).map((result) => result.jobId);
		await waitDone(queue, 500);
		await trigger.settled();
		expect(maxRunning).toBe(10);
		expect(trigger.stats.maxInFlightSeen).toBe(10);
		expect(seen.size).toBe(500);
		expect([...seen.values()].every((count) => count === 1)).toBe(true);
		expect(new Set(seen.keys())).toEqual(new Set(ids));
		expect(trigger.inFlight).toBe(0);
	});

	it('executions that cannot start: the trigger waits longer after each round of them (1 s, 2 s, …) instead of using an attempt of every job in turn; once executions run again, the rest is done', async () => {
		const queue = 'cannot-start';
		let canStart = false;
		const { trigger, emissions } = await startTrigger({ queue, maxInFlight: 2 }, async (jobs) => {
			if (!canStart) throw new Error('the execution could not be enqueued');
			for (const job of jobs) await complete(job);
		});
		const ids = (await enqueue(queue, 20)).map((result) => result.jobId);
		await waitFor(() => emissions.length >= 2, 'the first two emissions');
		// Both slots failed at once, one round: no lease for 1 s; the next round's failures wait 2 s.
		await sleep(2_500);
		expect(emissions.length).toBeGreaterThanOrEqual(3);
		expect(emissions.length).toBeLessThanOrEqual(5);
		const { rows } = await pool.query<{ n: number }>(
			`SELECT count(*)::int AS n FROM "${schema}".jobs WHERE queue = $1 AND attempts > 0`,
			[queue],
		);
		expect(rows[0].n).toBe(emissions.length);
		canStart = true;
		await waitFor(
			async () =>
				(
					await pool.query<{ n: number }>(
						`SELECT count(*)::int AS n FROM "${schema}".jobs WHERE queue = $1 AND status = 'done'`,
						[queue],
					)
				).rows[0].n ===
				ids.length - rows[0].n,
			'the jobs that never ran, done once executions start',
			40_000,
		);
		expect(trigger.stats.leaseErrors).toBe(0);
	});

	it('one execution per batch: up to Batch Size jobs per emission, still bounded by Max Jobs in Flight', async () => {
		const queue = 'batches';
		let running = 0;
		let maxRunning = 0;
		const { trigger, emissions } = await startTrigger(
			{ queue, maxInFlight: 8, batchSize: 3 },
			async (jobs) => {
				running += jobs.length;
				maxRunning = Math.max(maxRunning, running);
				await sleep(10);
				for (const job of jobs) await complete(job);
				running -= jobs.length;
			},
		);
		await enqueue(queue, 40);
		await waitFor(
			() => emissions.reduce((sum, emission) => sum + emission.jobs.length, 0) === 40,
			'40 jobs emitted',
		);
		await trigger.settled();
		expect(maxRunning).toBeLessThanOrEqual(8);
		expect(Math.max(...emissions.map((emission) => emission.jobs.length))).toBe(3);
		expect(emissions.every((emission) => emission.jobs.length <= 3)).toBe(true);
	});

	it('without metadata the emitted jobs hold only the essentials, and complete like any other', async () => {
		const queue = 'essentials';
		// The options' type gives this emit the essentials: it needs no cast, and one that reads
		// metadata is refused at compile time (below).
		const emitted: LeasedJobEssentials[] = [];
		const trigger = await started(
			new JobTriggerEngine({
				...triggerBase(),
				queue,
				maxInFlight: 4,
				batchSize: 2,
				includeMetadata: false,
				emit: async (jobs: LeasedJobEssentials[]) => {
					emitted.push(...jobs);
					for (const job of jobs) await complete(job);
				},
			}),
		);
		await enqueue(queue, 6, { correlationId: 'c-1', priority: 2 });
		await waitDone(queue, 6);
		await trigger.settled();
		expect(emitted).toHaveLength(6);
		for (const job of emitted) {
			expect(Object.keys(job).sort()).toEqual(
				['attempt_id', 'attempts', 'id', 'max_attempts', 'payload', 'queue', 'recovered'].sort(),
			);
			expect(job).toMatchObject({ queue, attempts: 1, recovered: false });
		}
	});

	it('Concurrency Limit 3 holds across two triggers on two pools (the advisory-lock limit of Job Lease)', async () => {
		const queue = 'limited';
		const otherPool = newPool(10);
		try {
			let running = 0;
			let maxRunning = 0;
			const byTrigger = [0, 0];
			let openGate = () => undefined as void;
			const gate = new Promise<void>((resolve) => (openGate = resolve));
			const work = (index: number) => async (jobs: LeasedJob[]) => {
				running += jobs.length;
				byTrigger[index] += jobs.length;
				maxRunning = Math.max(maxRunning, running);
				// The first jobs stay running until both triggers are seen holding slots.
				await gate;
				await sleep(30 + Math.random() * 40);
				running -= jobs.length;
				for (const job of jobs) await complete(job);
			};
			// Two in flight at most: the limit's third slot can then only go to the first trigger.
			await startTrigger(
				{
					queue,
					maxInFlight: 2,
					concurrencyLimit: 3,
					store: new JobStore(otherPool, { schema }),
				},
				work(1),
			);
			await enqueue(queue, 2);
			await waitFor(() => byTrigger[1] === 2, 'the second trigger to hold two jobs');
			await startTrigger({ queue, maxInFlight: 10, concurrencyLimit: 3 }, work(0));
			await enqueue(queue, 4);
			await waitFor(() => byTrigger[0] > 0, 'the first trigger to take the one free slot');
			// Two held by one trigger, one by the other: the limit leaves nothing for either.
			await sleep(200);
			expect(running).toBe(3);
			expect(byTrigger).toEqual([1, 2]);
			openGate();
			// Then in waves, so that both triggers hear notices while the other one holds slots.
			for (let wave = 0; wave < 9; wave++) {
				await enqueue(queue, 6);
				await sleep(100);
			}
			await waitDone(queue, 60);
			expect(maxRunning).toBe(3);
			expect(byTrigger[0] + byTrigger[1]).toBe(60);
		} finally {
			await Promise.all(triggers.splice(0).map(async (trigger) => await trigger.stop()));
			await otherPool.end();
		}
	});

	it('jobs sharing an ordering key run one at a time, in enqueue order, as with Job Lease', async () => {
		const queue = 'ordered';
		const order: number[] = [];
		let keyedRunning = 0;
		let maxKeyedRunning = 0;
		const { trigger } = await startTrigger({ queue, maxInFlight: 10 }, async (jobs) => {
			const job = jobs[0];
			const keyed = job.ordering_key !== null;
			if (keyed) {
				keyedRunning++;
				maxKeyedRunning = Math.max(maxKeyedRunning, keyedRunning);
				order.push((job.payload as { n: number }).n);
			}
			await sleep(20);
			if (keyed) keyedRunning--;
			await complete(job);
		});
		await store.enqueue(
			Array.from({ length: 12 }, (_, n) => ({
				queue,
				payload: { n },
				orderingKey: n % 2 === 0 ? 'customer-7' : null,
			})),
		);
		await waitFor(() => order.length === 6, 'keyed jobs');
		await trigger.settled();
		expect(order).toEqual([0, 2, 4, 6, 8, 10]);
		expect(maxKeyedRunning).toBe(1);
	});
});

describe('polling and stopping', () => {
	it('Poll Interval (PgBouncer transaction mode): no LISTEN connection, idle polls emit nothing, a job is emitted at the next poll', async () => {
		const queue = 'polling';
		const { trigger, emissions } = await startTrigger({
			queue,
			pollIntervalMs: 300,
			connection: undefined,
		});
		await sleep(1_000);
		expect(trigger.stats.wakes.poll).toBeGreaterThanOrEqual(2);
		expect(trigger.stats.leases).toBeGreaterThanOrEqual(3);
		expect(emissions).toHaveLength(0);
		expect(trigger.listenerPid).toBeNull();
		expect(await listenerBackends()).toEqual([]);
		const [job] = await enqueue(queue);
		const emitted = await waitFor(() => emissions[0], 'polled job');
		expect(emitted.jobs[0].id).toBe(job.jobId);
		expect(trigger.stats.notices).toBe(0);
	});

	it('stop closes the LISTEN connection and leases nothing more; executions already running keep their jobs', async () => {
		const queue = 'stopping';
		let finishRunning: () => void = () => undefined;
		const running = new Promise<void>((resolve) => {
			finishRunning = resolve;
		});
		const { trigger, emissions } = await startTrigger({ queue, maxInFlight: 2 }, async () => {
			await running;
		});
		await enqueue(queue, 3);
		await waitFor(() => emissions.length === 2, 'two emissions');
		await trigger.stop();
		await waitFor(async () => (await listenerBackends()).length === 0, 'the backend to end');
		finishRunning();
		await trigger.settled();
		await enqueue(queue);
		await sleep(300);
		expect(emissions).toHaveLength(2);
		const { rows } = await pool.query(
			`SELECT status, count(*)::int AS n FROM "${schema}".jobs WHERE queue = $1 GROUP BY status ORDER BY status`,
			[queue],
		);
		expect(rows).toEqual([
			{ status: 'queued', n: 2 },
			{ status: 'running', n: 2 },
		]);
	});

	it('rejects bad settings with the field and the fix', () => {
		const base = {
			store,
			schema,
			queue: 'q',
			connection: connectionConfig(),
			emit: async () => undefined,
		};
		expect(() => new JobTriggerEngine({ ...base, maxInFlight: 0 })).toThrow(/maxJobsInFlight/);
		expect(() => new JobTriggerEngine({ ...base, queue: 'bad queue' })).toThrow(/queue/);
		expect(() => new JobTriggerEngine({ ...base, connection: undefined })).toThrow(
			/^connection: a LISTEN connection/,
		);
		expect(() => new JobTriggerEngine({ ...base, backstopMs: 10 })).toThrow(/backstopMs/);
		expect(
			() => new JobTriggerEngine({ ...base, includeMetadata: 'off' as unknown as boolean }),
		).toThrow(/^includeMetadata: "off" is not true or false/);
	});

	it('ties the type of the jobs emit receives to includeMetadata (checked by npm run typecheck)', () => {
		const base = { store, schema, queue: 'q', connection: connectionConfig() };
		const readsMetadata = async (jobs: LeasedJob[]) => jobs.map((job) => job.created_at);
		const readsEssentials = async (jobs: LeasedJobEssentials[]) => jobs.map((job) => job.id);
		const either = async (jobs: Array<LeasedJob | LeasedJobEssentials>) => jobs.length;
		const flag = process.env.NO_SUCH_FLAG === undefined;
		const accepted: JobTriggerOptions[] = [
			{ ...base, emit: readsMetadata },
			{ ...base, includeMetadata: true, emit: readsMetadata },
			{ ...base, includeMetadata: false, emit: readsEssentials },
			{ ...base, emit: readsEssentials },
			{ ...base, includeMetadata: flag, emit: either },
		];
		// @ts-expect-error jobs leased without metadata have no created_at to read
		const withoutMetadata: JobTriggerOptions = {
			...base,
			includeMetadata: false,
			emit: readsMetadata,
		};
		// @ts-expect-error a flag known only at run time may lease either shape
		const decidedLater: JobTriggerOptions = { ...base, includeMetadata: flag, emit: readsMetadata };
		for (const options of [...accepted, withoutMetadata, decidedLater])
			expect(() => new JobTriggerEngine(options)).not.toThrow();
	});
});

/**
 * A loopback TCP forwarder to the test database that can stop forwarding on its open connections without closing
 * them (a peer that vanished without a FIN), and refuse or accept new ones.
 */
/** Whether `promise` settles within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
	let timer: NodeJS.Timeout | undefined;
	const late = new Promise<false>((resolve) => {
		timer = setTimeout(() => resolve(false), ms);
	});
	try {
		return await Promise.race([
			promise.then(
				() => true as const,
				() => true as const,
			),
			late,
		]);
	} finally {
		clearTimeout(timer);
	}
}

/**
 * A proxy to the database that passes the login through, then swallows every simple query the
 * client sends (a 'Q' message) and all that follows: a server that stops answering right after
 * the login.
 */
async function muteAfterLoginProxy() {
	const url = new URL(databaseUrl());
	const target = { host: url.hostname, port: Number(url.port || 5432) };
	const sockets = new Set<Socket>();
	let muted = 0;
	const server: Server = createServer((client) => {
		const upstream = createConnection(target);
		sockets.add(client).add(upstream);
		let mute = false;
		client.on('data', (chunk: Buffer) => {
			if (!mute && chunk[0] === 0x51) {
				mute = true;
				muted++;
			}
			if (!mute) upstream.write(chunk);
		});
		upstream.on('data', (chunk: Buffer) => {
			if (!mute) client.write(chunk);
		});
		for (const socket of [client, upstream]) {
			socket.on('error', () => undefined);
			socket.on('close', () => {
				client.destroy();
				upstream.destroy();
			});
		}
	});
	await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
	const { port } = server.address() as { port: number };
	return {
		port,
		mutedQueries: () => muted,
		async close() {
			for (const socket of sockets) socket.destroy();
			await new Promise<void>((resolve) => server.close(() => resolve()));
		},
	};
}

async function freezableProxy() {
	const url = new URL(databaseUrl());
	const target = { host: url.hostname, port: Number(url.port || 5432) };
	const pairs = new Set<[Socket, Socket]>();
	let accepting = true;
	const server: Server = createServer((client) => {
		if (!accepting) {
			client.destroy();
			return;
		}
		const upstream = createConnection(target);
		const pair: [Socket, Socket] = [client, upstream];
		pairs.add(pair);
		const drop = () => {
			client.destroy();
			upstream.destroy();
			pairs.delete(pair);
		};
		for (const socket of pair) {
			socket.on('error', drop);
			socket.on('close', drop);
		}
		client.pipe(upstream);
		upstream.pipe(client);
	});
	await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
	const address = server.address();
	const port = typeof address === 'object' && address ? address.port : 0;
	return {
		port,
		freezeOpenConnections() {
			for (const [client, upstream] of pairs) {
				client.unpipe(upstream);
				upstream.unpipe(client);
				client.pause();
				upstream.pause();
			}
		},
		async refuse() {
			accepting = false;
		},
		async accept() {
			accepting = true;
		},
		async close() {
			for (const pair of pairs) for (const socket of pair) socket.destroy();
			await new Promise<void>((resolve) => server.close(() => resolve()));
		},
	};
}
