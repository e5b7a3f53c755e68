import { createHash, createHmac, hash, timingSafeEqual } from 'node:crypto';
import type pg from 'pg';
import { v7 as uuidv7 } from 'uuid';

import {
	DurableJobsError,
	IdempotencyConflictError,
	ValidationError,
	classifyDatabaseError,
} from './errors';
import {
	DEFAULT_SCHEMA,
	quoteIdentifier,
	validateQueueName,
	validateSchemaName,
} from './identifiers';
import { completeQuery, type CompleteRow } from './sql/complete';
import {
	enqueueQuery,
	enqueueWithoutKeysQuery,
	findByKeysQuery,
	type EnqueueRow,
} from './sql/enqueue';
import {
	claimQuery,
	guardQuery,
	readKeysQuery,
	releaseClaimsQuery,
	settleClaimsQuery,
	type ClaimRow,
	type GuardRow,
	type SettleRow,
} from './sql/idempotency';
import { extendLeaseQuery, leaseQuery, queueLockQuery, runningCountQuery } from './sql/lease';
import { outboxInsertQuery, type OutboxRow } from './sql/outbox';
import {
	attemptsQuery,
	cancelQuery,
	statusViewsQuery,
	tokenHashesQuery,
	jobsByIdQuery,
	purgeIdempotencyQuery,
	purgeJobsQuery,
	requeueQuery,
	statsQuery,
	unknownOutcomeQuery,
	type RequeueSelection,
} from './sql/status';
import type { SqlQuery } from './sql/types';
import {
	COMPLETE_OUTCOMES,
	ERROR_CLASSES,
	type Attempt,
	type ClaimInput,
	type ClaimResult,
	type CompleteInput,
	type CompleteResult,
	type EnqueueInput,
	type EnqueueResult,
	type ExtendInput,
	type ExtendResult,
	type Job,
	type JobStatusView,
	type LeaseInput,
	type LeasedJob,
	type OutboxEventInput,
	type OutboxResult,
	type QueueStats,
	type SettleInput,
	type SettleResult,
} from './types';
import {
	DEFAULT_MAX_PAYLOAD_BYTES,
	fingerprint,
	integerInRange,
	optionalDate,
	optionalKey,
	optionalText,
	optionalUrl,
	serializePayload,
	validateKey,
	validateCheckpoint,
	validateUuid,
} from './validate';

export interface StoreOptions {
	schema?: string;
	/** Largest accepted payload, in bytes of JSON. */
	maxPayloadBytes?: number;
	/** Queue that receives job-finished events for jobs with a callback URL. */
	callbackQueue?: string;
	/**
	 * Send the frequent statements (enqueue, lease, heartbeat, complete, claim, settle, status,
	 * stats) as named prepared statements, parsed once per connection (default true). Turn it
	 * off behind a pooler that does not keep prepared statements across transactions, e.g.
	 * PgBouncer in transaction mode before 1.21 (or without max_prepared_statements).
	 */
	preparedStatements?: boolean;
}

/** One entry per input item: the result, or the error that kept that item from being written. */
export type ItemResults<T> = Array<T | DurableJobsError>;

const DEFAULT_LEASE_MS = 60_000;
const MAX_LEASE_MS = 24 * 3600 * 1000;
const DEFAULT_MAX_ATTEMPTS = 5;
const DEFAULT_BACKOFF_BASE_MS = 5_000;
const DEFAULT_BACKOFF_MAX_MS = 3_600_000;
const DEFAULT_CLAIM_MS = 5 * 60_000;
const DEFAULT_TTL_MS = 24 * 3600_000;
/** Second key of the per-queue advisory lock taken when a concurrency limit is enforced. */
const QUEUE_LOCK_NAMESPACE = 0x44_4a_51; // "DJQ"

export function hashToken(token: string): Buffer {
	return createHash('sha256').update(token, 'utf8').digest();
}

/** Prepared statement names by statement text (the text includes the schema). */
const statementNames = new Map<string, string>();
const MAX_STATEMENT_NAMES = 500;

