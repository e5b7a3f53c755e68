import { v7 as uuidv7 } from 'uuid';

import type { StoreContext } from './context';
import { DEFAULT_OUTBOX_QUEUE, MAX_ATTEMPTS } from './defaults';
import {
	DurableJobsError,
	EventIdReusedError,
	classifyDatabaseError,
	isDeadlock,
	runAgainAfterDeadlock,
	ValidationError,
} from './errors';
import type { Transaction } from './executor';
import { validateQueueName } from './identifiers';
import {
	fillResults,
	runWithReread,
	validateItems,
	type BatchOptions,
	type ItemResults,
} from './items';
import { companionQuery, findEventsQuery, outboxInsertQuery, type OutboxRow } from './sql/outbox';
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
 * Writes events to the outbox, in input order. Companion SQL (the business write) runs in the
 * same transaction, once per item with that item's parameters, followed by that item's event;
 * the events of consecutive items without companion SQL are inserted in one statement. An event id already in
 * the outbox is accepted once: with the same payload the item answers `deduplicated: true` and
 * its companion SQL is undone (it committed with that event before); with another payload the
 * item fails with `event_id_reused` and nothing of it is written. With `allOrNothing`, any
 * failure rolls everything back and is thrown; otherwise a failing item is undone by a
 * savepoint and only that item fails.
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
				companions.set(ord, {
					sql: validateCompanionSql(item.companionSql),
					params: item.companionParams ?? [],
				});
			}
			return row;
		},
		options,
	);
	if (rows.length === 0) return results;
	const allOrNothing = options.allOrNothing === true;

	// Writers of the same event ids in crossed orders can deadlock; the aborted one wrote nothing.
	await runAgainAfterDeadlock(async () => {
		await writeEvents();
	});
	return results;

	async function writeEvents(): Promise<void> {
		await ctx.db.transaction(async (tx) => {
			// In input order, so that of two items with one event id the earlier one is stored:
			// the events without companion SQL before an item with it go in one INSERT first.
			let plain: OutboxRow[] = [];
			const insertPlain = async () => {
				if (plain.length === 0) return;
				const byOrd = new Map(plain.map((row) => [row.ord, row]));
				const inserted = await insertEvents(ctx, tx, plain);
				plain = [];
				fillResults(results, inserted, (returned) => {
					const outcome = eventOutcome(byOrd.get(returned.ord)!, returned, null);
					if (outcome instanceof DurableJobsError && allOrNothing) {
						outcome.itemPosition = returned.ord;
						throw outcome;
					}
					return outcome;
				});
			};
			for (const row of rows) {
				const companion = companions.get(row.ord);
				if (!companion) {
					plain.push(row);
					continue;
				}
				await insertPlain();
				results[row.ord] = await writeWithCompanion(ctx, tx, row, companion, allOrNothing);
			}
			await insertPlain();
		});
	}
}

type InsertedEvent = {
	ord: number;
	/** Null only when the stored event could be neither inserted nor found. */
	id: string | null;
	status: Job['status'];
	deduplicated: boolean;
	existing_fingerprint: string | null;
	existing_event_type: string | null;
	existing_destination: string | null;
};

/**
 * Inserts the events; an event id already stored answers with the stored event. The INSERT's
 * own lookup reads its statement's snapshot, which misses an event committed while the INSERT
 * waited for it (a concurrent writer) or inserted by the same statement (one id twice in one
 * call): those are read again by a statement of their own, which sees them.
 */
async function insertEvents(
	ctx: StoreContext,
	tx: Transaction,
	rows: OutboxRow[],
): Promise<InsertedEvent[]> {
	return await runWithReread<OutboxRow, InsertedEvent>(
		tx,
		{
			key: `outbox:${ctx.s}`,
			rows,
			build: (batch) => outboxInsertQuery(ctx.s, batch),
			charsOf: (row) => (row as SizedOutboxRow)[PAYLOAD_CHARS] ?? 0,
		},
		{
			unresolved: (returned) => returned.id === null,
			query: (missing) =>
				findEventsQuery(
					ctx.s,
					missing.map(({ row }) => ({ ord: row.ord, queue: row.queue, event_id: row.event_id })),
				),
			merge: (returned, found) => Object.assign(returned, found, { deduplicated: true }),
		},
	);
}

/** An inserted or already stored event as the item's result; another payload under its id fails. */
function eventOutcome(
	row: OutboxRow,
	returned: InsertedEvent,
	companion: CompanionResult | null,
): OutboxResult | DurableJobsError {
	if (returned.id === null)
		return new DurableJobsError(
			'outbox_unresolved',
			'The event could not be stored or found; retry the request',
			{ httpStatus: 503 },
		);
	if (returned.deduplicated && !sameEvent(returned, row))
		return new EventIdReusedError(row.event_id, returned.id);
	return {
		jobId: returned.id,
		eventId: row.event_id,
		queue: row.queue,
		status: returned.status,
		deduplicated: returned.deduplicated,
		companionRowCount: returned.deduplicated ? null : (companion?.rowCount ?? null),
		companionRows: returned.deduplicated ? [] : (companion?.rows ?? []),
	};
}

