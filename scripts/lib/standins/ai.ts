/** The AI extraction stand-in (see ../standins.ts for its contract). */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

import {
	applyStep,
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
