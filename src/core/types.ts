export type JobStatus = 'queued' | 'running' | 'done' | 'failed' | 'cancelled';
export type ErrorClass = 'retryable' | 'needs_mapping' | 'needs_manual_review' | 'discarded';
export type CompleteOutcome = 'succeeded' | 'failed' | 'retry' | 'release';

export const ERROR_CLASSES: readonly ErrorClass[] = [
	'retryable',
	'needs_mapping',
	'needs_manual_review',
	'discarded',
];
export const COMPLETE_OUTCOMES: readonly CompleteOutcome[] = [
	'succeeded',
	'failed',
	'retry',
	'release',
];

export interface Job {
	id: string;
	queue: string;
	status: JobStatus;
	payload: unknown;
	idempotency_key: string | null;
	priority: number;
	run_at: Date;
	attempts: number;
	max_attempts: number;
	attempt_id: string | null;
	lease_until: Date | null;
	ordering_key: string | null;
	result: unknown;
	error_code: string | null;
	error_message: string | null;
	error_class: ErrorClass | null;
	error_node: string | null;
	error_workflow: string | null;
	error_execution: string | null;
	callback_url: string | null;
	correlation_id: string | null;
	created_at: Date;
	updated_at: Date;
	started_at: Date | null;
	finished_at: Date | null;
}

export interface Attempt {
	attempt_id: string;
	job_id: string;
	attempt: number;
	workflow_id: string | null;
	execution_id: string | null;
	started_at: Date;
	lease_until: Date | null;
	finished_at: Date | null;
	outcome: string | null;
	error_code: string | null;
	error_message: string | null;
}

export interface EnqueueInput {
	queue: string;
	payload: unknown;
	idempotencyKey?: string | null;
	priority?: number;
	runAt?: Date | string | null;
	delayMs?: number | null;
	maxAttempts?: number;
	orderingKey?: string | null;
	callbackUrl?: string | null;
	correlationId?: string | null;
}

export interface EnqueueResult {
	jobId: string;
	status: JobStatus;
	runAt: Date;
	deduplicated: boolean;
	/** Same key, different payload, and the caller asked for the existing job instead of an error. */
	conflict: boolean;
	/**
	 * Plain status token: returned to the caller that created the job and to idempotent
	 * retries of it (same key, same payload); never for a conflicting payload.
	 */
	statusToken: string | null;
}

export interface LeaseInput {
	queue: string;
	limit?: number;
	leaseMs?: number;
	/** Per-queue concurrency limit: never more than this many live leases in the queue. */
	concurrencyLimit?: number | null;
	workflowId?: string | null;
	executionId?: string | null;
	/**
	 * Return each job's metadata too (default true): its idempotency key, priority, lease end,
	 * ordering key, correlation id and creation time. False returns LeasedJobEssentials, for
	 * a worker that needs only the job's id, attempt and payload: less to send and parse per job.
	 */
	includeMetadata?: boolean;
}

/**
 * A job as a lease returns it: what a worker needs to run the attempt, and no more (every column
 * returned is one more value to send and parse per job; Job Status reads the whole row).
 */
export interface LeasedJob {
	id: string;
	queue: string;
	payload: unknown;
	/** The key the job was enqueued with (Job Lease outputs it as enqueue_idempotency_key). */
	idempotency_key: string | null;
	priority: number;
	/** This attempt's number. */
	attempts: number;
	max_attempts: number;
	attempt_id: string;
	lease_until: Date;
	ordering_key: string | null;
	correlation_id: string | null;
	created_at: Date;
	/** True when this lease took over a job whose previous lease had expired. */
	recovered: boolean;
}

/** A job as a lease with `includeMetadata: false` returns it. */
export type LeasedJobEssentials = Pick<
	LeasedJob,
	'id' | 'queue' | 'payload' | 'attempts' | 'max_attempts' | 'attempt_id' | 'recovered'
>;

