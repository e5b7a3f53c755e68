import pg from 'pg';

import {
	DurableJobsError,
	JobStore,
	migrate,
	type EnqueueInput,
	type LeasedJobEssentials,
} from '../../src/core';
import { QUEUE, type DrainOutcome, type Engine } from './engine';
import { dropSchema, now, sleep } from './util';

function check<T>(results: Array<T | DurableJobsError>): T[] {
	for (const result of results) {
		if (result instanceof DurableJobsError) throw result;
	}
	return results as T[];
}

export class OursEngine implements Engine {
	readonly id = 'ours' as const;
	readonly pool: pg.Pool;
	private current: JobStore | null = null;

	constructor(
		url: string,
		readonly schema = 'bench_ours',
		poolSize = 12,
		/** StoreOptions.preparedStatements (off: as behind PgBouncer in transaction mode). */
		readonly preparedStatements = true,
		/** StoreOptions.coalesceCalls. */
		readonly coalesceCalls = true,
	) {
		this.pool = new pg.Pool({ connectionString: url, max: poolSize });
		this.pool.on('error', () => undefined);
	}

	get store(): JobStore {
		if (!this.current) throw new Error('reset() first');
		return this.current;
	}

	describe(): Record<string, unknown> {
		return {
			api: {
				enqueueOne: 'JobStore.enqueue([job])',
				enqueueBatch: 'JobStore.enqueue(jobs[1000])',
				single: 'lease({ limit: 1, includeMetadata: false }) + complete([1])',
				batch: 'lease({ limit: N, includeMetadata: false }) + complete([N])',
				batchWithMetadata: 'lease({ limit: N }) + complete([N])',
				stats: "stats('bench')",
			},
			pool: this.pool.options.max,
			preparedStatements: this.preparedStatements,
			coalesceCalls: this.coalesceCalls,
			retention: 'finished jobs stay in the table (done/failed) until purged',
			leaseMs: 60_000,
		};
	}

	async reset(): Promise<void> {
		await dropSchema(this.pool, this.schema);
		await migrate(this.pool, this.schema);
		this.current = new JobStore(this.pool, {
			schema: this.schema,
			preparedStatements: this.preparedStatements,
			coalesceCalls: this.coalesceCalls,
		});
	}

	/** Uses the schema as it is (already migrated and loaded), without dropping it. */
	attach(): void {
		this.current = new JobStore(this.pool, {
			schema: this.schema,
			preparedStatements: this.preparedStatements,
			coalesceCalls: this.coalesceCalls,
		});
	}

	async close(): Promise<void> {
		await dropSchema(this.pool, this.schema).catch(() => undefined);
		await this.pool.end();
	}

	async enqueueOne(n: number): Promise<void> {
		check(await this.store.enqueue([{ queue: QUEUE, payload: { n } }]));
	}

	async enqueueBatch(start: number, size: number): Promise<void> {
		const items: EnqueueInput[] = new Array(size);
		for (let i = 0; i < size; i++) items[i] = { queue: QUEUE, payload: { n: start + i } };
		check(await this.store.enqueue(items));
	}

	async prefill(count: number): Promise<void> {
		for (let start = 0; start < count; start += 1000)
			await this.enqueueBatch(start, Math.min(1000, count - start));
	}

	private async drain(
		workers: number,
		limit: number,
		workMs = 0,
		includeMetadata = false,
	): Promise<DrainOutcome> {
		return await drainQueue(this.store, { queue: QUEUE, workers, limit, workMs, includeMetadata });
	}

	drainSingle(workers: number, workMs = 0): Promise<DrainOutcome> {
		return this.drain(workers, 1, workMs);
	}

	drainBatch(workers: number, batch: number, metadata = false): Promise<DrainOutcome> {
		return this.drain(workers, batch, 0, metadata);
	}
}

/**
 * Leases and completes a queue's jobs until a lease finds none, or until `maxJobs` are leased:
 * `workers` loops at once, each leasing up to `limit` jobs for `leaseMs` (the store's default
 * when not given), waiting `workMs`, and completing them as succeeded (every completion must
 * apply). With `timings`, the milliseconds of each lease and each completion call are pushed
 * to its arrays. The benchmarks' one drain loop of the core.
 */
export async function drainQueue(
	store: JobStore,
	options: {
		queue: string;
		workers: number;
		limit: number;
		workMs?: number;
		includeMetadata?: boolean;
		maxJobs?: number;
		leaseMs?: number;
		timings?: { leaseMs: number[]; completeMs: number[] };
	},
): Promise<DrainOutcome> {
	const { queue, workers, limit, workMs = 0, includeMetadata = false, timings } = options;
	const maxJobs = options.maxJobs ?? Number.POSITIVE_INFINITY;
	let processed = 0;
	let fetchCalls = 0;
	// Jobs leased, and asked for by leases still running: concurrent workers never pass maxJobs.
	let leased = 0;
	let reserved = 0;
	const worker = async () => {
		for (;;) {
			const wanted = Math.min(limit, maxJobs - leased - reserved);
			if (wanted <= 0) return;
			reserved += wanted;
			fetchCalls++;
			let jobs: LeasedJobEssentials[];
			const leaseStarted = timings ? now() : 0;
			try {
				jobs = await store.lease({
					queue,
					limit: wanted,
					includeMetadata,
					leaseMs: options.leaseMs,
				});
			} finally {
				reserved -= wanted;
			}
			timings?.leaseMs.push(now() - leaseStarted);
			leased += jobs.length;
			if (jobs.length === 0) return;
			if (workMs > 0) await sleep(workMs);
			const completeStarted = timings ? now() : 0;
			const results = check(
				await store.complete(
					jobs.map((job) => ({
						jobId: job.id,
						attemptId: job.attempt_id,
						outcome: 'succeeded' as const,
					})),
				),
			);
			timings?.completeMs.push(now() - completeStarted);
			for (const result of results)
				if (!result.applied) throw new Error(`complete not applied: ${result.leaseLostReason}`);
			processed += jobs.length;
		}
	};
	await Promise.all(Array.from({ length: workers }, () => worker()));
	return { processed, fetchCalls };
}
