import { isUnreachableError, ValidationError } from './errors';
import { notifyChannel, validateQueueName, validateSchemaName } from './identifiers';
import { NotificationListener, silentLogger, type TriggerLogger } from './listener';
import type { ConnectionConfig } from './pool';
import type { JobStore } from './store';
import type { Job, LeasedJob } from './types';
import { integerInRange } from './validate';

/** Why the trigger looked for work; counted in `stats.wakes`. */
export type WakeReason =
	| 'start'
	| 'connect'
	| 'notice'
	| 'timer'
	| 'backstop'
	| 'poll'
	| 'done'
	| 'retry';

export interface JobTriggerOptions {
	/**
	 * The store, or how to open it: opened on first use and again after a failure, so a
	 * database that is down when the trigger starts is waited for.
	 */
	store: JobStore | (() => Promise<JobStore>);
	/** Schema of the store (names the NOTIFY channel before the store is open). */
	schema: string;
	queue: string;
	/** Most jobs emitted and not yet finished at any time (default 10). */
	maxInFlight?: number;
	leaseMs?: number;
	/** Per-queue limit across all instances (the advisory-lock limit of Job Lease); null = none. */
	concurrencyLimit?: number | null;
	/** Jobs per emission: 1 = one execution per job (default); N = up to N jobs per execution. */
	batchSize?: number;
	/** Slow sweep for expired leases and lost notices (default 30 s). */
	backstopMs?: number;
	/**
	 * Poll every this many ms instead of LISTENing (PgBouncer in transaction mode cannot
	 * LISTEN). Null/0 = LISTEN on `connection`.
	 */
	pollIntervalMs?: number | null;
	/** Connection for the LISTEN connection (required unless polling). */
	connection?: ConnectionConfig;
	/** Application name of the LISTEN connection, e.g. with the n8n process id. */
	applicationName?: string;
	/** Recorded on every attempt this trigger leases. */
	workflowId?: string | null;
	/**
	 * Starts the execution(s) for these jobs. The returned promise settles when the execution
	 * has finished (successfully or not): only then does its slot count as free again.
	 */
	emit: (jobs: LeasedJob[]) => Promise<unknown>;
	/** Stop after this many emissions (a test run leases one job); default unlimited. */
	maxEmissions?: number;
	/** Keep-alive and reconnect timing of the LISTEN connection (defaults are for production). */
	listener?: {
		keepAliveMs?: number;
		keepAliveTimeoutMs?: number;
		reconnectInitialMs?: number;
		reconnectMaxMs?: number;
	};
	logger?: TriggerLogger;
}

export interface JobTriggerStats {
	wakes: Record<WakeReason, number>;
	/** Lease statements run, and jobs they returned. */
	leases: number;
	leased: number;
	/** Emissions (executions started) and the jobs in them. */
	emissions: number;
	emittedJobs: number;
	/** Highest number of jobs in flight seen. */
	maxInFlightSeen: number;
	notices: number;
	leaseErrors: number;
}

export const DEFAULT_MAX_IN_FLIGHT = 10;
export const DEFAULT_BACKSTOP_MS = 30_000;
const DEFAULT_LEASE_MS = 300_000;
/** Fired this long after the earliest run_at, so the lease's `run_at <= now()` holds. */
const TIMER_MARGIN_MS = 5;
/** Longest delay setTimeout accepts. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const RETRY_INITIAL_MS = 1_000;
const RETRY_MAX_MS = 30_000;

/**
 * The trigger's engine, without n8n: it leases jobs of one queue and hands them to `emit`,
 * never holding more than `maxInFlight` jobs whose execution has not finished.
 *
 * Wake-ups (each only looks; nothing is emitted unless a job was leased):
 * - `start` / `connect`: after the first LISTEN and after every reconnect, claim what is
 *   already waiting (NOTIFY has no replay);
 * - `notice`: a NOTIFY for this queue (enqueue, retry, release, requeue; sent at commit);
 * - `timer`: the earliest future run_at of the queue (delayed jobs, retry backoff), armed
 *   whenever a lease found nothing left to take;
 * - `done`: an emitted execution finished, so its slots are free;
 * - `backstop`: every `backstopMs`, for expired leases and anything a lost notice missed;
 * - `poll`: instead of LISTEN, every `pollIntervalMs`.
 *
 * Wake-ups are coalesced: one fill runs at a time, and a wake-up during a fill makes it run
 * once more when it ends.
 */
