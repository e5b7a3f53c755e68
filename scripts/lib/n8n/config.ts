/** The environment an n8n instance runs with: settings, database, queue mode. */
import type { N8nInstall } from './install';

const ENCRYPTION_KEY = 'n8n-nodes-durable-jobs-e2e-encryption-key';

function baseEnv(): Record<string, string> {
	// Deliberately not inheriting everything: test runners set NODE_ENV=test, and n8n's node
	// loader throws "Not available in tests" when NODE_ENV is test.
	const env: Record<string, string> = {};
	for (const k of [
		'HOME',
		'USER',
		'LOGNAME',
		'LANG',
		'LC_ALL',
		'TZ',
		'TMPDIR',
		'SHELL',
		'HTTP_PROXY',
		'HTTPS_PROXY',
		'NO_PROXY',
		'http_proxy',
		'https_proxy',
		'no_proxy',
	]) {
		const v = process.env[k];
		if (v !== undefined) env[k] = v;
	}
	return env;
}

export interface QueueOptions {
	workers?: number;
	concurrency?: number;
	redisHost?: string;
	redisPort?: number;
}

export function n8nEnvironment(settings: {
	install: N8nInstall;
	userFolder: string;
	/** n8n's own temp folder (it leaves files there, e.g. n8nDataTableUploads). */
	tmpDir: string;
	port: number;
	brokerPort: number;
	databaseName: string;
	databaseEnv: Record<string, string>;
	queue?: QueueOptions;
	extra?: Record<string, string>;
}): Record<string, string> {
	const { port, queue, databaseName } = settings;
	const baseUrl = `http://127.0.0.1:${port}`;
	return {
		...baseEnv(),
		PATH: `${settings.install.binDir}:${process.env.PATH ?? '/usr/bin:/bin'}`,
		N8N_USER_FOLDER: settings.userFolder,
		TMPDIR: settings.tmpDir,
		N8N_ENCRYPTION_KEY: ENCRYPTION_KEY,
		N8N_PORT: String(port),
		N8N_LISTEN_ADDRESS: '127.0.0.1',
		N8N_HOST: '127.0.0.1',
		N8N_PROTOCOL: 'http',
		N8N_WEBHOOK_URL: `${baseUrl}/`,
		N8N_RUNNERS_BROKER_PORT: String(settings.brokerPort),
		N8N_DIAGNOSTICS_ENABLED: 'false',
		N8N_VERSION_NOTIFICATIONS_ENABLED: 'false',
		N8N_TEMPLATES_ENABLED: 'false',
		N8N_PERSONALIZATION_ENABLED: 'false',
		N8N_HIRING_BANNER_ENABLED: 'false',
		N8N_COMMUNITY_PACKAGES_ENABLED: 'true',
		N8N_UNVERIFIED_PACKAGES_ENABLED: 'true',
		N8N_SECURE_COOKIE: 'false',
		// The stand-in services live on 127.0.0.1, which SSRF protection would block once enabled.
		N8N_SSRF_PROTECTION_ENABLED: 'false',
		// n8n 2.x serves production webhooks and sub-workflow calls from `workflow_published_version`,
		// filled asynchronously by a publication outbox polled every 15 s by default.
		N8N_WORKFLOW_PUBLICATION_OUTBOX_POLL_INTERVAL_MS: '1000',
		...settings.databaseEnv,
		...(queue
			? {
					EXECUTIONS_MODE: 'queue',
					QUEUE_BULL_REDIS_HOST: queue.redisHost ?? '127.0.0.1',
					QUEUE_BULL_REDIS_PORT: String(queue.redisPort ?? 6379),
					// Separate prefixes so parallel instances never take each other's jobs, cache
					// entries or pub/sub commands.
					QUEUE_BULL_PREFIX: `bull_${databaseName}`,
					N8N_REDIS_KEY_PREFIX: `n8n_${databaseName}`,
				}
			: {}),
		...(settings.extra ?? {}),
	};
}
