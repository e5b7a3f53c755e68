/** Shared plumbing of the stand-in services: scripted failures, JSON bodies, a listener. */
import {
	createServer,
	type IncomingHttpHeaders,
	type IncomingMessage,
	type Server,
	type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type FailureStep =
	| number
	| {
			status?: number;
			body?: unknown;
			/** The body exactly as sent (e.g. JSON cut short), instead of `body` as JSON. */
			raw?: string;
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

export interface NormalStep {
	status: number;
	body?: unknown;
	raw?: string;
	headers: Record<string, string>;
	delayMs: number;
	hang: boolean;
	reset: boolean;
}

export function normalise(step: FailureStep): NormalStep {
	if (typeof step === 'number')
		return { status: step, headers: {}, delayMs: 0, hang: false, reset: false };
	const headers = { ...(step.headers ?? {}) };
	if (step.retryAfter !== undefined) headers['retry-after'] = String(step.retryAfter);
	return {
		status: step.status ?? 500,
		body: step.body,
		raw: step.raw,
		headers,
		delayMs: step.delayMs ?? 0,
		hang: step.hang ?? false,
		reset: step.reset ?? false,
	};
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

export async function readBody(req: IncomingMessage, limit = 10 * 1024 * 1024): Promise<Buffer> {
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

export function parseJson(raw: Buffer): { ok: true; value: unknown } | { ok: false } {
	if (raw.length === 0) return { ok: true, value: undefined };
	try {
		return { ok: true, value: JSON.parse(raw.toString('utf8')) as unknown };
	} catch {
		return { ok: false };
	}
}

export function isRecord(v: unknown): v is Record<string, unknown> {
	return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function send(
	res: ServerResponse,
	status: number,
	body: unknown,
	headers: Record<string, string> = {},
): void {
	sendText(
		res,
		status,
		body === undefined ? '' : JSON.stringify(body),
		body === undefined ? headers : { 'content-type': 'application/json', ...headers },
	);
}

/** Answers with `text` exactly as given, its length and `headers`; nothing once answered. */
function sendText(
	res: ServerResponse,
	status: number,
	text: string,
	headers: Record<string, string>,
): void {
	if (res.headersSent || res.destroyed) return;
	res.writeHead(status, { 'content-length': String(Buffer.byteLength(text)), ...headers });
	res.end(text);
}

export function header(headers: IncomingHttpHeaders, name: string): string | undefined {
	const v = headers[name.toLowerCase()];
	return Array.isArray(v) ? v[0] : v;
}

export interface Listening {
	url: string;
	port: number;
	close(): Promise<void>;
}

/** Listens on 127.0.0.1:<port or free>; `close()` also drops kept-alive and hanging sockets. */
export async function listen(
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
export async function applyStep(
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
	if (step.raw !== undefined) sendText(res, step.status, step.raw, step.headers);
	else send(res, step.status, step.body ?? fallbackBody, step.headers);
}