/** The name of a prepared statement: a hash of its text, so equal texts share a name and different texts never do. */
export function statementName(text: string): string {
	let name = statementNames.get(text);
	if (name === undefined) {
		name = `dj_${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
		if (statementNames.size >= MAX_STATEMENT_NAMES) statementNames.clear();
		statementNames.set(text, name);
	}
	return name;
}

/** Per pool and schema: the secret status tokens are derived from (see migration 0003). */
const tokenSecrets = new WeakMap<pg.Pool, Map<string, Promise<Buffer>>>();

const DUMMY_TOKEN_HASH = hashToken('durable-jobs-no-such-job');
const NIL_UUID = '00000000-0000-0000-0000-000000000000';
const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The core engine: every statement the package runs goes through here. It has no n8n
 * dependency; the nodes are thin glue over it.
 */
export class JobStore {
	readonly schema: string;
	readonly maxPayloadBytes: number;
	readonly callbackQueue: string;
	readonly preparedStatements: boolean;
	private readonly s: string;

	constructor(
		readonly pool: pg.Pool,
		options: StoreOptions = {},
	) {
		this.schema = validateSchemaName(options.schema ?? DEFAULT_SCHEMA);
		this.s = quoteIdentifier(this.schema);
		this.maxPayloadBytes = options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
		this.callbackQueue = validateQueueName(options.callbackQueue ?? 'callbacks', 'callbackQueue');
		this.preparedStatements = options.preparedStatements !== false;
	}

	private async tokenSecret(): Promise<Buffer> {
		let bySchema = tokenSecrets.get(this.pool);
		if (!bySchema) {
			bySchema = new Map();
			tokenSecrets.set(this.pool, bySchema);
		}
		let secret = bySchema.get(this.schema);
		if (!secret) {
			secret = this.run<{ value: Buffer }>({
				text: `SELECT value FROM ${this.s}.settings WHERE name = 'status_token_secret'`,
				values: [],
			}).then((rows) => {
				if (!rows[0])
					throw new DurableJobsError(
						'schema_incomplete',
						`Schema "${this.schema}" has no status token secret`,
						{ fix: 'Run the migrations again (npx n8n-nodes-durable-jobs migrate)' },
					);
				return rows[0].value;
			});
			bySchema.set(this.schema, secret);
			secret.catch(() => bySchema!.delete(this.schema));
		}
		return await secret;
	}

	/** The status token of a job: 256 bits, derived so it can be handed out again to an idempotent retry. */
	private statusToken(secret: Buffer, jobId: string): string {
		return createHmac('sha256', secret).update(jobId).digest('base64url');
	}

	private async run<R extends pg.QueryResultRow>(
		query: SqlQuery,
		client?: pg.ClientBase,
	): Promise<R[]> {
		try {
			const config: pg.QueryConfig =
				query.prepare && this.preparedStatements
					? { name: statementName(query.text), text: query.text, values: query.values }
					: { text: query.text, values: query.values };
			const result = await (client ?? this.pool).query<R>(config);
			return result.rows;
		} catch (error) {
			throw classifyDatabaseError(error);
		}
	}

	private async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
		let client: pg.PoolClient;
		try {
			client = await this.pool.connect();
		} catch (error) {
			throw classifyDatabaseError(error);
		}
		try {
			await client.query('BEGIN');
			const value = await work(client);
			await client.query('COMMIT');
			return value;
		} catch (error) {
			await client.query('ROLLBACK').catch(() => undefined);
			throw classifyDatabaseError(error);
		} finally {
			client.release();
		}
	}

	// ---------------------------------------------------------------- enqueue

	/**
	 * Inserts one job per item in one statement. An item whose idempotency key exists with the
	 * same payload fingerprint returns the existing job (deduplicated); with another payload it
	 * gets an IdempotencyConflictError and writes nothing. With `allOrNothing`, any bad item
	 * rolls the whole batch back and the first error is thrown.
	 */
	async enqueue(
		items: EnqueueInput[],
		options: { allOrNothing?: boolean; onConflict?: 'error' | 'existing' } = {},
	): Promise<ItemResults<EnqueueResult>> {
		const results: ItemResults<EnqueueResult> = new Array(items.length);
		const rows: EnqueueRow[] = [];
		/** The status token of each new job id, derived once. */
		const tokens = new Map<string, string>();
		let withKeys = false;
		const secret = items.length > 0 ? await this.tokenSecret() : Buffer.alloc(0);
		items.forEach((item, ord) => {
			try {
				const queue = validateQueueName(item.queue);
				const payloadJson = serializePayload(item.payload, 'payload', this.maxPayloadBytes);
				const runAt = optionalDate(item.runAt, 'runAt');
				const idempotencyKey = optionalKey(item.idempotencyKey, 'idempotencyKey');
				const row: EnqueueRow = {
					ord,
					id: '',
					queue,
					payload: payloadJson,
					idempotency_key: idempotencyKey,
					// Only compared when a key is reused, so jobs without a key do not need one.
					payload_fingerprint: idempotencyKey === null ? null : fingerprint(item.payload),
					priority: integerInRange(item.priority, 'priority', -1000, 1000, 0),
					run_at: runAt ? runAt.toISOString() : null,
					delay_ms: integerInRange(item.delayMs, 'delayMs', 0, 365 * 24 * 3600_000, 0),
					max_attempts: integerInRange(
						item.maxAttempts,
						'maxAttempts',
						1,
						1000,
						DEFAULT_MAX_ATTEMPTS,
					),
					ordering_key: optionalKey(item.orderingKey, 'orderingKey'),
					callback_url: optionalUrl(item.callbackUrl, 'callbackUrl'),
					correlation_id: optionalText(item.correlationId, 'correlationId', 255),
					status_token_hash: null,
				};
				// Ids and tokens only for valid items, after validation.
				row.id = uuidv7();
				const token = this.statusToken(secret, row.id);
				tokens.set(row.id, token);
				row.status_token_hash = hash('sha256', token, 'base64');
				if (idempotencyKey !== null) withKeys = true;
				rows.push(row);
			} catch (error) {
				results[ord] = asItemError(error);
			}
		});
		if (options.allOrNothing) throwFirst(results);
		if (rows.length === 0) return results;

		if (!withKeys) {
			// Nothing can conflict: one INSERT, atomic on its own, so no transaction either.
			const byId = new Map(rows.map((row) => [row.id, row]));
			const inserted = await this.run<{ id: string; status: Job['status']; run_at: Date }>(
				enqueueWithoutKeysQuery(this.s, rows),
			);
			for (const row of inserted) {
				results[byId.get(row.id)!.ord] = {
					jobId: row.id,
					status: row.status,
					runAt: row.run_at,
					deduplicated: false,
					conflict: false,
					statusToken: tokens.get(row.id)!,
				};
			}
			for (const row of rows) {
				results[row.ord] ??= new DurableJobsError(
					'enqueue_unresolved',
					'The job could not be stored or found; retry the request',
					{ httpStatus: 503 },
				);
			}
			return results;
		}

		const resolve = async (client?: pg.ClientBase) => {
			const returned = await this.run<EnqueueReturnRow>(enqueueQuery(this.s, rows), client);
			const unresolved = returned.filter((row) => row.id === null);
			if (unresolved.length > 0) {
				const byOrd = new Map(rows.map((row) => [row.ord, row]));
				const found = await this.run<EnqueueReturnRow>(
					findByKeysQuery(
						this.s,
						unresolved.map((row) => ({
							ord: row.ord,
							queue: byOrd.get(row.ord)!.queue,
							idempotency_key: byOrd.get(row.ord)!.idempotency_key!,
						})),
					),
					client,
				);
				const foundByOrd = new Map(found.map((row) => [row.ord, row]));
				for (const row of unresolved) {
					const match = foundByOrd.get(row.ord);
					if (match) Object.assign(row, match, { deduplicated: true });
				}
			}
			const byOrd = new Map(rows.map((row) => [row.ord, row]));
			for (const row of returned) {
				const input = byOrd.get(row.ord)!;
				if (row.id === null) {
					results[row.ord] = new DurableJobsError(
						'enqueue_unresolved',
						'The job could not be stored or found; retry the request',
						{ httpStatus: 503 },
					);
				} else if (
					row.deduplicated &&
					row.existing_fingerprint !== input.payload_fingerprint &&
					options.onConflict !== 'existing'
				) {
					results[row.ord] = new IdempotencyConflictError(input.idempotency_key ?? '', row.id);
				} else {
					results[row.ord] = {
						jobId: row.id,
						status: row.status,
						runAt: row.run_at,
						deduplicated: row.deduplicated,
						conflict: row.deduplicated && row.existing_fingerprint !== input.payload_fingerprint,
						statusToken:
							row.deduplicated && row.existing_fingerprint !== input.payload_fingerprint
								? null
								: (tokens.get(row.id) ?? this.statusToken(secret, row.id)),
					};
				}
			}
		};

		if (options.allOrNothing) {
			// The INSERT must be undone when an item turns out to conflict, so the batch runs in a
			// transaction; the commit happens only when every item succeeded.
			await this.transaction(async (client) => {
				await resolve(client);
				throwFirst(results);
			});
		} else {
			await resolve();
		}
		return results;
	}

	// ---------------------------------------------------------------- lease

	async lease(input: LeaseInput): Promise<LeasedJob[]> {
		const queue = validateQueueName(input.queue);
		const limit = integerInRange(input.limit, 'limit', 1, 10_000, 1);
		const leaseMs = integerInRange(input.leaseMs, 'leaseMs', 1_000, MAX_LEASE_MS, DEFAULT_LEASE_MS);
		const concurrencyLimit =
			input.concurrencyLimit === null ||
			input.concurrencyLimit === undefined ||
			(input.concurrencyLimit as unknown) === ''
				? null
				: integerInRange(input.concurrencyLimit, 'concurrencyLimit', 1, 100_000, 1);
		const params = {
			queue,
			limit,
			leaseMs,
			workflowId: optionalText(input.workflowId, 'workflowId', 255),
			executionId: optionalText(input.executionId, 'executionId', 255),
			attemptIds: Array.from({ length: limit }, () => uuidv7()),
		};
		let rows: LeaseReturnRow[];
		if (concurrencyLimit === null) {
			rows = await this.run<LeaseReturnRow>(leaseQuery(this.s, { ...params, slots: limit }));
		} else {
			// The running count must be read after every other leaser of this queue has committed,
			// so the lock is taken in its own statement: a statement's snapshot is fixed when it
			// starts, and a lock taken inside the lease statement would count with stale data.
			rows = await this.transaction(async (client) => {
				await this.run(queueLockQuery(QUEUE_LOCK_NAMESPACE, queue), client);
				const [{ running }] = await this.run<{ running: number }>(
					runningCountQuery(this.s, queue),
					client,
				);
				const slots = Math.min(limit, concurrencyLimit - running);
				if (slots <= 0) return [];
				return await this.run<LeaseReturnRow>(leaseQuery(this.s, { ...params, slots }), client);
			});
		}
		return rows.map((row) => {
			const {
				previous_attempt_id: _previous,
				expired,
				lease_order_seq: _seq,
				lease_order_priority: _priority,
				lease_order_run_at: _runAt,
				exhausted_count: _exhausted,
				...job
			} = row;
			return { ...job, recovered: expired } as LeasedJob;
		});
	}

	/**
	 * Heartbeat: moves lease_until forward, fenced by (job_id, attempt_id, running). A checkpoint
	 * is recorded on the attempt (see migration 0006), only for items whose lease was extended.
	 */
	async extendLease(
		items: ExtendInput[],
		options: { allOrNothing?: boolean } = {},
	): Promise<ItemResults<ExtendResult>> {
		const results: ItemResults<ExtendResult> = new Array(items.length);
		const rows: Array<{
			ord: number;
			job_id: string;
			attempt_id: string;
			lease_ms: number;
			checkpoint: string | null;
			workflow_id: string | null;
			execution_id: string | null;
		}> = [];
		items.forEach((item, ord) => {
			try {
				rows.push({
					ord,
					job_id: validateUuid(item.jobId, 'jobId'),
					attempt_id: validateUuid(item.attemptId, 'attemptId'),
					lease_ms: integerInRange(item.leaseMs, 'leaseMs', 1_000, MAX_LEASE_MS, DEFAULT_LEASE_MS),
					checkpoint: validateCheckpoint(item.checkpoint),
					workflow_id: optionalText(item.workflowId, 'workflowId', 255),
					execution_id: optionalText(item.executionId, 'executionId', 255),
				});
			} catch (error) {
				results[ord] = asItemError(error);
			}
		});
		if (options.allOrNothing) throwFirst(results);
		if (rows.length === 0) return results;
		const returned = await this.run<{
			ord: number;
			extended: boolean;
			lease_until: Date | null;
			current_status: Job['status'] | null;
		}>(extendLeaseQuery(this.s, rows));
		for (const row of returned) {
			results[row.ord] = {
				extended: row.extended,
				leaseUntil: row.lease_until,
				currentStatus: row.extended ? 'running' : row.current_status,
			};
		}
		return results;
	}

	// ---------------------------------------------------------------- complete

	async complete(
		items: CompleteInput[],
		options: { allOrNothing?: boolean } = {},
	): Promise<ItemResults<CompleteResult>> {
		const results: ItemResults<CompleteResult> = new Array(items.length);
		const rows: CompleteRow[] = [];
		items.forEach((item, ord) => {
			try {
				if (!COMPLETE_OUTCOMES.includes(item.outcome)) {
					throw new ValidationError(
						'outcome',
						`"${String(item.outcome).slice(0, 40)}" is not an outcome`,
						`Use one of: ${COMPLETE_OUTCOMES.join(', ')}`,
					);
				}
				if (item.errorClass && !ERROR_CLASSES.includes(item.errorClass)) {
					throw new ValidationError(
						'errorClass',
						`"${String(item.errorClass).slice(0, 40)}" is not a class`,
						`Use one of: ${ERROR_CLASSES.join(', ')}`,
					);
				}
				let result: string | null = null;
				if (item.outcome === 'succeeded' && item.result !== undefined) {
					result = serializePayload(item.result, 'result', this.maxPayloadBytes);
				}
				const row: CompleteRow = {
					ord,
					job_id: validateUuid(item.jobId, 'jobId'),
					attempt_id: validateUuid(item.attemptId, 'attemptId'),
					outcome: item.outcome,
					result,
					error_code: optionalText(item.errorCode, 'errorCode', 100),
					error_message: optionalText(item.errorMessage, 'errorMessage', 4000),
					error_class: item.errorClass ?? null,
					error_node: optionalText(item.errorNode, 'errorNode', 255),
					error_workflow: optionalText(item.errorWorkflow, 'errorWorkflow', 255),
					error_execution: optionalText(item.errorExecution, 'errorExecution', 255),
					delay_ms:
						item.delayMs === undefined || item.delayMs === null
							? null
							: integerInRange(item.delayMs, 'delayMs', 0, 365 * 24 * 3600_000, 0),
					backoff_base_ms: integerInRange(
						item.backoffBaseMs,
						'backoffBaseMs',
						0,
						24 * 3600_000,
						DEFAULT_BACKOFF_BASE_MS,
					),
					backoff_max_ms: integerInRange(
						item.backoffMaxMs,
						'backoffMaxMs',
						0,
						30 * 24 * 3600_000,
						DEFAULT_BACKOFF_MAX_MS,
					),
					jitter: null,
				};
				// The equal jitter of the retry backoff, drawn here so the statement has no random().
				if (row.outcome === 'retry' && row.delay_ms === null) row.jitter = Math.random();
				rows.push(row);
			} catch (error) {
				results[ord] = asItemError(error);
			}
		});
		if (options.allOrNothing) throwFirst(results);
		if (rows.length === 0) return results;
		const returned = await this.run<CompleteReturnRow>(
			completeQuery(this.s, rows, this.callbackQueue),
		);
		for (const row of returned) {
			results[row.ord] = {
				applied: row.applied,
				status: row.applied ? row.status : row.current_status,
				attempts: row.attempts,
				maxAttempts: row.max_attempts,
				runAt: row.run_at,
				errorCode: row.error_code,
				errorClass: row.error_class,
				callbackEventId: row.callback_event_id,
				leaseLostReason: row.applied ? null : leaseLostReason(row),
			};
		}
		return results;
	}

	// ---------------------------------------------------------------- idempotency

	async claim(
		items: ClaimInput[],
		options: { allOrNothing?: boolean } = {},
	): Promise<ItemResults<ClaimResult>> {
		const results: ItemResults<ClaimResult> = new Array(items.length);
		const rows: ClaimRow[] = [];
		const guards = new Map<number, GuardRow>();
		const firstOrdByKey = new Map<string, number>();
		const repeats: Array<{ ord: number; firstOrd: number; fingerprint: string | null }> = [];
		items.forEach((item, ord) => {
			try {
				const scope = validateKey(item.scope, 'scope');
				const key = validateKey(item.key, 'key');
				const fp = optionalText(item.fingerprint, 'fingerprint', 255);
				const guard = item.guard ? this.guardRow(item.guard, ord, scope, key) : null;
				const mapKey = JSON.stringify([scope, key]);
				const firstOrd = firstOrdByKey.get(mapKey);
				if (firstOrd !== undefined) {
					repeats.push({ ord, firstOrd, fingerprint: fp });
					return;
				}
				firstOrdByKey.set(mapKey, ord);
				rows.push({
					ord,
					scope,
					key,
					fingerprint: fp,
					claim_id: uuidv7(),
					claim_ms: integerInRange(
						item.claimMs,
						'claimMs',
						1_000,
						7 * 24 * 3600_000,
						DEFAULT_CLAIM_MS,
					),
					ttl_ms: integerInRange(item.ttlMs, 'ttlMs', 1_000, 3650 * 24 * 3600_000, DEFAULT_TTL_MS),
				});
				if (guard) guards.set(ord, guard);
			} catch (error) {
				results[ord] = asItemError(error);
			}
		});
		if (options.allOrNothing) throwFirst(results);
		if (rows.length > 0) {
			const byOrd = new Map(rows.map((row) => [row.ord, row]));
			const work = async (client?: pg.ClientBase) => {
				const returned = await this.run<ClaimReturnRow>(claimQuery(this.s, rows), client);
				const unseen = returned.filter((row) => !row.claimed && row.existing_status === null);
				if (unseen.length > 0) {
					const read = await this.run<ClaimReturnRow>(
						readKeysQuery(
							this.s,
							unseen.map((row) => ({
								ord: row.ord,
								scope: byOrd.get(row.ord)!.scope,
								key: byOrd.get(row.ord)!.key,
							})),
						),
						client,
					);
					const readByOrd = new Map(read.map((row) => [row.ord, row]));
					for (const row of unseen) Object.assign(row, readByOrd.get(row.ord) ?? {});
				}
				for (const row of returned) results[row.ord] = claimResult(row, byOrd.get(row.ord)!);

				const guarded = returned.filter((row) => row.claimed && guards.has(row.ord));
				if (guarded.length > 0 && client) {
					const verdicts = await this.run<{
						ord: number;
						applied: boolean;
						current_version: string | null;
						current_occurred_at: Date | null;
						current_state: string | null;
					}>(
						guardQuery(
							this.s,
							guarded.map((row) => guards.get(row.ord)!),
						),
						client,
					);
					const stale = verdicts.filter((verdict) => !verdict.applied);
					if (stale.length > 0) {
						await this.run(
							releaseClaimsQuery(
								this.s,
								stale.map((verdict) => ({
									scope: byOrd.get(verdict.ord)!.scope,
									key: byOrd.get(verdict.ord)!.key,
									claim_id: byOrd.get(verdict.ord)!.claim_id,
								})),
							),
							client,
						);
					}
					for (const verdict of stale) {
						const previous = results[verdict.ord] as ClaimResult;
						results[verdict.ord] = {
							...previous,
							route: 'stale',
							claimId: null,
							replay: false,
							current: {
								version: verdict.current_version,
								occurredAt: verdict.current_occurred_at,
								state: verdict.current_state,
							},
						};
					}
				}
			};
			if (guards.size > 0) await this.transaction(work);
			else await work();
		}
		for (const repeat of repeats) {
			const first = results[repeat.firstOrd];
			if (first instanceof DurableJobsError || first === undefined) {
				results[repeat.ord] =
					first ?? new DurableJobsError('claim_failed', 'The first item with this key failed');
				continue;
			}
			const sameFingerprint =
				(rows.find((row) => row.ord === repeat.firstOrd)?.fingerprint ?? null) ===
				repeat.fingerprint;
			results[repeat.ord] = {
				...first,
				route: sameFingerprint ? (first.route === 'new' ? 'in_progress' : first.route) : 'conflict',
				claimId: null,
				replay: false,
			};
		}
		return results;
	}

	private guardRow(
		guard: NonNullable<ClaimInput['guard']>,
		ord: number,
		scope: string,
		key: string,
	): GuardRow {
		const entityKey = validateKey(guard.entityKey, 'entityKey');
		const version =
			guard.version === undefined || guard.version === null || guard.version === ''
				? null
				: String(guard.version);
		if (version !== null && !/^-?\d+(\.\d+)?$/.test(version)) {
			throw new ValidationError(
				'version',
				`"${version.slice(0, 40)}" is not a number`,
				'Pass the entity version as a number (e.g. a sequence or revision number), or use Occurred At instead',
			);
		}
		const occurredAt = optionalDate(guard.occurredAt, 'occurredAt');
		const state = optionalText(guard.state, 'state', 255);
		let stateRank: number | null = null;
		if (state !== null && guard.stateOrder && guard.stateOrder.length > 0) {
			stateRank = guard.stateOrder.indexOf(state);
			if (stateRank < 0) {
				throw new ValidationError(
					'state',
					`"${state.slice(0, 40)}" is not in the state order (${guard.stateOrder.join(' → ')})`,
					'Add the state to the State Order, or fix the state field',
				);
			}
		}
		if (version === null && occurredAt === null && stateRank === null) {
			throw new ValidationError(
				'version',
				'the late-event guard needs a version, an occurred-at time or a state',
				'Map Version, Occurred At or State to a field of the event',
			);
		}
		return {
			ord,
			scope: validateKey(guard.scope ?? scope, 'guardScope'),
			entity_key: entityKey,
			version,
			occurred_at: occurredAt ? occurredAt.toISOString() : null,
			state,
			state_rank: stateRank,
			event_key: key,
		};
	}

	async completeClaims(
		items: SettleInput[],
		options: { allOrNothing?: boolean } = {},
	): Promise<ItemResults<SettleResult>> {
		return await this.settle(items, 'completed', options);
	}

	async failClaims(
		items: SettleInput[],
		options: { allOrNothing?: boolean } = {},
	): Promise<ItemResults<SettleResult>> {
		return await this.settle(items, 'failed', options);
	}

	private async settle(
		items: SettleInput[],
		status: 'completed' | 'failed',
		options: { allOrNothing?: boolean },
	): Promise<ItemResults<SettleResult>> {
		const results: ItemResults<SettleResult> = new Array(items.length);
		const rows: SettleRow[] = [];
		items.forEach((item, ord) => {
			try {
				rows.push({
					ord,
					scope: validateKey(item.scope, 'scope'),
					key: validateKey(item.key, 'key'),
					claim_id: item.claimId ? validateUuid(item.claimId, 'claimId') : null,
					result:
						status === 'completed' && item.result !== undefined
							? JSON.parse(serializePayload(item.result, 'result', this.maxPayloadBytes))
							: null,
					error_message: optionalText(item.errorMessage, 'errorMessage', 4000),
					ttl_ms:
						item.ttlMs === undefined || item.ttlMs === null
							? null
							: integerInRange(item.ttlMs, 'ttlMs', 1_000, 3650 * 24 * 3600_000, DEFAULT_TTL_MS),
				});
			} catch (error) {
				results[ord] = asItemError(error);
			}
		});
		if (options.allOrNothing) throwFirst(results);
		if (rows.length === 0) return results;
		const returned = await this.run<{
			ord: number;
			applied: boolean;
			expires_at: Date | null;
			current_status: string | null;
		}>(settleClaimsQuery(this.s, rows, status));
		for (const row of returned) {
			results[row.ord] = {
				applied: row.applied,
				expiresAt: row.expires_at,
				currentStatus: row.applied ? status : row.current_status,
			};
		}
		return results;
	}

	// ---------------------------------------------------------------- outbox

	/**
	 * Writes events to the outbox. Companion SQL (the business write) runs in the same
	 * transaction, once per item with that item's parameters; the events are then inserted in
	 * one statement. With `allOrNothing`, any failure rolls everything back and is thrown;
	 * otherwise a failing item's companion SQL is undone by a savepoint and only that item fails.
	 */
	async writeOutbox(
		items: OutboxEventInput[],
		options: { allOrNothing?: boolean; defaultQueue?: string } = {},
	): Promise<ItemResults<OutboxResult>> {
		const results: ItemResults<OutboxResult> = new Array(items.length);
		const rows: OutboxRow[] = [];
		const companions = new Map<number, { sql: string; params: unknown[] }>();
		items.forEach((item, ord) => {
			try {
				const eventId = validateKey(item.eventId, 'eventId');
				const eventType = validateKey(item.eventType, 'eventType');
				const queue = validateQueueName(item.queue ?? options.defaultQueue ?? 'outbox', 'queue');
				const occurredAt = optionalDate(item.occurredAt, 'occurredAt') ?? new Date();
				const runAt = optionalDate(item.runAt, 'runAt');
				serializePayload(item.payload, 'payload', this.maxPayloadBytes);
				const envelope = {
					event_id: eventId,
					event_type: eventType,
					event_version:
						item.eventVersion === undefined ||
						item.eventVersion === null ||
						item.eventVersion === ''
							? 1
							: item.eventVersion,
					occurred_at: occurredAt.toISOString(),
					source: optionalText(item.source, 'source', 255),
					tenant_id: optionalText(item.tenantId, 'tenantId', 255),
					correlation_id: optionalText(item.correlationId, 'correlationId', 255),
					ordering_key: optionalKey(item.orderingKey, 'orderingKey'),
					destination: optionalText(item.destination, 'destination', 2048),
					payload: item.payload,
				};
				if (
					item.companionSql !== undefined &&
					item.companionSql !== null &&
					item.companionSql.trim() !== ''
				) {
					companions.set(ord, { sql: item.companionSql, params: item.companionParams ?? [] });
				}
				rows.push({
					ord,
					id: uuidv7(),
					queue,
					event_id: eventId,
					envelope,
					fingerprint: fingerprint(envelope.payload),
					ordering_key: envelope.ordering_key,
					correlation_id: envelope.correlation_id,
					max_attempts: integerInRange(item.maxAttempts, 'maxAttempts', 1, 1000, 10),
					run_at: runAt ? runAt.toISOString() : null,
				});
			} catch (error) {
				results[ord] = asItemError(error);
			}
		});
		if (options.allOrNothing) throwFirst(results);
		if (rows.length === 0) return results;

		const companionResults = new Map<number, { rowCount: number | null; rows: unknown[] }>();
		await this.transaction(async (client) => {
			let accepted = rows;
			if (companions.size > 0) {
				accepted = [];
				for (const row of rows) {
					const companion = companions.get(row.ord);
					if (!companion) {
						accepted.push(row);
						continue;
					}
					if (options.allOrNothing) {
						const result = await client
							.query(companion.sql, companion.params)
							.catch((error: unknown) => {
								const itemError = companionError(error);
								itemError.itemPosition = row.ord;
								throw itemError;
							});
						companionResults.set(row.ord, { rowCount: result.rowCount, rows: result.rows });
						accepted.push(row);
						continue;
					}
					await client.query('SAVEPOINT durable_jobs_item');
					try {
						const result = await client.query(companion.sql, companion.params);
						await client.query('RELEASE SAVEPOINT durable_jobs_item');
						companionResults.set(row.ord, { rowCount: result.rowCount, rows: result.rows });
						accepted.push(row);
					} catch (error) {
						await client.query('ROLLBACK TO SAVEPOINT durable_jobs_item');
						results[row.ord] = companionError(error);
					}
				}
			}
			if (accepted.length === 0) return;
			const returned = await this.run<{
				ord: number;
				id: string;
				status: Job['status'];
				deduplicated: boolean;
			}>(outboxInsertQuery(this.s, accepted), client);
			const byOrd = new Map(accepted.map((row) => [row.ord, row]));
			for (const row of returned) {
				const input = byOrd.get(row.ord)!;
				const companion = companionResults.get(row.ord);
				results[row.ord] = {
					jobId: row.id,
					eventId: input.event_id,
					queue: input.queue,
					status: row.status,
					deduplicated: row.deduplicated,
					companionRowCount: companion?.rowCount ?? null,
					companionRows: companion?.rows ?? [],
				};
			}
		});
		return results;
	}

	// ---------------------------------------------------------------- status and admin

	/**
	 * A job by id and status token. Unknown ids, malformed ids and wrong tokens all answer null
	 * after the same work (one lookup, one constant-time hash compare).
	 */
	async getStatus(jobId: string, token: string): Promise<JobStatusView | null> {
		const [view] = await this.getStatusMany([{ jobId, token }]);
		return view;
	}

	/**
	 * Batch form of getStatus: two statements for any number of lookups. Each entry is the view
	 * or null, and null means the same thing for unknown ids, malformed ids and wrong tokens.
	 */
	async getStatusMany(
		lookups: Array<{ jobId: unknown; token: unknown }>,
	): Promise<Array<JobStatusView | null>> {
		const ids = lookups.map((lookup) =>
			typeof lookup.jobId === 'string' && UUID_TEXT.test(lookup.jobId)
				? lookup.jobId.toLowerCase()
				: NIL_UUID,
		);
		const hashes = await this.run<{ id: string; status_token_hash: Buffer | null }>(
			tokenHashesQuery(this.s, [...new Set(ids)]),
		);
		const hashById = new Map(hashes.map((row) => [row.id, row.status_token_hash]));
		const matchedIds = lookups.map((lookup, index) => {
			const stored = hashById.get(ids[index]);
			const expected =
				stored && stored.length === DUMMY_TOKEN_HASH.length ? stored : DUMMY_TOKEN_HASH;
			const given = hashToken(typeof lookup.token === 'string' ? lookup.token : '');
			return timingSafeEqual(expected, given) && stored !== undefined && stored !== null
				? ids[index]
				: null;
		});
		const wanted = [...new Set(matchedIds.filter((id): id is string => id !== null))];
		if (wanted.length === 0) return matchedIds.map(() => null);
		const rows = await this.run<Job & { attempt_rows: Array<Record<string, unknown>> }>(
			statusViewsQuery(this.s, wanted),
		);
		const views = new Map(
			rows.map(({ attempt_rows: attemptRows, ...job }) => [
				job.id,
				{ job, attempts: attemptRows.map(attemptFromJson) },
			]),
		);
		return matchedIds.map((id) => (id === null ? null : (views.get(id) ?? null)));
	}

	/** Operator view by id (no token): for Job Status in admin workflows. */
	async getJobs(jobIds: string[]): Promise<JobStatusView[]> {
		const ids = jobIds.map((id, index) => validateUuid(id, `jobIds[${index}]`));
		if (ids.length === 0) return [];
		const jobs = await this.run<Job>(jobsByIdQuery(this.s, ids));
		const attempts = await this.run<Attempt>(attemptsQuery(this.s, ids));
		return jobs.map((job) => ({
			job,
			attempts: attempts.filter((attempt) => attempt.job_id === job.id),
		}));
	}

	async stats(queue?: string | null): Promise<QueueStats[]> {
		const name = queue ? validateQueueName(queue) : null;
		const rows = await this.run<Record<string, string | number | null>>(statsQuery(this.s, name));
		return rows.map((row) => {
			const number = (value: unknown) =>
				value === null || value === undefined ? 0 : Number(value);
			const age = (value: unknown) =>
				value === null || value === undefined ? null : Math.max(0, Number(value));
			return {
				queue: String(row.queue),
				queued: number(row.queued),
				ready: number(row.ready),
				retrying: number(row.retrying),
				running: number(row.running),
				running_expired: number(row.running_expired),
				oldest_ready_age_seconds: age(row.oldest_ready_age_seconds),
				oldest_queued_age_seconds: age(row.oldest_queued_age_seconds),
				done: number(row.done),
				failed: number(row.failed),
				cancelled: number(row.cancelled),
				dead_letter: number(row.failed),
			};
		});
	}

	/**
	 * Replays dead-lettered jobs. A selection must name job ids, or a queue together with
	 * `confirm: true`; it is capped by `limit`, so nothing is requeued "all by accident".
	 */
	async requeue(selection: {
		jobIds?: string[] | null;
		queue?: string | null;
		errorCode?: string | null;
		errorClass?: string | null;
		failedAfter?: Date | string | null;
		failedBefore?: Date | string | null;
		includeCancelled?: boolean;
		confirm?: boolean;
		limit?: number;
		additionalAttempts?: number;
	}): Promise<
		Array<{ id: string; queue: string; status: string; attempts: number; max_attempts: number }>
	> {
		const jobIds =
			selection.jobIds && selection.jobIds.length > 0
				? selection.jobIds.map((id, index) => validateUuid(id, `jobIds[${index}]`))
				: null;
		if (!jobIds) {
			if (!selection.queue) {
				throw new ValidationError(
					'jobIds',
					'requeue needs job ids or a queue filter',
					'Pass the ids of the failed jobs to replay, or select by queue (and error code/class) with Confirm turned on',
				);
			}
			if (selection.confirm !== true) {
				throw new ValidationError(
					'confirm',
					'requeue by filter must be confirmed',
					'Turn on "Confirm Requeue by Filter" to replay every failed job the filter matches (up to the limit)',
				);
			}
		}
		const query: RequeueSelection = {
			jobIds,
			queue: selection.queue ? validateQueueName(selection.queue) : null,
			errorCode: optionalText(selection.errorCode, 'errorCode', 100),
			errorClass: optionalText(selection.errorClass, 'errorClass', 40),
			failedAfter: optionalDate(selection.failedAfter, 'failedAfter')?.toISOString() ?? null,
			failedBefore: optionalDate(selection.failedBefore, 'failedBefore')?.toISOString() ?? null,
			includeCancelled: selection.includeCancelled === true,
			limit: integerInRange(selection.limit, 'limit', 1, 10_000, 100),
			additionalAttempts: integerInRange(
				selection.additionalAttempts,
				'additionalAttempts',
				1,
				1000,
				3,
			),
		};
		return await this.run(requeueQuery(this.s, query));
	}

	async cancel(
		jobIds: string[],
		reason?: string | null,
	): Promise<Array<{ id: string; cancelled: boolean; status: string | null }>> {
		const ids = jobIds.map((id, index) => validateUuid(id, `jobIds[${index}]`));
		if (ids.length === 0) return [];
		return await this.run(
			cancelQuery(this.s, ids, optionalText(reason, 'reason', 1000) ?? 'Cancelled by an operator'),
		);
	}

	async purge(options: {
		queue?: string | null;
		olderThanMs: number;
		statuses?: string[];
		limit?: number;
		includeIdempotencyKeys?: boolean;
	}): Promise<{
		deleted: number;
		done: number;
		failed: number;
		cancelled: number;
		idempotencyKeys: number;
	}> {
		const olderThanMs = integerInRange(
			options.olderThanMs,
			'olderThanMs',
			0,
			3650 * 24 * 3600_000,
			7 * 24 * 3600_000,
		);
		const statuses =
			options.statuses && options.statuses.length > 0
				? options.statuses
				: ['done', 'failed', 'cancelled'];
		for (const status of statuses) {
			if (!['done', 'failed', 'cancelled'].includes(status)) {
				throw new ValidationError(
					'statuses',
					`"${status}" is not a terminal status`,
					'Purge only done, failed or cancelled jobs',
				);
			}
		}
		const limit = integerInRange(options.limit, 'limit', 1, 100_000, 10_000);
		const [counts] = await this.run<{
			deleted: number;
			done: number;
			failed: number;
			cancelled: number;
		}>(
			purgeJobsQuery(
				this.s,
				options.queue ? validateQueueName(options.queue) : null,
				olderThanMs,
				statuses,
				limit,
			),
		);
		let idempotencyKeys = 0;
		if (options.includeIdempotencyKeys !== false) {
			const result = await this.pool
				.query(
					purgeIdempotencyQuery(this.s, limit).text,
					purgeIdempotencyQuery(this.s, limit).values,
				)
				.catch((error: unknown) => {
					throw classifyDatabaseError(error);
				});
			idempotencyKeys = result.rowCount ?? 0;
		}
		return { ...counts, idempotencyKeys };
	}

	/** Jobs whose attempt ended with no recorded outcome: check the external system before replaying. */
	async unknownOutcomes(
		queue?: string | null,
		limit = 100,
	): Promise<Array<Record<string, unknown>>> {
		return await this.run(
			unknownOutcomeQuery(
				this.s,
				queue ? validateQueueName(queue) : null,
				integerInRange(limit, 'limit', 1, 10_000, 100),
			),
		);
	}
}

interface EnqueueReturnRow {
	ord: number;
	id: string | null;
	status: Job['status'];
	run_at: Date;
	deduplicated: boolean;
	existing_fingerprint: string | null;
}

type LeaseReturnRow = Job & {
	previous_attempt_id: string | null;
	expired: boolean;
	lease_order_seq: string;
	lease_order_priority: number;
	lease_order_run_at: Date;
	exhausted_count: string;
};

interface CompleteReturnRow {
	ord: number;
	applied: boolean;
	status: Job['status'] | null;
	attempts: number | null;
	max_attempts: number | null;
	run_at: Date | null;
	error_code: string | null;
	error_class: Job['error_class'];
	finished_at: Date | null;
	callback_event_id: string | null;
	current_status: Job['status'] | null;
	current_attempt_id: string | null;
	job_exists: boolean;
}

interface ClaimReturnRow {
	ord: number;
	claimed: boolean;
	prior_status: string | null;
	claims: number | null;
	claim_until: Date | null;
	expires_at: Date | null;
	existing_status: string | null;
	existing_fingerprint: string | null;
	existing_result: unknown;
	existing_claim_id: string | null;
	existing_claim_until: Date | null;
	existing_created_at: Date | null;
	existing_updated_at: Date | null;
	existing_claims: number | null;
}

function claimResult(row: ClaimReturnRow, input: ClaimRow): ClaimResult {
	const base = {
		claimId: null,
		replay: false,
		claims: row.existing_claims,
		claimUntil: row.existing_claim_until,
		expiresAt: null,
		storedResult: null,
		existingStatus: row.existing_status,
		firstSeenAt: row.existing_created_at,
		current: null,
	};
	if (row.claimed) {
		return {
			...base,
			route: 'new',
			claimId: input.claim_id,
			replay: row.prior_status === 'failed' || row.prior_status === 'in_progress',
			claims: row.claims,
			claimUntil: row.claim_until,
			expiresAt: row.expires_at,
			existingStatus: row.prior_status,
		};
	}
	if (row.existing_status === null) {
		// The key vanished between the two statements (purged); the caller may simply retry.
		return { ...base, route: 'in_progress' };
	}
	if ((row.existing_fingerprint ?? null) !== (input.fingerprint ?? null))
		return { ...base, route: 'conflict' };
	if (row.existing_status === 'completed')
		return { ...base, route: 'duplicate', storedResult: row.existing_result };
	return { ...base, route: 'in_progress' };
}

function attemptFromJson(row: Record<string, unknown>): Attempt {
	const date = (value: unknown) =>
		value === null || value === undefined ? null : new Date(String(value));
	return {
		attempt_id: String(row.attempt_id),
		job_id: String(row.job_id),
		attempt: Number(row.attempt),
		workflow_id: (row.workflow_id as string | null) ?? null,
		execution_id: (row.execution_id as string | null) ?? null,
		started_at: new Date(String(row.started_at)),
		lease_until: date(row.lease_until),
		finished_at: date(row.finished_at),
		outcome: (row.outcome as string | null) ?? null,
		error_code: (row.error_code as string | null) ?? null,
		error_message: (row.error_message as string | null) ?? null,
	};
}

function leaseLostReason(row: CompleteReturnRow): string {
	if (!row.job_exists) return 'not_found';
	if (row.current_status === 'running') return 'attempt_superseded';
	return `job_${row.current_status ?? 'unknown'}`;
}

function asItemError(error: unknown): DurableJobsError {
	if (error instanceof DurableJobsError) return error;
	return classifyDatabaseError(error);
}

function throwFirst<T>(results: ItemResults<T>): void {
	results.forEach((result, position) => {
		if (result instanceof DurableJobsError) {
			result.itemPosition = position;
			throw result;
		}
	});
}

function companionError(error: unknown): DurableJobsError {
	const classified = classifyDatabaseError(error);
	if (classified.code === 'database_unavailable') return classified;
	return new DurableJobsError(
		'companion_sql_failed',
		`The SQL to run in the same transaction failed, so no event was written: ${(error as Error).message ?? String(error)}`,
		{
			field: 'companionSql',
			fix: 'Fix the SQL or its parameters; the business write and the event commit together or not at all',
			httpStatus: 400,
			cause: error,
		},
	);
}
