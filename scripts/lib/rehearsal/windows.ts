/**
 * The T0–T4 window model: where each job of a run stands at a kill (classified from the job
 * database and the journals), and how a kill is aimed at one window.
 */
import type { Environment } from '../environment';
import { QUEUE, sleep } from './constants';
import { aiView, quoteSchema, type Snapshot } from './observations';

export const WINDOWS = ['T0', 'T1', 'T2', 'T3', 'T4'] as const;
export type Window = (typeof WINDOWS)[number];
export const WINDOW_LABELS: Record<Window, string> = {
	T0: 'queued, not leased',
	T1: 'leased, worker not started (no request of the attempt reached the AI)',
	T2: 'worker running, before the CRM call (AI request sent)',
	T3: 'CRM request sent and record stored, answer not received (CRM delays it)',
	T4: 'CRM answered, before Job Complete',
};
export const TARGETS: Window[] = ['T1', 'T2', 'T3', 'T4'];

/** mulberry32: a small seeded generator, so a rehearsal's kill plan can be replayed. */
export function seededRandom(seed: number): () => number {
	let state = seed >>> 0;
	return () => {
		state = (state + 0x6d2b79f5) >>> 0;
		let t = state;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}

export function emptyWindows(): Record<Window, number> {
	return { T0: 0, T1: 0, T2: 0, T3: 0, T4: 0 };
}

export interface Classified {
	window: Window | 'R';
	attemptId: string | null;
}

export function classify(snap: Snapshot, dead: Set<string>): Map<string, Classified> {
	const out = new Map<string, Classified>();
	for (const job of snap.jobs) {
		if (job.status === 'queued') {
			out.set(job.id, { window: 'T0', attemptId: null });
			continue;
		}
		if (job.status !== 'running' || job.attempt_id === null) continue;
		const attemptId = job.attempt_id;
		if (dead.has(attemptId)) {
			out.set(job.id, { window: 'R', attemptId });
			continue;
		}
		const crm = (snap.crm.get(job.id) ?? []).filter((entry) => entry.attemptId === attemptId);
		const ai = snap.ai.get(attemptId) ?? [];
		let window: Window;
		if (crm.length > 0) window = crm.some((entry) => entry.responded) ? 'T4' : 'T3';
		else if (ai.length > 0) window = 'T2';
		else window = 'T1';
		out.set(job.id, { window, attemptId });
	}
	return out;
}

/**
 * Waits for the moment to kill inside `target`, at a random point of it; false when the window
 * was not seen within `timeoutMs` (the kill happens anyway).
 */
export async function aimAt(
	env: Environment,
	target: Window,
	config: { aiLatencyMs: number; crmDelayMs: number; prefix: string; timeoutMs: number },
	random: () => number,
): Promise<boolean> {
	const armedAt = Date.now();
	const deadline = armedAt + config.timeoutMs;
	const s = quoteSchema(env.schema);
	if (target === 'T0') {
		await sleep(random() * 1_000);
		return true;
	}
	if (target === 'T1') {
		while (Date.now() < deadline) {
			const { rows } = await env.jobsDb.query<{ attempt_id: string }>(
				`SELECT j.attempt_id
				FROM ${s}.jobs j
				WHERE j.queue = $1 AND j.status = 'running' AND j.attempt_started_at > now() - interval '3 seconds'
					AND j.payload->'document'->>'id' LIKE $2 || '%'`,
				[QUEUE, config.prefix],
			);
			const calls = aiView(env);
			if (rows.some((row) => !calls.has(row.attempt_id))) {
				await sleep(random() * 30);
				return true;
			}
			await sleep(15);
		}
		return false;
	}
	if (target === 'T2') {
		while (Date.now() < deadline) {
			const call = env.standins.ai.calls.find((candidate) => Date.parse(candidate.at) >= armedAt);
			if (call) {
				const inside = Date.parse(call.at) + random() * 0.85 * config.aiLatencyMs;
				await sleep(Math.max(0, inside - Date.now()));
				return true;
			}
			await sleep(10);
		}
		return false;
	}
	const journal = env.standins.crm.journal;
	const from = journal.length;
	if (target === 'T3') {
		while (Date.now() < deadline) {
			const entry = journal
				.slice(from)
				.find((candidate) => candidate.path === '/records' && !candidate.responded);
			if (entry) {
				const inside = Date.parse(entry.at) + random() * 0.85 * config.crmDelayMs;
				await sleep(Math.max(0, inside - Date.now()));
				return true;
			}
			await sleep(10);
		}
		return false;
	}
	// T4: the moment a delayed CRM answer goes out, Job Complete is milliseconds away.
	const waiting = new Set(journal.filter((entry) => entry.path === '/records' && !entry.responded));
	while (Date.now() < deadline) {
		for (const entry of journal.slice(from))
			if (entry.path === '/records' && !entry.responded) waiting.add(entry);
		for (const entry of waiting) {
			if (entry.responded) {
				await sleep(random() * 25);
				return true;
			}
		}
		await sleep(2);
	}
	return false;
}