export class JobTriggerEngine {
	readonly queue: string;
	readonly maxInFlight: number;
	readonly batchSize: number;
	readonly backstopMs: number;
	readonly pollIntervalMs: number | null;
	readonly stats: JobTriggerStats = {
		wakes: { start: 0, connect: 0, notice: 0, timer: 0, backstop: 0, poll: 0, done: 0, retry: 0 },
		leases: 0,
		leased: 0,
		emissions: 0,
		emittedJobs: 0,
		maxInFlightSeen: 0,
		notices: 0,
		leaseErrors: 0,
	};
	private readonly schema: string;
	private storePromise: Promise<JobStore> | undefined;
	private readonly leaseMs: number;
	private readonly concurrencyLimit: number | null;
	private readonly logger: TriggerLogger;
	private listener: NotificationListener | undefined;
	private inFlightJobs = 0;
	private stopped = false;
	private started = false;
	private pending = false;
	private filling: Promise<void> | undefined;
	private dueTimer: NodeJS.Timeout | undefined;
	private retryTimer: NodeJS.Timeout | undefined;
	private sweepTimer: NodeJS.Timeout | undefined;
	private consecutiveErrors = 0;
	private emissionsLeft: number;
	private readonly running = new Set<Promise<unknown>>();

	constructor(private readonly options: JobTriggerOptions) {
		this.schema = validateSchemaName(options.schema);
		this.queue = validateQueueName(options.queue);
		this.maxInFlight = integerInRange(
			options.maxInFlight,
			'maxJobsInFlight',
			1,
			10_000,
			DEFAULT_MAX_IN_FLIGHT,
		);
		this.batchSize = integerInRange(options.batchSize, 'batchSize', 1, 10_000, 1);
		this.leaseMs = integerInRange(
			options.leaseMs,
			'leaseMs',
			1_000,
			24 * 3600_000,
			DEFAULT_LEASE_MS,
		);
		this.concurrencyLimit =
			options.concurrencyLimit === null || options.concurrencyLimit === undefined
				? null
				: integerInRange(options.concurrencyLimit, 'concurrencyLimit', 1, 100_000, 1);
		this.backstopMs = integerInRange(
			options.backstopMs,
			'backstopMs',
			1_000,
			24 * 3600_000,
			DEFAULT_BACKSTOP_MS,
		);
		this.pollIntervalMs =
			options.pollIntervalMs === null ||
			options.pollIntervalMs === undefined ||
			options.pollIntervalMs === 0
				? null
				: integerInRange(options.pollIntervalMs, 'pollIntervalMs', 100, 24 * 3600_000, 5_000);
		if (this.pollIntervalMs === null && !options.connection) {
			throw new ValidationError(
				'connection',
				'a LISTEN connection is needed unless the trigger polls',
				'Pass the connection settings, or set a poll interval',
			);
		}
		this.emissionsLeft = options.maxEmissions ?? Number.POSITIVE_INFINITY;
		this.logger = options.logger ?? silentLogger;
	}

	/** Jobs emitted whose execution has not finished yet. */
	get inFlight(): number {
		return this.inFlightJobs;
	}

	/** Backend pid of the LISTEN connection (null while disconnected or when polling). */
	get listenerPid(): number | null {
		return this.listener?.backendPid ?? null;
	}

	get listenerConnects(): number {
		return this.listener?.connects ?? 0;
	}

