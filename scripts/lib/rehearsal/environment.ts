/**
 * The rehearsal's environment: the standard one (real n8n, packed package, every bundled
 * workflow) with a short lease and attempt ids on the Worker's requests, and the job database
 * on a private embedded PostgreSQL unless the outage is a TCP cut.
 */
import { startEnvironment, workflowNode, type Environment } from '../environment';
import { startEmbeddedPostgres, type EmbeddedServer } from '../postgres';
import {
	ATTEMPT_HEADER,
	CHECKPOINT_NODE,
	CRM_CHECKPOINT,
	DISPATCHER_ID,
	REHEARSAL_BACKSTOP_SECONDS,
	WORKER_ID,
	type Log,
} from './constants';

// environment

/**
 * How the outage takes the job database away: a restart of its own server (fast shutdown), a
 * crash of it (immediate shutdown: WAL not yet flushed is lost, crash recovery at the start),
 * or a TCP proxy cut.
 */
export type OutageKind = 'restart' | 'crash' | 'cut';

export interface RehearsalEnvironmentOptions {
	/** n8n's own database; with the outage `cut` also the job database. */
	databaseUrl: string;
	/**
	 * `restart` (default): the job database gets a private embedded PostgreSQL, whatever
	 * `databaseUrl` is, so the outage can restart it without touching n8n's database. `cut`: the
	 * job database stays on `databaseUrl` (a server that must not be restarted) and the outage
	 * cuts it with the TCP proxy.
	 */
	outage?: OutageKind;
	schema: string;
	/** Lease of the Dispatcher's Job Trigger, which the Worker's checkpoint renews by (bundled: 180 s). */
	leaseSeconds: number;
	pollSeconds?: number;
	log?: Log;
}

export interface RehearsalEnvironment extends Environment {
	/** The job database's private server when the outage restarts or crashes it; stop() destroys it. */
	jobsServer: EmbeddedServer | undefined;
	outageKind: OutageKind;
}

/**
 * The rehearsal's environment (see `startEnvironmentWithRehearsalChanges`), with the job
 * database on a private embedded PostgreSQL unless `outage` is `cut`.
 */
export async function startRehearsalEnvironment(
	options: RehearsalEnvironmentOptions,
): Promise<RehearsalEnvironment> {
	const log = options.log ?? (() => undefined);
	let jobsServer: EmbeddedServer | undefined;
	const outageKind = options.outage ?? 'restart';
	if (outageKind !== 'cut') {
		jobsServer = await startEmbeddedPostgres((line) => log(`job database: ${line.trimEnd()}`));
		log(
			`job database: private embedded PostgreSQL on 127.0.0.1:${jobsServer.port} (n8n's own database stays on its server)`,
		);
	}
	let env: Environment;
	try {
		env = await startEnvironmentWithRehearsalChanges(options, jobsServer?.url);
	} catch (error) {
		await jobsServer?.destroy().catch(() => undefined);
		throw error;
	}
	return {
		...env,
		jobsServer,
		outageKind,
		stop: async () => {
			try {
				await env.stop();
			} finally {
				await jobsServer?.destroy();
			}
		},
	};
}

/**
 * The standard environment (real n8n, packed package, every bundled workflow) with two changes
 * to the imported copies: the lease is short — set on the Dispatcher's Job Trigger, the one
 * place the bundled workflows take it from: each leased item carries it (`lease_seconds`) and
 * the Worker's checkpoint renews the lease by as much — so jobs of a killed worker come back
 * quickly, and the Worker's two HTTP requests carry an `X-Attempt-Id` header (observation only:
 * the stand-ins journal it, nothing acts on it), so every AI and CRM request can be attributed
 * to the attempt that sent it — including a stale attempt running next to its successor.
 */
async function startEnvironmentWithRehearsalChanges(
	options: RehearsalEnvironmentOptions,
	jobsDatabaseUrl: string | undefined,
): Promise<Environment> {
	return await startEnvironment({
		databaseUrl: options.databaseUrl,
		jobsDatabaseUrl,
		schema: options.schema,
		pollSeconds: options.pollSeconds ?? 1,
		log: options.log,
		// The end-of-run checks read the job executions of the whole run; n8n would prune beyond
		// 10,000 executions.
		n8nEnv: { EXECUTIONS_DATA_PRUNE: 'false' },
		customize: (workflows) => {
			const trigger = workflowNode(workflows, DISPATCHER_ID, 'Job Trigger');
			if (typeof trigger.parameters.leaseSeconds !== 'number')
				throw new Error('Dispatcher Job Trigger has no numeric leaseSeconds to override');
			trigger.parameters.leaseSeconds = options.leaseSeconds;
			trigger.parameters.options = {
				...(trigger.parameters.options as Record<string, unknown>),
				backstopSeconds: REHEARSAL_BACKSTOP_SECONDS,
			};
			// The Worker's steps, in the Dispatcher (what runs) and in the Worker (the polling
			// template's sub-workflow), get the same changes.
			for (const workflowId of [DISPATCHER_ID, WORKER_ID]) {
				// The checkpoint must renew by the leased item's lease, or it would extend every
				// lease to a length of its own.
				const checkpoint = workflowNode(workflows, workflowId, CHECKPOINT_NODE);
				if (
					checkpoint.parameters.operation !== 'extendLease' ||
					checkpoint.parameters.checkpoint !== CRM_CHECKPOINT
				) {
					throw new Error(
						`${workflowId} node ${CHECKPOINT_NODE} does not extend the lease with checkpoint ${CRM_CHECKPOINT}`,
					);
				}
				if (!/\.item\.json\.lease_seconds \}\}$/.test(String(checkpoint.parameters.leaseSeconds)))
					throw new Error(
						`${workflowId} node ${CHECKPOINT_NODE} does not take its lease from the leased item's lease_seconds`,
					);
				for (const name of ['Call AI', 'Create CRM record']) {
					const headers = workflowNode(workflows, workflowId, name).parameters.headerParameters as
						| { parameters: Array<{ name: string; value: string }> }
						| undefined;
					if (!headers) throw new Error(`${workflowId} node ${name} sends no headers`);
					headers.parameters.push({
						name: ATTEMPT_HEADER,
						value: "={{ $('Config').item.json.attempt_id }}",
					});
				}
			}
		},
	});
}
