/**
 * Stand-in HTTP services for the end-to-end tests and the demo: an AI extraction endpoint, a CRM
 * that journals every request with its Idempotency-Key, and a callback receiver. Plain node:http,
 * bound to 127.0.0.1 on a free port. Each can be driven from TypeScript and over HTTP
 * (`POST /__control`), so a workflow under test and the test itself see the same state.
 *
 * AI — `startAiStandin({ latencyMs })`
 *   POST /extract  {document, document_id?|source_document_id?|id?|key?, ...}
 *     → 200 {fields: {name, email, amount}, model: 'stand-in', source_document_id, call}
 *   Failure injection per key (the document id, else the document text), consumed in order:
 *     ai.script('doc-1', [500, 500])            two 500s, then success
 *     ai.script('doc-2', [{ status: 429, retryAfter: 1 }])
 *     ai.script('doc-3', [{ hang: true }])      never answers (client timeout path)
 *     ai.always('doc-4', 400)                   every call answers 400
 *     ai.script('*', [503])                     applies to any key without its own script
 *   Also as start options: startAiStandin({ scripts: { 'doc-1': [500, 500] }, always: { 'doc-4': 400 } }).
 *   Over HTTP: POST /__control {latencyMs?, script?: {key, steps}, scripts?: {key: steps},
 *   always?: {key, step}, reset?: true}
 *   Observation: ai.callCount(key), ai.calls (every request), GET /__calls.
 *
 * CRM — `startCrmStandin({ honourKeys: true, delayMs: 0 })`
 *   POST /records (header Idempotency-Key, JSON body) → 201 {id, ...body}; with honourKeys a
 *   repeated key answers 200 with the first record (header Idempotent-Replayed: true) and creates
 *   nothing. `delayMs` delays the answer AFTER the record is stored ("request sent, response not
 *   received" when the caller dies meanwhile). Per call, consumed in order:
 *     crm.answerDelays('doc-1', [27_000, 0])   the first request for doc-1 is answered after 27 s
 *                                               (its record stored at once), the second at once
 *   (matched by Idempotency-Key, else by the body's source_document_id; replaces `delayMs` for
 *   those requests). `down` answers 503 to everything; `script` queues statuses for the next
 *   requests. GET /records, GET /records/:id.
 *   Journal of EVERY request: crm.journal, GET /__journal. Control: POST /__control
 *   {honourKeys?, delayMs?, down?, script?: steps, answerDelays?: {match, delaysMs}, reset?: true}.
 *
 * Callbacks — `startCallbackReceiver()`
 *   Any POST/PUT on any path is recorded with headers and the raw body (needed to verify Standard
 *   Webhooks signatures); answers `status` (default 200) or the next scripted status.
 *   receiver.received, receiver.waitFor(pred), GET /__received, POST /__control {status?, script?, reset?}.
 *
 * `startStandins()` starts all three; `waitFor(fn)` polls any condition.
 */
