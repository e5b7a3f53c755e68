import { v7 as uuidv7 } from 'uuid';

import type { StoreContext } from './context';
import { DEFAULT_OUTBOX_QUEUE, MAX_ATTEMPTS } from './defaults';
import { DurableJobsError, classifyDatabaseError } from './errors';
import type { Transaction } from './executor';
import { validateQueueName } from './identifiers';
import { fillResults, validateItems, type BatchOptions, type ItemResults } from './items';
import { companionQuery, outboxInsertQuery, type OutboxRow } from './sql/outbox';
import type { Job, OutboxEventInput, OutboxResult } from './types';
import {
	fingerprint,
	inRange,
	optionalDate,
	optionalKey,
	optionalText,
	serializePayload,
	validateKey,
} from './validate';

export interface OutboxOptions extends BatchOptions {
	/** Queue of items that name none. */
	defaultQueue?: string;
}

interface Companion {
	sql: string;
	params: unknown[];
}

interface CompanionResult {
	rowCount: number | null;
	rows: unknown[];
}

/**
 * Writes events to the outbox. Companion SQL (the business write) runs in the same
 * transaction, once per item with that item's parameters; the events are then inserted in
 * one statement. With `allOrNothing`, any failure rolls everything back and is thrown;
 * otherwise a failing item's companion SQL is undone by a savepoint and only that item fails.
 */
export async function writeOutbox(
	ctx: StoreContext,
	items: OutboxEventInput[],
	options: OutboxOptions = {},
): Promise<ItemResults<OutboxResult>> {
	const companions = new Map<number, Companion>();
	const { rows, results } = validateItems<OutboxEventInput, OutboxRow, OutboxResult>(
		items,
		(item, ord) => {
			const row = outboxRow(ctx, item, ord, options.defaultQueue);
			if (
				item.companionSql !== undefined &&
				item.companionSql !== null &&
				item.companionSql.trim() !== ''
			) {
				companions.set(ord, { sql: item.companionSql, params: item.companionParams ?? [] });
			}
			return row;
		},
		options,
	);
	if (rows.length === 0) return results;

	await ctx.db.transaction(async (tx) => {
		const companionResults = new Map<number, CompanionResult>();
		const accepted: OutboxRow[] = [];
		for (const row of rows) {
			const companion = companions.get(row.ord);
			if (!companion) {
				accepted.push(row);
				continue;
			}
			const outcome = await runCompanion(tx, companion, row.ord, options.allOrNothing === true);
			if (outcome instanceof DurableJobsError) {
				results[row.ord] = outcome;
				continue;
			}
			companionResults.set(row.ord, outcome);
			accepted.push(row);
		}
		if (accepted.length === 0) return;
		const returned = await tx.runRows<
			{ ord: number; id: string; status: Job['status']; deduplicated: boolean },
			OutboxRow
		>({
			key: `outbox:${ctx.s}`,
			rows: accepted,
			build: (batch) => outboxInsertQuery(ctx.s, batch),
		});
		const byOrd = new Map(accepted.map((row) => [row.ord, row]));
		fillResults(results, returned, (row) => {
			const input = byOrd.get(row.ord)!;
			const companion = companionResults.get(row.ord);
			return {
				jobId: row.id,
				eventId: input.event_id,
				queue: input.queue,
				status: row.status,
				deduplicated: row.deduplicated,
				companionRowCount: companion?.rowCount ?? null,
				companionRows: companion?.rows ?? [],
			};
		});
	});
	return results;
}

/**
 * One item's companion SQL. All or nothing: a failure is thrown with the item's position and
 * rolls the whole transaction back. Otherwise it runs in a savepoint, so a failure undoes only
 * this item's SQL and is returned as this item's error.
 */
async function runCompanion(
	tx: Transaction,
	companion: Companion,
	ord: number,
	allOrNothing: boolean,
): Promise<CompanionResult | DurableJobsError> {
	const run = async (): Promise<CompanionResult> => {
		try {
			const result = await tx.result(companionQuery(companion.sql, companion.params));
			return { rowCount: result.rowCount, rows: result.rows };
		} catch (error) {
			throw companionError(error);
		}
	};
	if (allOrNothing) {
		return await run().catch((error: DurableJobsError) => {
			error.itemPosition = ord;
			throw error;
		});
	}
	return await tx.savepoint(run).catch((error: unknown) => {
		if (error instanceof DurableJobsError) return error;
		throw error;
	});
}

function outboxRow(
	ctx: StoreContext,
	item: OutboxEventInput,
	ord: number,
	defaultQueue: string | undefined,
): OutboxRow {
	const eventId = validateKey(item.eventId, 'eventId');
	const eventType = validateKey(item.eventType, 'eventType');
	const queue = validateQueueName(item.queue ?? defaultQueue ?? DEFAULT_OUTBOX_QUEUE, 'queue');
	const occurredAt = optionalDate(item.occurredAt, 'occurredAt') ?? new Date();
	const runAt = optionalDate(item.runAt, 'runAt');
	serializePayload(item.payload, 'payload', ctx.maxPayloadBytes);
	const envelope = {
		event_id: eventId,
		event_type: eventType,
		event_version:
			item.eventVersion === undefined || item.eventVersion === null || item.eventVersion === ''
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
	return {
		ord,
		id: uuidv7(),
		queue,
		event_id: eventId,
		envelope,
		fingerprint: fingerprint(envelope.payload),
		ordering_key: envelope.ordering_key,
		correlation_id: envelope.correlation_id,
		max_attempts: inRange(item.maxAttempts, 'maxAttempts', {
			...MAX_ATTEMPTS,
			default: MAX_ATTEMPTS.outboxDefault,
		}),
		run_at: runAt ? runAt.toISOString() : null,
	};
}

/** The companion SQL's own error, with its text: the database is fine, the user's SQL is not. */
function companionError(error: unknown): DurableJobsError {
	const classified = classifyDatabaseError(error);
	if (classified.code === 'database_unavailable') return classified;
	const original = classified.cause ?? error;
	return new DurableJobsError(
		'companion_sql_failed',
		`The SQL to run in the same transaction failed, so no event was written: ${(original as Error).message ?? String(original)}`,
		{
			field: 'companionSql',
			fix: 'Fix the SQL or its parameters; the business write and the event commit together or not at all',
			httpStatus: 400,
			cause: original,
		},
	);
}