export interface ExtendInput {
	jobId: string;
	attemptId: string;
	leaseMs?: number;
	/**
	 * How far the attempt got, e.g. `crm_request` right before a call with an external effect.
	 * If the attempt dies without an outcome, Unknown Outcomes shows it.
	 */
	checkpoint?: string | null;
	/** The n8n workflow and execution running the attempt; recorded if the lease did not know them. */
	workflowId?: string | null;
	executionId?: string | null;
}

export interface ExtendResult {
	extended: boolean;
	leaseUntil: Date | null;
	currentStatus: JobStatus | null;
}

export interface CompleteInput {
	jobId: string;
	attemptId: string;
	outcome: CompleteOutcome;
	result?: unknown;
	errorCode?: string | null;
	errorMessage?: string | null;
	errorClass?: ErrorClass | null;
	errorNode?: string | null;
	errorWorkflow?: string | null;
	errorExecution?: string | null;
	/** Retry: wait exactly this long instead of the backoff; release: wait before the job is due. */
	delayMs?: number | null;
	/**
	 * Retry without `delayMs`: wait at least this long (what a Retry-After header asked for), the
	 * backoff when that is longer. Not capped here beyond the delay's range (365 days): Job
	 * Complete caps it at Backoff Max Seconds.
	 */
	minDelayMs?: number | null;
	backoffBaseMs?: number;
	backoffMaxMs?: number;
}

export interface CompleteResult {
	applied: boolean;
	status: JobStatus | null;
	attempts: number | null;
	maxAttempts: number | null;
	/** When the job is due again: only when the item queued it again (retry, release), else null. */
	runAt: Date | null;
	errorCode: string | null;
	errorClass: ErrorClass | null;
	callbackEventId: string | null;
	/** When not applied: why (the job's status now, or 'not_found'). */
	leaseLostReason: string | null;
}

export interface GuardInput {
	scope?: string;
	entityKey: string;
	version?: number | string | null;
	occurredAt?: Date | string | null;
	state?: string | null;
	/** Allowed order of states; a state earlier than the applied one is stale. */
	stateOrder?: string[] | null;
}

export interface ClaimInput {
	scope: string;
	key: string;
	/** Fingerprint of what the key stands for; a different one under the same key is a Conflict. */
	fingerprint?: string | null;
	claimMs?: number;
	ttlMs?: number;
	guard?: GuardInput | null;
}

export type ClaimRoute = 'new' | 'duplicate' | 'in_progress' | 'conflict' | 'stale';

export interface ClaimResult {
	route: ClaimRoute;
	claimId: string | null;
	replay: boolean;
	claims: number | null;
	claimUntil: Date | null;
	expiresAt: Date | null;
	storedResult: unknown;
	existingStatus: string | null;
	firstSeenAt: Date | null;
	current: { version: string | null; occurredAt: Date | null; state: string | null } | null;
}

export interface SettleInput {
	scope: string;
	key: string;
	claimId?: string | null;
	result?: unknown;
	errorMessage?: string | null;
	ttlMs?: number | null;
}

export interface SettleResult {
	applied: boolean;
	expiresAt: Date | null;
	currentStatus: string | null;
}

export interface OutboxEventInput {
	eventId: string;
	eventType: string;
	eventVersion?: number | string | null;
	occurredAt?: Date | string | null;
	source?: string | null;
	tenantId?: string | null;
	correlationId?: string | null;
	orderingKey?: string | null;
	payload: unknown;
	destination?: string | null;
	queue?: string;
	maxAttempts?: number;
	runAt?: Date | string | null;
	/** SQL to run in the same transaction, before the event is written; $1… from params. */
	companionSql?: string | null;
	companionParams?: unknown[];
}

export interface OutboxResult {
	jobId: string;
	eventId: string;
	queue: string;
	status: JobStatus;
	deduplicated: boolean;
	companionRowCount: number | null;
	companionRows: unknown[];
}

export interface JobStatusView {
	job: Job;
	attempts: Attempt[];
}

export interface QueueStats {
	queue: string;
	queued: number;
	ready: number;
	retrying: number;
	running: number;
	running_expired: number;
	oldest_ready_age_seconds: number | null;
	oldest_queued_age_seconds: number | null;
	done: number;
	failed: number;
	cancelled: number;
	dead_letter: number;
}
