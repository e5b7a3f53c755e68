/** What `startN8n` / `N8nInstance.start` take. */
import type { QueueOptions } from './config';

type Log = (line: string) => void;

export interface WebhookProbe {
	/** Path after `/webhook/`, e.g. `jobs` or `jobs/status?job_id=x`. */
	path: string;
	/** Request to probe with; it really runs the workflow once, so use a harmless request. */
	init?: RequestInit;
}

export interface StartN8nOptions {
	/** Superuser URL of any PostgreSQL; n8n gets a fresh database `n8n_e2e_<random>` on it. */
	databaseUrl: string;
	version?: string;
	/** Tarball(s) from packPackage(); npm-installed into `<userFolder>/.n8n/nodes`. */
	packageTarball?: string | string[];
	/** Credentials for `n8n import:credentials` (array of {id, name, type, data}). */
	credentials?: object[];
	/** Folder of workflow JSON files imported with `--separate`. */
	workflowsDir?: string;
	workflowFiles?: string[];
	/** Workflow objects, written to files and imported. */
	workflows?: object[];
	/** Workflow ids to publish (activate) before start — include sub-workflows. */
	publishIds?: string[];
	/** Webhooks that must answer (anything but "not registered") after every start. */
	webhooks?: WebhookProbe[];
	/** Extra/overriding environment for n8n (all processes, including CLI runs). */
	env?: Record<string, string>;
	log?: Log;
	/** Instance folder (default: a new temp folder). */
	dir?: string;
	/** Keep folder and database after stop() (default: N8N_E2E_KEEP=1). */
	keep?: boolean;
	startTimeoutMs?: number;
	/**
	 * Start even when n8n reports a failed publication or trigger activation (e.g. a test of a
	 * trigger with a wrong password). Default false: the start fails with n8n's message.
	 */
	allowActivationErrors?: boolean;
	/** n8n queue mode: main + `workers` worker processes over Redis (default 127.0.0.1:6379). */
	queue?: QueueOptions;
}