	/**
	 * Opens the store, starts listening (or polling) and claims what is waiting. A database
	 * that cannot be reached right now is not an error: the trigger keeps trying in the
	 * background and catches up once it is back. Anything else (wrong password, missing
	 * migrations with auto-migrate off, missing privileges) is thrown, so the activation fails
	 * with that message.
	 */
	async start(): Promise<void> {
		if (this.started) throw new Error('The trigger was already started');
		this.started = true;
		if (this.pollIntervalMs === null) {
			this.listener = new NotificationListener({
				connection: this.options.connection!,
				channel: notifyChannel(this.schema),
				applicationName: this.options.applicationName,
				onNotice: (payload) => {
					if (payload !== this.queue) return;
					this.stats.notices++;
					this.wake('notice');
				},
				onConnected: () => this.wake(this.stats.wakes.start === 0 ? 'start' : 'connect'),
				logger: this.logger,
				...this.options.listener,
			});
		}
		try {
			await this.openStore();
			await this.listener?.start();
		} catch (error) {
			if (!isUnreachableError(error)) {
				await this.stop();
				throw error;
			}
			this.logger.warn(
				`Durable Jobs: the job database cannot be reached (${(error as Error).message}); the trigger for queue "${this.queue}" keeps trying and catches up when it is back`,
			);
			this.listener?.startReconnecting();
		}
		if (!this.listener) this.wake('start');
		const sweepMs =
			this.pollIntervalMs === null
				? this.backstopMs
				: Math.min(this.pollIntervalMs, this.backstopMs);
		this.sweepTimer = setInterval(
			() => this.wake(this.pollIntervalMs === null ? 'backstop' : 'poll'),
			sweepMs,
		);
		this.sweepTimer.unref();
	}

	/**
	 * Stops leasing and closes the LISTEN connection. Executions already started keep running
	 * (their jobs are finished by the workflow, or come back when their lease expires); jobs a
	 * lease returned after the stop are released at once, without using an attempt.
	 */
	async stop(): Promise<void> {
		if (this.stopped && !this.listener && !this.filling) return;
		this.stopped = true;
		clearTimeout(this.dueTimer);
		clearTimeout(this.retryTimer);
		clearInterval(this.sweepTimer);
		this.dueTimer = this.retryTimer = this.sweepTimer = undefined;
		const listener = this.listener;
		this.listener = undefined;
		await Promise.all([listener?.stop(), this.filling]);
	}

	/** Resolves once every emitted execution has settled (tests, shutdown). */
	async settled(): Promise<void> {
		while (this.running.size > 0) await Promise.allSettled([...this.running]);
	}

	/** Look for work now (coalesced with any look already running). */
	wake(reason: WakeReason): void {
		if (this.stopped) return;
		this.stats.wakes[reason]++;
		this.pending = true;
		if (!this.filling) {
			this.filling = this.fillWhilePending().finally(() => {
				this.filling = undefined;
			});
		}
	}

	private async fillWhilePending(): Promise<void> {
		while (this.pending && !this.stopped) {
			this.pending = false;
			await this.fill();
		}
	}

	/** Lease while there is room, then arm the timer for the next job that becomes due. */
	private async fill(): Promise<void> {
		let store: JobStore;
		try {
			store = await this.openStore();
		} catch (error) {
			this.leaseFailed(error);
			return;
		}
		let dry = false;
		while (!this.stopped && this.emissionsLeft > 0 && this.inFlightJobs < this.maxInFlight) {
			const room = Math.min(
				this.maxInFlight - this.inFlightJobs,
				this.emissionsLeft * this.batchSize,
			);
			// Lease limits are powers of two: each distinct limit is a statement text (and a
			// prepared statement per connection) of its own, see sql/lease.ts.
			const limit = 2 ** Math.floor(Math.log2(room));
			let jobs: LeasedJob[];
			try {
				jobs = await store.lease({
					queue: this.queue,
					limit,
					leaseMs: this.leaseMs,
					concurrencyLimit: this.concurrencyLimit,
					workflowId: this.options.workflowId ?? null,
				});
			} catch (error) {
				this.leaseFailed(error);
				return;
			}
			this.stats.leases++;
			this.stats.leased += jobs.length;
			this.consecutiveErrors = 0;
			if (this.stopped) {
				await release(store, jobs, this.logger);
				return;
			}
			this.dispatch(jobs);
			if (jobs.length < limit) {
				dry = true;
				break;
			}
		}
		if (dry && !this.stopped && this.emissionsLeft > 0) await this.armDueTimer(store);
	}