import { createHash } from 'node:crypto';
import {
	createServer,
	type IncomingHttpHeaders,
	type IncomingMessage,
	type Server,
	type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

// ---------------------------------------------------------------------------------------------
// shared plumbing

export type FailureStep =
	| number
	| {
			status?: number;
			body?: unknown;
			headers?: Record<string, string>;
			/** Extra delay before answering this call. */
			delayMs?: number;
			/** Seconds for a Retry-After header (429/503). */
			retryAfter?: number;
			/** Never answer; the socket stays open until the client gives up or the server closes. */
			hang?: boolean;
			/** Destroy the connection without an HTTP answer. */
			reset?: boolean;
	  };

interface NormalStep {
	status: number;
	body?: unknown;
	headers: Record<string, string>;
	delayMs: number;
	hang: boolean;
	reset: boolean;
}

function normalise(step: FailureStep): NormalStep {
	if (typeof step === 'number')
		return { status: step, headers: {}, delayMs: 0, hang: false, reset: false };
	const headers = { ...(step.headers ?? {}) };
	if (step.retryAfter !== undefined) headers['retry-after'] = String(step.retryAfter);
	return {
		status: step.status ?? 500,
		body: step.body,
		headers,
		delayMs: step.delayMs ?? 0,
		hang: step.hang ?? false,
		reset: step.reset ?? false,
	};
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function waitFor<T>(
	check: () => T | undefined | null | false | Promise<T | undefined | null | false>,
	opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<T> {
	const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
	for (;;) {
		const value = await check();
		if (value) return value;
		if (Date.now() > deadline) throw new Error(`timed out waiting for ${opts.what ?? 'condition'}`);
		await sleep(opts.intervalMs ?? 100);
	}
}

async function readBody(req: IncomingMessage, limit = 10 * 1024 * 1024): Promise<Buffer> {
	const chunks: Buffer[] = [];
	let size = 0;
	for await (const chunk of req) {
		const buf = chunk as Buffer;
		size += buf.length;
		if (size > limit) throw new Error('body too large');
		chunks.push(buf);
	}
	return Buffer.concat(chunks);
}

function parseJson(raw: Buffer): { ok: true; value: unknown } | { ok: false } {
	if (raw.length === 0) return { ok: true, value: undefined };
	try {
		return { ok: true, value: JSON.parse(raw.toString('utf8')) as unknown };
	} catch {
		return { ok: false };
	}
}

function isRecord(v: unknown): v is Record<string, unknown> {
	return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function send(
	res: ServerResponse,
	status: number,
	body: unknown,
	headers: Record<string, string> = {},
): void {
	if (res.headersSent || res.destroyed) return;
	const text = body === undefined ? '' : JSON.stringify(body);
	res.writeHead(status, {
		...(body === undefined ? {} : { 'content-type': 'application/json' }),
		'content-length': String(Buffer.byteLength(text)),
		...headers,
	});
	res.end(text);
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
	const v = headers[name.toLowerCase()];
	return Array.isArray(v) ? v[0] : v;
}

interface Listening {
	url: string;
	port: number;
	close(): Promise<void>;
}

/** Listens on 127.0.0.1:<port or free>; `close()` also drops kept-alive and hanging sockets. */
async function listen(
	handler: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
	port = 0,
): Promise<Listening> {
	const sockets = new Set<Socket>();
	const server: Server = createServer((req, res) => {
		handler(req, res).catch((err: unknown) => {
			send(res, 500, { error: err instanceof Error ? err.message : String(err) });
		});
	});
	server.on('connection', (s) => {
		sockets.add(s);
		s.on('close', () => sockets.delete(s));
	});
	await new Promise<void>((resolve, reject) => {
		server.once('error', reject);
		server.listen(port, '127.0.0.1', () => resolve());
	});
	const actual = (server.address() as AddressInfo).port;
	return {
		url: `http://127.0.0.1:${actual}`,
		port: actual,
		close: async () => {
			for (const s of sockets) s.destroy();
			await new Promise<void>((resolve) => server.close(() => resolve()));
		},
	};
}

/** Answers with a scripted failure (or deliberately does not answer). */
async function applyStep(
	res: ServerResponse,
	step: NormalStep,
	fallbackBody: unknown,
): Promise<void> {
	if (step.delayMs) await sleep(step.delayMs);
	if (step.reset) {
		res.socket?.destroy();
		return;
	}
	if (step.hang) return;
	send(res, step.status, step.body ?? fallbackBody, step.headers);
}

// ---------------------------------------------------------------------------------------------
// AI extraction stand-in

export interface AiCall {
	at: string;
	key: string;
	/** 1-based count of calls for this key, including this one. */
	n: number;
	body: unknown;
	status: number | 'hang' | 'reset';
	headers: IncomingHttpHeaders;
}

export interface ExtractedFields {
	name: string | null;
	email: string | null;
	amount: number | null;
}

export interface AiStandin {
	url: string;
	/** Full URL of the extraction endpoint. */
	extractUrl: string;
	calls: AiCall[];
	callCount(key?: string): number;
	latencyMs: number;
	script(key: string, steps: FailureStep[]): void;
	always(key: string, step: FailureStep): void;
	reset(): void;
	close(): Promise<void>;
}

const EMAIL_RE = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/;
const AMOUNT_RE = /(?:amount|total|sum|€|\$|eur|usd)\s*[:=]?\s*(-?\d+(?:[.,]\d+)?)/i;
const NAME_RE = /(?:name|from|customer)\s*[:=]\s*([^\n,;]+)/i;

/** Deterministic "extraction" so tests can assert on what the worker stored. */
export function extractFields(document: unknown): ExtractedFields {
	if (isRecord(document) && typeof document.text === 'string') return extractFields(document.text);
	if (isRecord(document)) {
		const amount = document.amount;
		return {
			name: typeof document.name === 'string' ? document.name : null,
			email: typeof document.email === 'string' ? document.email : null,
			amount:
				typeof amount === 'number'
					? amount
					: typeof amount === 'string' && amount.trim() !== ''
						? Number(amount)
						: null,
		};
	}
	const text = typeof document === 'string' ? document : JSON.stringify(document ?? '');
	const amount = AMOUNT_RE.exec(text)?.[1];
	return {
		name: NAME_RE.exec(text)?.[1]?.trim() ?? null,
		email: EMAIL_RE.exec(text)?.[0] ?? null,
		amount: amount === undefined ? null : Number(amount.replace(',', '.')),
	};
}

function aiKey(body: unknown): string {
	if (isRecord(body)) {
		for (const k of ['document_id', 'source_document_id', 'documentId', 'id', 'key']) {
			const v = body[k];
			if (typeof v === 'string' || typeof v === 'number') return String(v);
		}
		const doc = body.document;
		if (typeof doc === 'string') return doc;
		if (isRecord(doc) && (typeof doc.id === 'string' || typeof doc.id === 'number'))
			return String(doc.id);
		return (
			'sha256:' +
			createHash('sha256')
				.update(JSON.stringify(doc ?? body))
				.digest('hex')
				.slice(0, 16)
		);
	}
	return (
		'sha256:' +
		createHash('sha256')
			.update(JSON.stringify(body ?? null))
			.digest('hex')
			.slice(0, 16)
	);
}

export interface AiStandinOptions {
	latencyMs?: number;
	port?: number;
	/** Initial failure scripts per key, e.g. `{ 'doc-1': [500, 500] }`. */
	scripts?: Record<string, FailureStep[]>;
	/** Keys that always fail, e.g. `{ 'doc-bad': 400 }`. */
	always?: Record<string, FailureStep>;
}

export async function startAiStandin(opts: AiStandinOptions = {}): Promise<AiStandin> {
	const scripts = new Map<string, NormalStep[]>();
	const permanent = new Map<string, NormalStep>();
	const counts = new Map<string, number>();
	const state = { latencyMs: opts.latencyMs ?? 0 };
	const calls: AiCall[] = [];

	const nextStep = (key: string): NormalStep | undefined => {
		const perm = permanent.get(key) ?? permanent.get('*');
		if (perm) return perm;
		const queue = scripts.get(key) ?? scripts.get('*');
		return queue?.shift();
	};

	const control = (body: unknown): void => {
		if (!isRecord(body)) throw new Error('control body must be an object');
		if (body.reset === true) api.reset();
		if (typeof body.latencyMs === 'number') state.latencyMs = body.latencyMs;
		if (
			isRecord(body.script) &&
			typeof body.script.key === 'string' &&
			Array.isArray(body.script.steps)
		) {
			api.script(body.script.key, body.script.steps as FailureStep[]);
		}
		if (isRecord(body.always) && typeof body.always.key === 'string') {
			api.always(body.always.key, body.always.step as FailureStep);
		}
		if (isRecord(body.scripts)) {
			for (const [key, steps] of Object.entries(body.scripts))
				if (Array.isArray(steps)) api.script(key, steps as FailureStep[]);
		}
	};

	const server = await listen(async (req, res) => {
		const path = (req.url ?? '/').split('?')[0];
		if (req.method === 'POST' && path === '/__control') {
			const parsed = parseJson(await readBody(req));
			if (!parsed.ok) return send(res, 400, { error: 'invalid JSON' });
			control(parsed.value);
			return send(res, 200, { ok: true, latencyMs: state.latencyMs });
		}
		if (req.method === 'GET' && path === '/__calls') {
			return send(res, 200, { counts: Object.fromEntries(counts), calls });
		}
		if (req.method === 'POST' && path === '/extract') {
			const raw = await readBody(req);
			const parsed = parseJson(raw);
			const body = parsed.ok ? parsed.value : raw.toString('utf8');
			const key = aiKey(body);
			const n = (counts.get(key) ?? 0) + 1;
			counts.set(key, n);
			const call: AiCall = {
				at: new Date().toISOString(),
				key,
				n,
				body,
				status: 200,
				headers: req.headers,
			};
			calls.push(call);
			if (state.latencyMs) await sleep(state.latencyMs);
			const step = nextStep(key);
			if (step) {
				call.status = step.hang ? 'hang' : step.reset ? 'reset' : step.status;
				return applyStep(res, step, {
					error: { code: step.status, message: `injected failure ${step.status}` },
				});
			}
			if (!parsed.ok || !isRecord(body) || body.document === undefined || body.document === null) {
				call.status = 400;
				return send(res, 400, {
					error: { code: 400, message: 'body must be JSON with a "document" field' },
				});
			}
			return send(res, 200, {
				fields: extractFields(body.document),
				model: 'stand-in',
				source_document_id: key,
				call: n,
			});
		}
		send(res, 404, { error: 'not found' });
	}, opts.port);

	const api: AiStandin = {
		url: server.url,
		extractUrl: `${server.url}/extract`,
		calls,
		callCount: (key) => (key === undefined ? calls.length : (counts.get(key) ?? 0)),
		get latencyMs() {
			return state.latencyMs;
		},
		set latencyMs(ms: number) {
			state.latencyMs = ms;
		},
		script: (key, steps) => {
			permanent.delete(key);
			scripts.set(key, steps.map(normalise));
		},
		always: (key, step) => {
			scripts.delete(key);
			permanent.set(key, normalise(step));
		},
		reset: () => {
			scripts.clear();
			permanent.clear();
			counts.clear();
			calls.length = 0;
		},
		close: server.close,
	};
	for (const [key, steps] of Object.entries(opts.scripts ?? {})) api.script(key, steps);
	for (const [key, step] of Object.entries(opts.always ?? {})) api.always(key, step);
	return api;
}

// ---------------------------------------------------------------------------------------------
// CRM stand-in

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

// ---------------------------------------------------------------------------------------------
// callback receiver

export interface ReceivedCallback {
	at: string;
	method: string;
	path: string;
	/** Path plus query string, as sent. */
	url: string;
	headers: IncomingHttpHeaders;
	/** Exact bytes as received (decode with utf8 for signature checks). */
	rawBody: Buffer;
	/** `rawBody` as UTF-8 text. */
	body: string;
	/** Parsed JSON, or undefined when the body is not JSON. */
	json: unknown;
	status: number | 'reset' | 'hang';
}

export interface CallbackReceiver {
	url: string;
	received: ReceivedCallback[];
	/** Status answered when nothing is scripted (default 200). */
	status: number;
	script(steps: FailureStep[]): void;
	waitFor(
		pred?: (cb: ReceivedCallback) => boolean,
		opts?: { timeoutMs?: number; count?: number },
	): Promise<ReceivedCallback[]>;
	reset(): void;
	close(): Promise<void>;
}

export async function startCallbackReceiver(
	opts: { status?: number; port?: number } = {},
): Promise<CallbackReceiver> {
	const state = { status: opts.status ?? 200 };
	const queue: NormalStep[] = [];
	const received: ReceivedCallback[] = [];

	const server = await listen(async (req, res) => {
		const url = req.url ?? '/';
		const path = url.split('?')[0];
		const method = req.method ?? 'GET';
		if (path === '/__received' && method === 'GET') {
			return send(
				res,
				200,
				received.map(({ rawBody, ...rest }) => ({
					...rest,
					rawBodyBase64: rawBody.toString('base64'),
				})),
			);
		}
		const rawBody = await readBody(req);
		if (path === '/__control' && method === 'POST') {
			const parsed = parseJson(rawBody);
			if (!parsed.ok || !isRecord(parsed.value))
				return send(res, 400, { error: 'invalid JSON object' });
			const body = parsed.value;
			if (body.reset === true) api.reset();
			if (typeof body.status === 'number') state.status = body.status;
			if (Array.isArray(body.script)) api.script(body.script as FailureStep[]);
			return send(res, 200, { ok: true, status: state.status });
		}
		const parsed = parseJson(rawBody);
		const entry: ReceivedCallback = {
			at: new Date().toISOString(),
			method,
			path,
			url,
			headers: req.headers,
			rawBody,
			body: rawBody.toString('utf8'),
			json: parsed.ok ? parsed.value : undefined,
			status: state.status,
		};
		received.push(entry);
		const step = queue.shift();
		if (step) {
			entry.status = step.hang ? 'hang' : step.reset ? 'reset' : step.status;
			return applyStep(res, step, { error: `injected failure ${step.status}` });
		}
		send(res, state.status, { received: true });
	}, opts.port);

	const api: CallbackReceiver = {
		url: server.url,
		received,
		get status() {
			return state.status;
		},
		set status(v: number) {
			state.status = v;
		},
		script: (steps) => {
			queue.length = 0;
			queue.push(...steps.map(normalise));
		},
		waitFor: async (pred = () => true, o = {}) => {
			const count = o.count ?? 1;
			return await waitFor(
				() => {
					const hits = received.filter(pred);
					return hits.length >= count ? hits : undefined;
				},
				{ timeoutMs: o.timeoutMs ?? 30_000, what: `${count} callback(s)` },
			);
		},
		reset: () => {
			queue.length = 0;
			received.length = 0;
		},
		close: server.close,
	};
	return api;
}

// ---------------------------------------------------------------------------------------------

export interface Standins {
	ai: AiStandin;
	crm: CrmStandin;
	callbacks: CallbackReceiver;
	close(): Promise<void>;
}

export async function startStandins(
	opts: {
		ai?: AiStandinOptions;
		crm?: Parameters<typeof startCrmStandin>[0];
		callbacks?: Parameters<typeof startCallbackReceiver>[0];
	} = {},
): Promise<Standins> {
	const ai = await startAiStandin(opts.ai);
	const crm = await startCrmStandin(opts.crm);
	const callbacks = await startCallbackReceiver(opts.callbacks);
	return {
		ai,
		crm,
		callbacks,
		close: async () => {
			await Promise.all([ai.close(), crm.close(), callbacks.close()]);
		},
	};
}
