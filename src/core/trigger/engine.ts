import { isMigrationWaitError, isUnreachableError } from '../errors';
import { notifyChannel } from '../identifiers';
import { holdPool } from '../pool';
import type { JobStore } from '../store';
import type { Job, LeasedJobEssentials } from '../types';
import { NotificationListener, silentLogger, type TriggerLogger } from './listener';
import {
	triggerSettings,
	type EmitJobs,
	type JobTriggerOptions,
	type TriggerSettings,
} from './options';
import { WakeUps, backoffMs, type WakeReason } from './wakeups';

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

/**
 * The trigger's engine, without n8n: it leases jobs of one queue and hands them to `emit`,
 * never holding more than `maxInFlight` jobs whose execution has not finished.
 *
 * Wake-ups (each only looks; nothing is emitted unless a job was leased):
 * - `start` / `connect`: after the first LISTEN and after every reconnect, claim what is
 *   already waiting (NOTIFY has no replay);
 * - `notice`: a NOTIFY for this queue (enqueue, retry, release, requeue, sent at commit; a
 *   job of the queue finished or was cancelled anywhere, sent after it, see finishNotices.ts);
 * - `timer`: the earliest future run_at of the queue (delayed jobs, retry backoff), armed
 *   whenever a lease found nothing left to take;
 * - `done`: an emitted execution finished, so its slots are free;
 * - `backstop`: every `backstopMs`, for expired leases and anything a lost notice missed;
 * - `poll`: instead of LISTEN, every `pollIntervalMs`.
 *
 * Wake-ups are coalesced (see WakeUps): one fill runs at a time, and a wake-up during a fill
 * makes it run once more when it ends.
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
	private readonly settings: TriggerSettings;
	private readonly logger: TriggerLogger;
	private readonly wakeUps: WakeUps;
	private storePromise: Promise<JobStore> | undefined;
	/** The pool the trigger keeps open while it runs (see holdPool), and how to let go of it. */
	private heldPool: { pool: JobStore['pool']; letGo: () => void } | undefined;
	private listener: NotificationListener | undefined;
	private inFlightJobs = 0;
	/** Emissions whose promise was rejected, in a row (see emissionFailed). */
	private emissionFailures = 0;
	private started = false;
	private emissionsLeft: number;
	private readonly running = new Set<Promise<unknown>>();

	constructor(private readonly options: JobTriggerOptions) {
		this.settings = triggerSettings(options);
		this.queue = this.settings.queue;
		this.maxInFlight = this.settings.maxInFlight;
		this.batchSize = this.settings.batchSize;
		this.backstopMs = this.settings.backstopMs;
		this.pollIntervalMs = this.settings.pollIntervalMs;
		this.emissionsLeft = options.maxEmissions ?? Number.POSITIVE_INFINITY;
		this.logger = options.logger ?? silentLogger;
		this.wakeUps = new WakeUps(async () => await this.fill(), this.stats.wakes);
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

	private get stopped(): boolean {
		return this.wakeUps.isStopped;
	}

	/**
	 * Opens the store, starts listening (or polling) and claims what is waiting. A database
	 * that cannot be reached right now, or a migration that waits (for a lock a pg_dump holds),
	 * is not an error: the trigger keeps trying in the background and catches up once it can. Anything else (wrong password, missing
	 * migrations with auto-migrate off, missing privileges) is thrown, so the activation fails
	 * with that message.
	 */
	async start(): Promise<void> {
		if (this.started) throw new Error('The trigger was already started');
		this.started = true;
		if (this.pollIntervalMs === null) {
			this.listener = new NotificationListener({
				connection: this.options.connection!,
				channel: notifyChannel(this.settings.schema),
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
			const waitsForMigration = isMigrationWaitError(error);
			if (!waitsForMigration && !isUnreachableError(error)) {
				await this.stop();
				throw error;
			}
			this.logger.warn(
				waitsForMigration
					? `Durable Jobs: ${(error as Error).message}; the trigger for queue "${this.queue}" keeps trying and starts leasing once the migration is applied`
					: `Durable Jobs: the job database cannot be reached (${(error as Error).message}); the trigger for queue "${this.queue}" keeps trying and catches up when it is back`,
			);
			this.listener?.startReconnecting();
		}
		if (!this.listener) this.wake('start');
		if (this.pollIntervalMs === null) this.wakeUps.sweepEvery(this.backstopMs, 'backstop');
		else this.wakeUps.sweepEvery(Math.min(this.pollIntervalMs, this.backstopMs), 'poll');
	}

	/**
	 * Stops leasing and closes the LISTEN connection. Executions already started keep running
	 * (their jobs are finished by the workflow, or come back when their lease expires); jobs a
	 * lease returned after the stop are released at once, without using an attempt.
	 */
	async stop(): Promise<void> {
		if (this.stopped && !this.listener && !this.wakeUps.isLooking) return;
		const wakeUpsStopped = this.wakeUps.stop();
		const listener = this.listener;
		this.listener = undefined;
		await Promise.all([listener?.stop(), wakeUpsStopped]);
		this.heldPool?.letGo();
		this.heldPool = undefined;
	}

	/** Resolves once every emitted execution has settled (tests, shutdown). */
	async settled(): Promise<void> {
		while (this.running.size > 0) await Promise.allSettled([...this.running]);
	}

	/** Look for work now (coalesced with any look already running). */
	wake(reason: WakeReason): void {
		this.wakeUps.wake(reason);
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
		while (
			!this.stopped &&
			!this.wakeUps.isHeldOff &&
			this.emissionsLeft > 0 &&
			this.inFlightJobs < this.maxInFlight
		) {
			const room = Math.min(
				this.maxInFlight - this.inFlightJobs,
				this.emissionsLeft * this.batchSize,
			);
			// Lease limits are powers of two: each distinct limit is a statement text (and a
			// prepared statement per connection) of its own, see sql/lease.ts.
			const limit = 2 ** Math.floor(Math.log2(room));
			let jobs: LeasedJobEssentials[];
			try {
				jobs = await store.lease({
					queue: this.queue,
					limit,
					leaseMs: this.settings.leaseMs,
					concurrencyLimit: this.settings.concurrencyLimit,
					workflowId: this.options.workflowId ?? null,
					includeMetadata: this.settings.includeMetadata,
				});
			} catch (error) {
				this.leaseFailed(error);
				return;
			}
			this.stats.leases++;
			this.stats.leased += jobs.length;
			this.wakeUps.resetBackoff();
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

	private dispatch(jobs: LeasedJobEssentials[]): void {
		for (let start = 0; start < jobs.length; start += this.batchSize) {
			const batch = jobs.slice(start, start + this.batchSize);
			this.inFlightJobs += batch.length;
			this.stats.maxInFlightSeen = Math.max(this.stats.maxInFlightSeen, this.inFlightJobs);
			this.stats.emissions++;
			this.stats.emittedJobs += batch.length;
			this.emissionsLeft--;
			let finished: Promise<unknown>;
			try {
				// Typed by what every shape of leased job has: the lease answered the shape
				// `includeMetadata` asks for, the one JobTriggerOptions ties this `emit` to, which
				// the compiler cannot follow through the flag's value.
				finished = Promise.resolve((this.options.emit as EmitJobs<LeasedJobEssentials>)(batch));
			} catch (error) {
				finished = Promise.reject(error as Error);
			}
			let succeeded = false;
			const tracked = finished
				.then(
					() => {
						succeeded = true;
						this.emissionFailures = 0;
					},
					(error: unknown) => this.emissionFailed(batch.length, error),
				)
				.catch(() => undefined)
				.finally(() => {
					this.inFlightJobs -= batch.length;
					this.running.delete(tracked);
					if (succeeded) this.wake('done');
				});
			this.running.add(tracked);
		}
	}

	/**
	 * The execution could not start or ended abnormally (n8n rejects the emission's promise when
	 * it cannot run the workflow, say while queue mode's Redis is down). Its jobs keep their
	 * lease and come back when it expires, exactly as after a crash, having used an attempt. The
	 * trigger waits before it leases again: 1 s after a failure, doubling with every round of
	 * leases whose executions failed in a row, up to 30 s (failures during a wait belong to the
	 * round before it). Taking the next jobs at once would use an attempt of every job of the
	 * queue, in turn, while no execution can run them.
	 */
	private emissionFailed(jobs: number, error: unknown): void {
		const newRound = !this.wakeUps.isHeldOff;
		if (newRound) {
			this.emissionFailures++;
			this.wakeUps.holdOff(backoffMs(this.emissionFailures));
		}
		const reason = error instanceof Error ? error.message : 'no reason given';
		const message = `Durable Jobs: an execution for ${jobs} job(s) of queue "${this.queue}" ended without a result (${reason}); its jobs come back when their lease expires, and the trigger leases again in up to ${Math.round(backoffMs(this.emissionFailures) / 1000)} s`;
		if (newRound && (this.emissionFailures === 1 || this.emissionFailures % 10 === 0))
			this.logger.warn(message);
		else this.logger.debug(message);
	}

	private leaseFailed(error: unknown): void {
		this.stats.leaseErrors++;
		const { failures, delayMs } = this.wakeUps.retryAfterFailure();
		const message = `Durable Jobs: leasing from queue "${this.queue}" failed (${(error as Error).message}); trying again in ${Math.round(delayMs / 1000)} s`;
		// Every failure of an outage is a warning once, then only every tenth.
		if (failures === 1 || failures % 10 === 0) this.logger.warn(message);
		else this.logger.debug(message);
	}

	private async armDueTimer(store: JobStore): Promise<void> {
		let dueInMs: number | null;
		try {
			dueInMs = await store.nextDueInMs(this.queue);
		} catch (error) {
			this.leaseFailed(error);
			return;
		}
		this.wakeUps.wakeWhenDue(dueInMs);
	}

	/**
	 * The trigger's store, kept while it runs, and its pool held open (see holdPool). A store
	 * whose pool was closed all the same (closeAllPools) is opened again, so the trigger leases
	 * on instead of failing every later lease.
	 */
	private async openStore(): Promise<JobStore> {
		const { store } = this.options;
		if (typeof store !== 'function') return this.holding(store);
		const opening = this.storePromise;
		if (opening) {
			const opened = await opening;
			if (!opened.pool.ending) return this.holding(opened);
			if (this.storePromise === opening) this.storePromise = undefined;
		}
		this.storePromise ??= store().catch((error: unknown) => {
			this.storePromise = undefined;
			throw error;
		});
		return this.holding(await this.storePromise);
	}

	private holding(store: JobStore): JobStore {
		if (this.stopped || this.heldPool?.pool === store.pool) return store;
		this.heldPool?.letGo();
		this.heldPool = { pool: store.pool, letGo: holdPool(store.pool) };
		return store;
	}
}

/** Gives jobs back without using an attempt (fenced: a job finished meanwhile is not touched). */
export async function release(
	store: JobStore,
	jobs: Array<Pick<LeasedJobEssentials, 'id' | 'attempt_id'>>,
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