	private dispatch(jobs: LeasedJob[]): void {
		for (let start = 0; start < jobs.length; start += this.batchSize) {
			const batch = jobs.slice(start, start + this.batchSize);
			this.inFlightJobs += batch.length;
			this.stats.maxInFlightSeen = Math.max(this.stats.maxInFlightSeen, this.inFlightJobs);
			this.stats.emissions++;
			this.stats.emittedJobs += batch.length;
			this.emissionsLeft--;
			let finished: Promise<unknown>;
			try {
				finished = Promise.resolve(this.options.emit(batch));
			} catch (error) {
				finished = Promise.reject(error as Error);
			}
			const tracked = finished
				.catch((error: unknown) => {
					// The execution could not start or ended abnormally; its jobs keep their lease
					// and come back when it expires, exactly as after a crash.
					this.logger.warn(
						`Durable Jobs: an execution for ${batch.length} job(s) of queue "${this.queue}" ended without a result (${(error as Error)?.message ?? String(error)}); its jobs come back when their lease expires`,
					);
				})
				.finally(() => {
					this.inFlightJobs -= batch.length;
					this.running.delete(tracked);
					this.wake('done');
				});
			this.running.add(tracked);
		}
	}

	private leaseFailed(error: unknown): void {
		this.stats.leaseErrors++;
		this.consecutiveErrors++;
		const delay = Math.min(RETRY_MAX_MS, RETRY_INITIAL_MS * 2 ** (this.consecutiveErrors - 1));
		const message = `Durable Jobs: leasing from queue "${this.queue}" failed (${(error as Error).message}); trying again in ${Math.round(delay / 1000)} s`;
		// Every failure of an outage is a warning once, then only every tenth.
		if (this.consecutiveErrors === 1 || this.consecutiveErrors % 10 === 0)
			this.logger.warn(message);
		else this.logger.debug(message);
		if (this.stopped || this.retryTimer) return;
		this.retryTimer = setTimeout(() => {
			this.retryTimer = undefined;
			this.wake('retry');
		}, delay);
		this.retryTimer.unref();
	}

	private async armDueTimer(store: JobStore): Promise<void> {
		let dueInMs: number | null;
		try {
			dueInMs = await store.nextDueInMs(this.queue);
		} catch (error) {
			this.leaseFailed(error);
			return;
		}
		if (this.stopped) return;
		clearTimeout(this.dueTimer);
		this.dueTimer = undefined;
		if (dueInMs === null) return;
		const delay = Math.min(MAX_TIMER_MS, Math.max(0, dueInMs) + TIMER_MARGIN_MS);
		this.dueTimer = setTimeout(() => {
			this.dueTimer = undefined;
			this.wake('timer');
		}, delay);
		this.dueTimer.unref();
	}

	private async openStore(): Promise<JobStore> {
		const { store } = this.options;
		if (typeof store !== 'function') return store;
		this.storePromise ??= store().catch((error: unknown) => {
			this.storePromise = undefined;
			throw error;
		});
		return await this.storePromise;
	}
}

/** Gives jobs back without using an attempt (fenced: a job finished meanwhile is not touched). */
export async function release(
	store: JobStore,
	jobs: Array<Pick<LeasedJob, 'id' | 'attempt_id'>>,
	logger: TriggerLogger = silentLogger,
): Promise<void> {
	if (jobs.length === 0) return;
	await store
		.complete(jobs.map((job) => ({ jobId: job.id, attemptId: job.attempt_id, outcome: 'release' })))
		.catch((error: unknown) =>
			logger.warn(
				`Durable Jobs: could not give back ${jobs.length} job(s) (${(error as Error).message}); they come back when their lease expires`,
			),
		);
}

/** The job a lease would take next (or the queued job due soonest), read-only; null if none. */
export async function peekJob(
	store: JobStore,
	queue: string,
): Promise<(Job & { due: boolean }) | null> {
	return await store.peekJob(queue);
}
