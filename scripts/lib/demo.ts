/**
 * The parts of `npm run demo` (scripts/demo.ts) that decide something: the schema of a run, and
 * following the sample job's status until it ends, or until it is clear that it will not.
 */
import { randomBytes } from 'node:crypto';

/**
 * The job schema of one demo run. Two demos on the same DATABASE_URL must not share one: each
 * drops its schema when it starts and when it stops.
 */
export function demoSchemaName(): string {
	return `durable_jobs_demo_${randomBytes(4).toString('hex')}`;
}

/** The statuses a job does not leave by itself (SPEC: queued → running → done | failed | cancelled). */
export const FINAL_STATUSES = ['done', 'failed', 'cancelled'] as const;

/** How long the demo follows the sample job (the stand-in AI takes 3 s; a retry waits for its backoff). */
export const FOLLOW_DEADLINE_MS = 2 * 60_000;

export interface StatusAnswer {
	status: number;
	body: unknown;
	text: string;
}

interface JobStatusBody {
	status: string;
	attempts?: number;
	result?: unknown;
	error?: unknown;
	cancel_reason?: unknown;
}

function isJobStatus(body: unknown): body is JobStatusBody {
	return (
		typeof body === 'object' &&
		body !== null &&
		typeof (body as { status?: unknown }).status === 'string'
	);
}

/** An answer's body on one line, cut to a length that fits a terminal's few lines. */
function bodyLine(text: string, max = 300): string {
	const flat = text.replace(/\s+/g, ' ').trim();
	if (flat === '') return '(empty body)';
	return flat.length > max ? `${flat.slice(0, max)}… (${flat.length} characters)` : flat;
}

const FINAL_LABEL: Record<(typeof FINAL_STATUSES)[number], keyof JobStatusBody> = {
	done: 'result',
	failed: 'error',
	cancelled: 'cancel_reason',
};

export type FollowOutcome =
	| { final: true; status: (typeof FINAL_STATUSES)[number] }
	| { final: false; last: string | undefined };

/**
 * Asks for the job's status every `intervalMs` and prints each change (status and attempt, or
 * the HTTP status and body of an answer that is not a job's status, or why no answer came)
 * until the job reaches a final status. After `deadlineMs` without one it says so, with
 * `hint` (what to check), and returns: the caller keeps running.
 */
export async function followJobStatus(options: {
	poll: () => Promise<StatusAnswer>;
	line: (text: string) => void;
	/** Time since the job was posted, as printed before each line ("3.21 s"). */
	since: () => string;
	hint: string;
	deadlineMs?: number;
	intervalMs?: number;
}): Promise<FollowOutcome> {
	const { line, since } = options;
	const deadlineMs = options.deadlineMs ?? FOLLOW_DEADLINE_MS;
	const started = Date.now();
	let last: string | undefined;
	const show = (text: string) => {
		if (text === last) return;
		last = text;
		line(`  ${since()}  ${text}`);
	};
	for (;;) {
		try {
			const answer = await options.poll();
			if (answer.status === 200 && isJobStatus(answer.body)) {
				const body = answer.body;
				show(`${body.status}${body.attempts ? ` (attempt ${body.attempts})` : ''}`);
				const final = FINAL_STATUSES.find((status) => status === body.status);
				if (final) {
					const label = FINAL_LABEL[final];
					line(`  ${label.replace('_', ' ')}: ${JSON.stringify(body[label] ?? null)}`);
					return { final: true, status: final };
				}
			} else {
				show(`HTTP ${answer.status}  ${bodyLine(answer.text)}`);
			}
		} catch (error) {
			show(`no answer: ${String((error as Error)?.message ?? error).split('\n')[0]}`);
		}
		if (Date.now() - started >= deadlineMs) {
			line(
				`  no final status after ${Math.round(deadlineMs / 1000)} s (last: ${last ?? 'nothing'}); giving up following it. ${options.hint}`,
			);
			return { final: false, last };
		}
		await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 200));
	}
}
