export type EngineId = 'ours' | 'pgboss' | 'graphile';

export const ENGINE_IDS: readonly EngineId[] = ['ours', 'pgboss', 'graphile'];

export const ENGINE_LABELS: Record<EngineId, string> = {
	ours: 'n8n-nodes-durable-jobs (JobStore)',
	pgboss: 'pg-boss',
	graphile: 'graphile-worker',
};

/** Every benchmark job goes to this queue (pg-boss queue name, our queue, graphile task identifier). */
export const QUEUE = 'bench';

export interface DrainOutcome {
	/** Jobs that went through lease + complete during the measured window. */
	processed: number;
	/** Statements or library calls that fetched work (for context: batch efficiency). */
	fetchCalls: number;
}

export interface StatsSample {
	/** Milliseconds for one call, measured around the library call. */
	ms: number;
}

/**
 * One queue library behind the scenarios. Each engine lives in its own schema, which `reset`
 * drops and recreates, so every scenario starts from an empty, freshly migrated schema.
 */
export interface Engine {
	readonly id: EngineId;
	readonly schema: string;
	/** Drop and recreate this engine's schema (and reconnect whatever the library needs). */
	reset(): Promise<void>;
	close(): Promise<void>;
	/** One job, in its own transaction, through the library's single-job API. */
	enqueueOne(n: number): Promise<void>;
	/** `size` jobs in one call through the library's fastest documented batch API. */
	enqueueBatch(start: number, size: number): Promise<void>;
	/** Not measured: fills the queue for a drain scenario (batch API, 1,000 per call). */
	prefill(count: number): Promise<void>;
	/**
	 * `workers` concurrent loops of lease-1 + complete-1 until the queue is empty; with `workMs`,
	 * each job waits that long (a timer, like a short call to another service) before it completes.
	 */
	drainSingle(workers: number, workMs?: number): Promise<DrainOutcome>;
	/**
	 * `workers` concurrent loops of lease-`batch` + one complete of the batch; null = no equivalent.
	 * Every drain leases what running a job needs (its id, attempt and payload); with `metadata`,
	 * the batch drain leases each job with its metadata too (ours' and pg-boss's
	 * `includeMetadata`).
	 */
	drainBatch(workers: number, batch: number, metadata?: boolean): Promise<DrainOutcome | null>;
	/** A short description of the configuration used, for the JSON report. */
	describe(): Record<string, unknown>;
}