/** Thrown inside an item's savepoint so that its companion SQL is undone; carries the answer. */
class UndoItem {
	constructor(readonly outcome: OutboxResult | DurableJobsError) {}
}

/**
 * One item with companion SQL, in a savepoint: its SQL, then its event. When the event id is
 * already stored (committed before, or by a concurrent writer this insert waited for), the
 * savepoint undoes the item's SQL: the business write committed with that event already.
 */
async function writeWithCompanion(
	ctx: StoreContext,
	tx: Transaction,
	row: OutboxRow,
	companion: Companion,
	allOrNothing: boolean,
): Promise<OutboxResult | DurableJobsError> {
	let outcome: OutboxResult | DurableJobsError;
	try {
		outcome = await tx.savepoint(async () => {
			let companionResult: CompanionResult;
			try {
				const result = await tx.result(companionQuery(companion.sql, companion.params));
				companionResult = { rowCount: result.rowCount, rows: result.rows };
			} catch (error) {
				throw companionError(error);
			}
			const [returned] = await insertEvents(ctx, tx, [{ ...row, ord: 0 }]);
			const written = eventOutcome(row, returned, companionResult);
			if (returned.deduplicated) throw new UndoItem(written);
			return written;
		});
	} catch (error) {
		// A deadlock aborts the whole write, not this item: the write runs again (writeOutbox).
		if (isDeadlock(error)) throw error;
		if (error instanceof UndoItem) outcome = error.outcome;
		else if (error instanceof DurableJobsError) outcome = error;
		else throw error;
	}
	if (outcome instanceof DurableJobsError && allOrNothing) {
		outcome.itemPosition = row.ord;
		throw outcome;
	}
	return outcome;
}

/**
 * The serialised length of a row's payload, measured when its size was checked. A symbol key
 * travels with copies of the row (`{ ...row }`) and is left out of the statement's JSON.
 */
const PAYLOAD_CHARS = Symbol('payloadChars');
type SizedOutboxRow = OutboxRow & { [PAYLOAD_CHARS]?: number };

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
	const payloadChars = serializePayload(item.payload, 'payload', ctx.payloadLimit).length;
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
	const row: SizedOutboxRow = {
		[PAYLOAD_CHARS]: payloadChars,
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
	return row;
}

/**
 * Whether the stored event is the event of `row`: the same payload, type and destination. Two
 * events of other types or for other destinations that share an id and a payload (two Outbox
 * Write nodes deriving one id from one body) are not one event sent twice.
 */
function sameEvent(returned: InsertedEvent, row: OutboxRow): boolean {
	const envelope = row.envelope as { event_type: string; destination: string | null };
	return (
		returned.existing_fingerprint === row.fingerprint &&
		returned.existing_event_type === envelope.event_type &&
		(returned.existing_destination ?? null) === envelope.destination
	);
}

/**
 * Statements that would end or split the transaction the business write and its event share
 * (after what PostgreSQL skips before a statement, see statementStart). A COMMIT there would
 * commit the write without its event.
 */
const TRANSACTION_CONTROL =
	/^(BEGIN|START\s+TRANSACTION|COMMIT|END|ROLLBACK|ABORT|SAVEPOINT|RELEASE|PREPARE\s+TRANSACTION)\b/i;

/**
 * The SQL after what PostgreSQL skips before a statement: white space, empty statements (`;`),
 * `--` comments (to a line feed or a carriage return) and nested block comments.
 */
function statementStart(sql: string): string {
	let at = 0;
	for (;;) {
		while (at < sql.length && /[\s;]/.test(sql[at])) at++;
		if (sql.startsWith('--', at)) {
			while (at < sql.length && sql[at] !== '\n' && sql[at] !== '\r') at++;
		} else if (sql.startsWith('/*', at)) {
			let depth = 0;
			while (at < sql.length) {
				if (sql.startsWith('/*', at)) {
					depth++;
					at += 2;
				} else if (sql.startsWith('*/', at)) {
					depth--;
					at += 2;
					if (depth === 0) break;
				} else at++;
			}
		} else return sql.slice(at);
	}
}

function validateCompanionSql(sql: string): string {
	const control = TRANSACTION_CONTROL.exec(statementStart(sql));
	if (control) {
		throw new ValidationError(
			'companionSql',
			`${control[1].toUpperCase()} controls the transaction, which the node holds`,
			'Write only the business statement (one INSERT, UPDATE, DELETE or SELECT): the node runs it and the event in one transaction and commits both',
		);
	}
	return sql;
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
			fix: /multiple commands/.test((original as Error).message ?? '')
				? 'Write one statement (a data-modifying WITH can do several writes in one); the business write and the event commit together or not at all'
				: 'Fix the SQL or its parameters; the business write and the event commit together or not at all',
			httpStatus: 400,
			cause: original,
		},
	);
}
