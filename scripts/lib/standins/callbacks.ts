/** The callback receiver stand-in (see ../standins.ts for its contract). */
import type { IncomingHttpHeaders } from 'node:http';

import {
	applyStep,
	waitFor,
	isRecord,
	listen,
	normalise,
	parseJson,
	readBody,
	send,
	type FailureStep,
	type NormalStep,
} from './http';

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
