/**
 * n8n's execution data (what an operator sees in n8n): a workflow's failed executions, the state
 * of Worker executions n8n had not finished at a kill, and where a fenced two-output node sent
 * each attempt's item.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';

import pg from 'pg';

import type { Environment } from '../environment';
import { JOB_WORKFLOW_ID } from './constants';

export interface ExecutionRow {
	id: string;
	workflowId: string;
	status: string;
	startedAt: Date | null;
	stoppedAt: Date | null;
	data: string;
}

export async function readExecutions(
	env: Environment,
	sql: string,
	values: unknown[],
): Promise<ExecutionRow[]> {
	const client = new pg.Client({ connectionString: env.n8n.databaseUrl });
	await client.connect();
	try {
		const { rows } = await client.query<ExecutionRow>(sql, values);
		return rows;
	} finally {
		await client.end();
	}
}

/** A workflow's failed executions created since `since`, with their saved data as text. */
export async function failedExecutions(
	env: Environment,
	workflowId: string,
	since: Date,
): Promise<ExecutionRow[]> {
	return await readExecutions(
		env,
		`SELECT e.id::text AS id, e."workflowId" AS "workflowId", e.status, e."startedAt" AS "startedAt", e."stoppedAt" AS "stoppedAt", d.data
		FROM execution_entity e JOIN execution_data d ON d."executionId" = e.id
		WHERE e."workflowId" = $1 AND e."createdAt" >= $2 AND e.status = 'error'`,
		[workflowId, since],
	);
}

export interface RunError {
	message?: string;
	description?: string | null;
	messages?: string[];
}

export type RunData = Record<
	string,
	Array<{
		data?: { main?: Array<Array<{ json: Record<string, unknown> }> | null> };
		error?: RunError;
	}>
>;

/** n8n stores run data with `flatted`; use n8n's own copy to read it. */
export function parseRunData(env: Environment, data: string): RunData {
	const requireFromN8n = createRequire(
		join(env.n8n.install.installDir, 'node_modules', 'n8n', 'package.json'),
	);
	const flatted = requireFromN8n('flatted') as { parse(text: string): unknown };
	const parsed = flatted.parse(data) as { resultData?: { runData?: RunData } };
	return parsed.resultData?.runData ?? {};
}

/**
 * State of the executions running a job that n8n had not finished when it died: `new`
 * (created for the Job Trigger's emission, not started — n8n 2.x runs these again at boot) or
 * `running` (n8n marks these crashed at boot). Keyed by the attempt id in their input.
 */
export async function workerExecutionStates(
	env: Environment,
	attemptIds: string[],
): Promise<Map<string, string>> {
	const states = new Map<string, string>();
	if (attemptIds.length === 0) return states;
	const rows = await readExecutions(
		env,
		`SELECT e.id::text AS id, e."workflowId" AS "workflowId", e.status, e."startedAt" AS "startedAt", e."stoppedAt" AS "stoppedAt", d.data
		FROM execution_entity e JOIN execution_data d ON d."executionId" = e.id
		WHERE e."workflowId" = $1 AND e.status IN ('new', 'running')`,
		[JOB_WORKFLOW_ID],
	);
	for (const attemptId of attemptIds) {
		const row = rows.find((candidate) => candidate.data.includes(attemptId));
		if (row) states.set(attemptId, row.status);
	}
	return states;
}

export interface NodeRoutes {
	/** Items of the attempt on the node's first output (Extended, Completed). */
	first: Array<Record<string, unknown>>;
	/** Items of the attempt on its second output (Lease Lost). */
	leaseLost: Array<Record<string, unknown>>;
}

/**
 * Where a fenced two-output node (Job Lease → Extend Lease, Job Complete) sent each attempt's
 * item, read from the finished Worker executions that carry the attempt id: what the operator
 * sees in n8n, independent of the job database.
 */
export async function nodeRoutesByAttempt(
	env: Environment,
	nodeName: string,
	attemptIds: string[],
	since: Date,
): Promise<Map<string, NodeRoutes>> {
	const routes = new Map<string, NodeRoutes>();
	if (attemptIds.length === 0) return routes;
	const wanted = new Set(attemptIds);
	const rows = await readExecutions(
		env,
		`SELECT e.id::text AS id, e."workflowId" AS "workflowId", e.status, e."startedAt" AS "startedAt", e."stoppedAt" AS "stoppedAt", d.data
		FROM execution_entity e JOIN execution_data d ON d."executionId" = e.id
		WHERE e."workflowId" = $1 AND e."startedAt" >= $2 AND e."stoppedAt" IS NOT NULL AND d.data LIKE ANY($3::text[])`,
		[JOB_WORKFLOW_ID, since, attemptIds.map((attemptId) => `%${attemptId}%`)],
	);
	for (const row of rows) {
		for (const run of parseRunData(env, row.data)[nodeName] ?? []) {
			const outputs = run.data?.main ?? [];
			for (const [index, items] of outputs.entries()) {
				for (const item of items ?? []) {
					const attemptId = item.json.attempt_id;
					if (typeof attemptId !== 'string' || !wanted.has(attemptId)) continue;
					const entry = routes.get(attemptId) ?? { first: [], leaseLost: [] };
					(index === 1 ? entry.leaseLost : entry.first).push(item.json);
					routes.set(attemptId, entry);
				}
			}
		}
	}
	return routes;
}
