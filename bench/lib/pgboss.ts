import pg from 'pg';
import { PgBoss, type ConstructorOptions } from 'pg-boss';

import { QUEUE, type DrainOutcome, type Engine } from './engine';
import { dropSchema, sleep } from './util';

/**
 * pg-boss 12 with its background machinery off (supervise = maintenance and monitoring,
 * schedule = cron, registerInstance = instance heartbeats), so only the calls under test touch
 * the database. The queue is created with defaults (policy "standard", shared job table,
 * completed jobs kept for 7 days), which matches our engine retaining finished rows.
 */
export class PgBossEngine implements Engine {
	readonly id = 'pgboss' as const;
	/** Used for DDL around the library (drop schema, vacuum, stats fixtures), never for the measured calls. */
	readonly admin: pg.Pool;
	private current: PgBoss | null = null;
	private readonly options: ConstructorOptions;

	constructor(
		readonly url: string,
		readonly schema = 'bench_pgboss',
		poolSize = 12,
	) {
		this.admin = new pg.Pool({ connectionString: url, max: 2 });
		this.admin.on('error', () => undefined);
		this.options = {
			connectionString: url,
			schema,
			max: poolSize,
			supervise: false,
			schedule: false,
			registerInstance: false,
			migrate: true,
		};
	}

	get boss(): PgBoss {
		if (!this.current) throw new Error('reset() first');
		return this.current;
	}

	describe(): Record<string, unknown> {
		return {
			api: {
				enqueueOne: 'send(name, data)',
				enqueueBatch: 'insert(name, jobs[1000])',
				single: 'fetch(name, { batchSize: 1 }) + complete(name, id)',
				batch: 'fetch(name, { batchSize: N }) + complete(name, ids[N])',
				batchWithMetadata:
					'fetch(name, { batchSize: N, includeMetadata: true }) + complete(name, ids[N])',
				stats: 'getQueueStats(name)',
			},
			pool: this.options.max,
			constructorOptions: {
				supervise: false,
				schedule: false,
				registerInstance: false,
				useListenNotify: false,
			},
			queue: { policy: 'standard', partition: false, deleteAfterSeconds: 'default (7 days)' },
			retention: 'completed jobs stay in the table until deleteAfterSeconds',
		};
	}

	async reset(): Promise<void> {
		if (this.current) {
			await this.current.stop({ graceful: false, close: true });
			this.current = null;
		}
		await dropSchema(this.admin, this.schema);
		const boss = new PgBoss(this.options);
		boss.on('error', (error: unknown) =>
			process.stderr.write(`[pg-boss error] ${String(error)}\n`),
		);
		await boss.start();
		await boss.createQueue(QUEUE);
		this.current = boss;
	}

	async close(): Promise<void> {
		if (this.current) await this.current.stop({ graceful: false, close: true });
		this.current = null;
		await dropSchema(this.admin, this.schema).catch(() => undefined);
		await this.admin.end();
	}

	async enqueueOne(n: number): Promise<void> {
		const id = await this.boss.send(QUEUE, { n });
		if (!id) throw new Error('pg-boss send returned no id');
	}

	async enqueueBatch(start: number, size: number): Promise<void> {
		const jobs = new Array<{ data: { n: number } }>(size);
		for (let i = 0; i < size; i++) jobs[i] = { data: { n: start + i } };
		await this.boss.insert(QUEUE, jobs);
	}

	async prefill(count: number): Promise<void> {
		for (let start = 0; start < count; start += 1000)
			await this.enqueueBatch(start, Math.min(1000, count - start));
	}

	private async drain(
		workers: number,
		batchSize: number,
		workMs = 0,
		includeMetadata = false,
	): Promise<DrainOutcome> {
		let processed = 0;
		let fetchCalls = 0;
		const boss = this.boss;
		const worker = async () => {
			for (;;) {
				fetchCalls++;
				const jobs = await boss.fetch<{ n: number }>(QUEUE, { batchSize, includeMetadata });
				if (jobs.length === 0) return;
				if (workMs > 0) await sleep(workMs);
				// CommandResponse is declared as an empty interface; at run time it carries `affected`.
				const response = (await boss.complete(
					QUEUE,
					batchSize === 1 ? jobs[0].id : jobs.map((job) => job.id),
				)) as { affected?: number };
				if (response.affected !== jobs.length)
					throw new Error(`pg-boss completed ${response.affected} of ${jobs.length}`);
				processed += jobs.length;
			}
		};
		await Promise.all(Array.from({ length: workers }, () => worker()));
		return { processed, fetchCalls };
	}

	drainSingle(workers: number, workMs = 0): Promise<DrainOutcome> {
		return this.drain(workers, 1, workMs);
	}

	drainBatch(workers: number, batch: number, metadata = false): Promise<DrainOutcome> {
		return this.drain(workers, batch, 0, metadata);
	}
}
