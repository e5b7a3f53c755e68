/**
 * Keeps `inFlight` jobs of a run alive through the real receiver webhook, each with its own
 * Idempotency-Key, retried with the same key until it gets a 202; notes every answer that was
 * not one (no answer, 503, n8n booting) and any key that got two job ids.
 */
import type { Environment } from '../environment';
import { sleep } from './constants';
import { countLive } from './observations';

export interface Submission {
	key: string;
	docId: string;
	body: { document: { id: string; text: string } };
	jobId: string | null;
	tries: number;
	/** Tries that got no HTTP answer (connection refused/reset: n8n was down or died mid-request). */
	unanswered: number;
	answered503: number;
	/** HTTP 200 "n8n is starting up. Please wait": n8n's own answer to every request while it boots. */
	startingUp: number;
	/** A retry after an unanswered try got 202 with deduplicated: true — the first try committed. */
	recoveredLostAnswer: boolean;
	otherAnswers: string[];
}

export class Submitter {
	readonly submissions = new Map<string, Submission>();
	readonly violations: string[] = [];
	private counter = 0;
	private stopped = false;
	private acceptingNew = true;
	private loop: Promise<void> | undefined;

	constructor(
		private readonly env: Environment,
		private readonly prefix: string,
		private readonly inFlight: number,
		private readonly concurrency: number,
	) {}

	start(): void {
		this.loop = this.run();
	}

	/** Stops creating new jobs; keeps retrying submissions that have no 202 yet. */
	stopNew(): void {
		this.acceptingNew = false;
	}

	pending(): Submission[] {
		return [...this.submissions.values()].filter((submission) => submission.jobId === null);
	}

	async stop(): Promise<void> {
		this.stopped = true;
		await this.loop;
	}

	private next(): Submission {
		this.counter++;
		const docId = `${this.prefix}${String(this.counter).padStart(5, '0')}`;
		const submission: Submission = {
			key: `key-${docId}`,
			docId,
			body: {
				document: {
					id: docId,
					text: `name: Rehearsal ${this.counter}, email r${this.counter}@example.com, amount: ${this.counter}.50`,
				},
			},
			jobId: null,
			tries: 0,
			unanswered: 0,
			answered503: 0,
			startingUp: 0,
			recoveredLostAnswer: false,
			otherAnswers: [],
		};
		this.submissions.set(submission.key, submission);
		return submission;
	}

	private async send(submission: Submission): Promise<boolean> {
		submission.tries++;
		let status: number;
		let text = '';
		let body: { job_id?: string; deduplicated?: boolean } = {};
		try {
			const response = await fetch(this.env.n8n.webhookUrl('jobs'), {
				method: 'POST',
				headers: { 'content-type': 'application/json', 'idempotency-key': submission.key },
				body: JSON.stringify(submission.body),
				signal: AbortSignal.timeout(30_000),
			});
			status = response.status;
			text = await response.text();
			try {
				body = JSON.parse(text) as typeof body;
			} catch {
				body = {};
			}
		} catch {
			submission.unanswered++;
			return false;
		}
		if (status === 202 && typeof body.job_id === 'string') {
			if (submission.jobId !== null && submission.jobId !== body.job_id) {
				this.violations.push(
					`key ${submission.key} answered two job ids: ${submission.jobId} and ${body.job_id}`,
				);
			}
			if (submission.unanswered > 0 && body.deduplicated === true)
				submission.recoveredLostAnswer = true;
			submission.jobId = body.job_id;
			return true;
		}
		if (status === 503) submission.answered503++;
		// While n8n boots it answers every request itself: 200 "n8n is starting up. Please wait"
		// (before its database is migrated), 404 "not registered", or 5xx. No job was taken: try again.
		else if (status === 200 && /n8n is starting up/i.test(text)) submission.startingUp++;
		else if (status !== 404 && status < 500)
			submission.otherAnswers.push(`${status} ${text.slice(0, 120)}`);
		return false;
	}

	private async run(): Promise<void> {
		while (!this.stopped) {
			let batch: Submission[] = this.pending().slice(0, this.concurrency);
			if (this.acceptingNew && batch.length < this.concurrency) {
				let live = 0;
				try {
					live = await countLive(this.env, this.prefix);
				} catch {
					live = this.inFlight;
				}
				const want = Math.min(
					this.concurrency - batch.length,
					this.inFlight - live - this.pending().length,
				);
				for (let i = 0; i < want; i++) batch = [...batch, this.next()];
			}
			if (batch.length === 0) {
				await sleep(150);
				continue;
			}
			const results = await Promise.all(batch.map((submission) => this.send(submission)));
			if (!results.some(Boolean)) await sleep(400);
		}
	}
}
