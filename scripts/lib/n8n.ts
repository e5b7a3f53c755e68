/**
 * Runs a REAL n8n 2.x headless, with this package installed the way a user installs it, for the
 * end-to-end tests and `npm run demo`.
 *
 *   const n8n = await ensureN8n({ log });                  // Node 24 + n8n, cached outside the repo
 *   const tarball = await packPackage(repoDir);            // `npm pack` (runs prepack → build)
 *   const inst = await startN8n({
 *     databaseUrl,                                         // any PostgreSQL superuser URL
 *     packageTarball: tarball,                             // npm-installed into ~/.n8n/nodes
 *     credentials: [{ id, name, type, data: {...} }],      // plain data; n8n encrypts on import
 *     workflowsDir: 'workflows',                           // and/or workflowFiles / workflows
 *     publishIds: ['RcvJobs000000001', ...],               // include sub-workflows
 *     webhooks: [{ path: 'jobs', init: { method: 'POST', body: '{}' } }], // probed after every start
 *   });
 *   await fetch(inst.webhookUrl('jobs'), ...);
 *   await inst.kill('SIGKILL'); await inst.restart();      // crash test: same folder + database
 *   await inst.stop();                                     // ends processes, drops db, removes folder
 *
 * The parts, by job: n8n/install.ts (Node 24 + n8n into the cache, npm pack), n8n/config.ts
 * (the environment n8n runs with), n8n/database.ts (a database per instance, Redis keys),
 * n8n/cli.ts (package install, import, publish), n8n/readiness.ts (healthy, published,
 * webhooks answering), n8n/instance.ts (the `N8nInstance` class), ../processes.ts (process
 * groups that die with this process).
 *
 * Each instance gets its own folder (user folder, `n8n.log` with all n8n and CLI output), its own
 * database `n8n_e2e_<random>` on the server of `databaseUrl`, its own HTTP and task-runner broker
 * ports, and in queue mode (`queue: { workers: 2 }`, Redis 127.0.0.1:6379 unless given) its own
 * Bull and Redis key prefixes and `worker-<i>.log` files, so instances can run side by side.
 *
 * Cache: `${DURABLE_JOBS_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/n8n-nodes-durable-jobs}/n8n-<version>`
 * (see cache.ts). Env knobs: N8N_E2E_VERSION (default 2.40.7), N8N_E2E_KEEP=1 keeps folders and
 * databases after stop() and after a failed start.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { N8nInstance, type StartN8nOptions } from './n8n/instance';

export {
	DEFAULT_N8N_VERSION,
	downloadNotice,
	ensureN8n,
	packPackage,
	type N8nInstall,
} from './n8n/install';
export { N8nInstance, type StartN8nOptions, type WebhookProbe } from './n8n/instance';

export async function startN8n(opts: StartN8nOptions): Promise<N8nInstance> {
	return await N8nInstance.start(opts);
}

/** Lists `*.json` workflow files in a folder (helper for callers that publish every workflow). */
export function workflowIdsIn(dirPath: string): string[] {
	return readdirSync(dirPath)
		.filter((f) => f.endsWith('.json'))
		.map((f) => (JSON.parse(readFileSync(join(dirPath, f), 'utf8')) as { id?: unknown }).id)
		.filter((id): id is string => typeof id === 'string');
}
