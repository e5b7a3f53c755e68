import pg from 'pg';
import {
	Logger,
	makeWorkerUtils,
	runOnce,
	type RunnerOptions,
	type TaskList,
	type WorkerUtils,
} from 'graphile-worker';

import { QUEUE, type DrainOutcome, type Engine } from './engine';
import { dropSchema, sleep } from './util';

/** graphile-worker logs every completed job at info level; a benchmark measures the queue, not the console. */
const silentLogger = new Logger(() => () => undefined);

/**
 * graphile-worker 0.18. Draining uses the library's own run-once worker pool (`runOnce`), the
 * same entry point graphile-worker's perfTest uses: each of `concurrency` workers fetches one
 * job (one UPDATE ... FOR UPDATE SKIP LOCKED), runs the no-op task and completes it (one
 * DELETE), and exits when nothing is left. A worker does not wait for its DELETE: it fetches
 * its next job while the completion is still running on another connection. Batch mode turns
 * on the library's documented batching: localQueue (fetch N jobs per query) and
 * completeJobBatchDelay = 0 (one DELETE for the completions of one tick).
 */
export class GraphileEngine implements Engine {
	readonly id = 'graphile' as const;
	readonly pool: pg.Pool;
	private utils: WorkerUtils | null = null;

	constructor(
		url: string,
		readonly schema = 'bench_graphile',
		poolSize = 12,
		/** Jobs run at once by each batch-mode runner (graphile's concurrentJobs). */
		readonly batchConcurrency = 10,
	) {
		this.pool = new pg.Pool({ connectionString: url, max: poolSize });
		this.pool.on('error', () => undefined);
		this.pool.on('connect', (client) => client.on('error', () => undefined));
	}

	describe(): Record<string, unknown> {
		return {
			api: {
				enqueueOne: 'WorkerUtils.addJob(task, payload)',
				enqueueBatch: 'WorkerUtils.addJobs(specs[1000]) (SQL add_jobs)',
				single:
					'runOnce({ concurrency: W }) with a no-op task: get job (batch 1) + delete per job, the next get job not waiting for the delete',
				batch: `W x runOnce({ concurrency: ${this.batchConcurrency}, localQueue: { size: N }, completeJobBatchDelay: 0 })`,
				stats: 'none (completed jobs are deleted; no queue-stats API)',
			},
			pool: this.pool.options.max,
			preparedStatements: true,
			logger: 'silent',
			retention: 'completed jobs are deleted',
		};
	}

	private get workerUtils(): WorkerUtils {
		if (!this.utils) throw new Error('reset() first');
		return this.utils;
	}

	async reset(): Promise<void> {
		if (this.utils) {
			await this.utils.release();
			this.utils = null;
		}
		await dropSchema(this.pool, this.schema);
		const utils = await makeWorkerUtils({
			pgPool: this.pool,
			schema: this.schema,
			logger: silentLogger,
		});
		await utils.migrate();
		this.utils = utils;
	}

	async close(): Promise<void> {
		if (this.utils) await this.utils.release();
		this.utils = null;
		await dropSchema(this.pool, this.schema).catch(() => undefined);
		await this.pool.end();
	}

	async enqueueOne(n: number): Promise<void> {
		await this.workerUtils.addJob(QUEUE, { n });
	}

	async enqueueBatch(start: number, size: number): Promise<void> {
		const specs = new Array<{ identifier: string; payload: { n: number } }>(size);
		for (let i = 0; i < size; i++) specs[i] = { identifier: QUEUE, payload: { n: start + i } };
		await this.workerUtils.addJobs(specs);
	}

	async prefill(count: number): Promise<void> {
		for (let start = 0; start < count; start += 1000)
			await this.enqueueBatch(start, Math.min(1000, count - start));
	}

	private baseOptions(): RunnerOptions {
		return { pgPool: this.pool, schema: this.schema, logger: silentLogger, noHandleSignals: true };
	}

	async drainSingle(workers: number, workMs = 0): Promise<DrainOutcome> {
		let processed = 0;
		const taskList: TaskList = {
			[QUEUE]: async () => {
				if (workMs > 0) await sleep(workMs);
				processed++;
			},
		};
		await runOnce({ ...this.baseOptions(), concurrency: workers }, taskList);
		return { processed, fetchCalls: processed + workers };
	}

	async drainBatch(workers: number, batch: number): Promise<DrainOutcome> {
		let processed = 0;
		const taskList: TaskList = {
			[QUEUE]: async () => {
				processed++;
			},
		};
		const runner = () =>
			runOnce(
				{
					...this.baseOptions(),
					concurrency: this.batchConcurrency,
					preset: { worker: { localQueue: { size: batch }, completeJobBatchDelay: 0 } },
				},
				taskList,
			);
		await Promise.all(Array.from({ length: workers }, () => runner()));
		return { processed, fetchCalls: Math.ceil(processed / batch) + workers };
	}
}
