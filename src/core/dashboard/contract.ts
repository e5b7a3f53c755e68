/**
 * The JSON the dashboard's reads and actions answer (timestamps as ISO strings). The core builds
 * these; the page's script (dashboard/dashboard.ts) reads the same types, so the two cannot
 * drift apart. Types only: nothing here runs.
 */

/** What a list entry and a job's story both say about the job itself. */
export interface JobSummary {
	job_id: string;
	queue: string;
	status: string;
	priority: number;
	attempts: number;
	max_attempts: number;
	created_at: string;
	updated_at: string;
	run_at: string;
	started_at: string | null;
	finished_at: string | null;
	lease_until: string | null;
	/** A running job whose lease has run out. */
	lease_expired: boolean;
	idempotency_key: string | null;
	correlation_id: string | null;
}

export interface QueueSummary {
	queue: string;
	/** Waiting jobs: ready (due now) + scheduled (run_at in the future, e.g. a retry's backoff). */
	queued: number;
	ready: number;
	scheduled: number;
	/** Queued jobs that already used an attempt (waiting for their retry). */
	retrying: number;
	running: number;
	/** Running jobs whose lease has expired: their worker died or outlived the lease. */
	running_expired: number;
	done: number;
	/** Dead letters. */
	failed: number;
	cancelled: number;
	/** Age of the oldest job that is due and waiting for a worker. */
	oldest_ready_age_seconds: number | null;
	oldest_queued_age_seconds: number | null;
}

export interface ChartPoint {
	/** Start of the minute (ISO). */
	minute: string;
	done: number;
	failed: number;
}

export interface QueueOverview {
	as_of: string;
	queues: QueueSummary[];
	chart: {
		/** The window: the current minute and the 59 before it. */
		from_minute: string;
		to_minute: string;
		/** Points are complete from here on (earlier minutes were not asked for). */
		since: string;
		/** Minutes with at least one finished or failed job; every other minute is 0. */
		series: Array<{ queue: string; points: ChartPoint[] }>;
	};
}

export interface JobListEntry extends JobSummary {
	error_code: string | null;
	error_class: string | null;
	/** The first 300 characters. */
	error_message: string | null;
}

export interface JobListPage {
	/** When the page was read; pass it to a requeue of jobs selected from this page. */
	as_of: string;
	jobs: JobListEntry[];
	/** Cursor of the next (older) page, or null on the last page. */
	next_cursor: string | null;
	filter: {
		queue: string | null;
		statuses: string[];
		from: string | null;
		to: string | null;
		text: string | null;
		limit: number;
	};
}

export interface AttemptStory {
	attempt_id: string;
	attempt: number;
	started_at: string;
	lease_until: string | null;
	finished_at: string | null;
	/** succeeded, failed, retry, released, lease_expired, cancelled; `running` for the live attempt; null when unknown. */
	outcome: string | null;
	error_code: string | null;
	error_message: string | null;
	checkpoint: string | null;
	checkpoint_at: string | null;
	/** The n8n workflow and execution that leased the job (Job Lease records them). */
	workflow_id: string | null;
	execution_id: string | null;
	/** Path of that execution in the n8n editor, or null without both ids. */
	execution_path: string | null;
}

export interface TextPreview {
	/** The JSON text, cut to `preview_chars`. */
	preview: string;
	chars: number;
	truncated: boolean;
}

export interface JobStory {
	as_of: string;
	job: JobSummary & {
		callback_url: string | null;
		ordering_key: string | null;
		payload: TextPreview;
		/** Done jobs only. */
		result: TextPreview | null;
		/** Failed and cancelled jobs; for a queued retry, the last attempt's error. */
		error: {
			code: string | null;
			message: string | null;
			class: string | null;
			node: string | null;
			workflow_id: string | null;
			execution_id: string | null;
			execution_path: string | null;
		} | null;
	};
	attempts: AttemptStory[];
	/** All attempts of the job; `attempts` holds the newest 200. */
	attempts_total: number;
	callback_events: Array<{
		job_id: string;
		event_id: string;
		event_type: string | null;
		destination: string | null;
		status: string;
		attempts: number;
		max_attempts: number;
		created_at: string;
		run_at: string;
		finished_at: string | null;
		error_code: string | null;
		error_message: string | null;
		deliveries: AttemptStory[];
	}>;
}

export interface DashboardActionResult {
	action: 'requeue' | 'cancel';
	requested: number;
	changed: number;
	/** Every requested id: whether this call changed it, and its status now (null: no such job). */
	jobs: Array<{ job_id: string; changed: boolean; status: string | null }>;
}
