/** The CRM stand-in (see ../standins.ts for its contract). */
import type { IncomingHttpHeaders } from 'node:http';

import {
	applyStep,
	header,
	isRecord,
	listen,
	normalise,
	parseJson,
	readBody,
	send,
	sleep,
	type FailureStep,
	type NormalStep,
} from './http';

export interface CrmRecord {
	id: string;
	idempotency_key: string | null;
	created_at: string;
	[field: string]: unknown;
}

export interface CrmJournalEntry {
	at: string;
	method: string;
	path: string;
	key: string | null;
	headers: IncomingHttpHeaders;
	body: unknown;
	/** HTTP status sent, or 'reset'/'hang' when no answer was sent on purpose. */
	status: number | 'reset' | 'hang';
	/** Id of the record created by this request (null when none was created). */
	createdRecordId: string | null;
	/** Id of the record returned by this request (new or replayed). */
	recordId: string | null;
	replayed: boolean;
	/** False while the answer is delayed or when the connection closed before it was sent. */
	responded: boolean;
	/** How long the answer was held back after the record was stored. */
	answerDelayMs: number;
}

export interface CrmStandin {
	url: string;
	recordsUrl: string;
	records: CrmRecord[];
	journal: CrmJournalEntry[];
	honourKeys: boolean;
	delayMs: number;
	down: boolean;
	script(steps: FailureStep[]): void;
	/**
	 * Answer delays for the next requests whose Idempotency-Key or body `source_document_id` is
	 * `match`, one per request in order; each replaces `delayMs` (the record is stored at once).
	 */
	answerDelays(match: string, delaysMs: number[]): void;
	/** Records created for a key (more than one means a duplicate side effect). */
	recordsForKey(key: string): CrmRecord[];
	reset(): void;
	close(): Promise<void>;
}

export async function startCrmStandin(
	opts: { honourKeys?: boolean; delayMs?: number; port?: number } = {},
): Promise<CrmStandin> {
	const state = { honourKeys: opts.honourKeys ?? true, delayMs: opts.delayMs ?? 0, down: false };
	const queue: NormalStep[] = [];
	const records: CrmRecord[] = [];
	const byKey = new Map<string, CrmRecord>();
	const journal: CrmJournalEntry[] = [];
	const answerDelays = new Map<string, number[]>();
	let seq = 0;

	const nextAnswerDelay = (key: string | null, body: Record<string, unknown>): number => {
		const documentId = typeof body.source_document_id === 'string' ? body.source_document_id : null;
		for (const match of [key, documentId]) {
			const delays = match === null ? undefined : answerDelays.get(match);
			if (delays && delays.length > 0) return delays.shift() as number;
		}
		return state.delayMs;
	};

	const control = (body: unknown): void => {
		if (!isRecord(body)) throw new Error('control body must be an object');
		if (body.reset === true) api.reset();
		if (typeof body.honourKeys === 'boolean') state.honourKeys = body.honourKeys;
		if (typeof body.delayMs === 'number') state.delayMs = body.delayMs;
		if (typeof body.down === 'boolean') state.down = body.down;
		if (Array.isArray(body.script)) api.script(body.script as FailureStep[]);
		if (
			isRecord(body.answerDelays) &&
			typeof body.answerDelays.match === 'string' &&
			Array.isArray(body.answerDelays.delaysMs)
		) {
			api.answerDelays(body.answerDelays.match, body.answerDelays.delaysMs as number[]);
		}
	};

	const server = await listen(async (req, res) => {
		const path = (req.url ?? '/').split('?')[0];
		const method = req.method ?? 'GET';
		if (method === 'POST' && path === '/__control') {
			const parsed = parseJson(await readBody(req));
			if (!parsed.ok) return send(res, 400, { error: 'invalid JSON' });
			control(parsed.value);
			return send(res, 200, { ok: true, ...state });
		}
		if (method === 'GET' && path === '/__journal') return send(res, 200, journal);
		if (method === 'GET' && path === '/records') return send(res, 200, records);
		if (method === 'GET' && path.startsWith('/records/')) {
			const rec = records.find((r) => r.id === decodeURIComponent(path.slice('/records/'.length)));
			return rec ? send(res, 200, rec) : send(res, 404, { error: 'record not found' });
		}

		const raw = await readBody(req);
		const parsed = parseJson(raw);
		const key = header(req.headers, 'idempotency-key') ?? null;
		const entry: CrmJournalEntry = {
			at: new Date().toISOString(),
			method,
			path,
			key,
			headers: req.headers,
			body: parsed.ok ? parsed.value : raw.toString('utf8'),
			status: 0,
			createdRecordId: null,
			recordId: null,
			replayed: false,
			responded: false,
			answerDelayMs: 0,
		};
		journal.push(entry);
		res.on('finish', () => {
			entry.responded = true;
		});

		if (!(method === 'POST' && path === '/records')) {
			entry.status = 404;
			return send(res, 404, { error: 'not found' });
		}
		if (state.down) {
			entry.status = 503;
			return send(res, 503, { error: 'CRM unavailable' }, { 'retry-after': '1' });
		}
		const step = queue.shift();
		if (step) {
			entry.status = step.hang ? 'hang' : step.reset ? 'reset' : step.status;
			return applyStep(res, step, { error: `injected failure ${step.status}` });
		}
		if (!parsed.ok || !isRecord(parsed.value)) {
			entry.status = 400;
			return send(res, 400, { error: 'body must be a JSON object' });
		}

		let status: number;
		let record: CrmRecord;
		const existing = key !== null && state.honourKeys ? byKey.get(key) : undefined;
		if (existing) {
			status = 200;
			record = existing;
			entry.replayed = true;
		} else {
			seq += 1;
			record = {
				...parsed.value,
				id: `rec_${String(seq).padStart(6, '0')}`,
				idempotency_key: key,
				created_at: new Date().toISOString(),
			};
			records.push(record);
			if (key !== null && !byKey.has(key)) byKey.set(key, record);
			entry.createdRecordId = record.id;
			status = 201;
		}
		entry.recordId = record.id;
		entry.status = status;
		// The record already exists; a caller that dies during this delay never learns its id.
		entry.answerDelayMs = nextAnswerDelay(key, parsed.value);
		if (entry.answerDelayMs) await sleep(entry.answerDelayMs);
		send(res, status, record, entry.replayed ? { 'idempotent-replayed': 'true' } : {});
	}, opts.port);

	const api: CrmStandin = {
		url: server.url,
		recordsUrl: `${server.url}/records`,
		records,
		journal,
		get honourKeys() {
			return state.honourKeys;
		},
		set honourKeys(v: boolean) {
			state.honourKeys = v;
		},
		get delayMs() {
			return state.delayMs;
		},
		set delayMs(v: number) {
			state.delayMs = v;
		},
		get down() {
			return state.down;
		},
		set down(v: boolean) {
			state.down = v;
		},
		script: (steps) => {
			queue.length = 0;
			queue.push(...steps.map(normalise));
		},
		answerDelays: (match, delaysMs) => {
			answerDelays.set(match, [...delaysMs]);
		},
		recordsForKey: (key) => records.filter((r) => r.idempotency_key === key),
		reset: () => {
			queue.length = 0;
			answerDelays.clear();
			records.length = 0;
			byKey.clear();
			journal.length = 0;
			seq = 0;
			state.down = false;
		},
		close: server.close,
	};
	return api;
}
