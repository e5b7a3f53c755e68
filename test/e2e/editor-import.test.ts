/**
 * The bundled workflows imported the way a user of the n8n editor imports them, not with the
 * CLI: through n8n's own REST API, as the editor of n8n 2.40 calls it. The owner account is set
 * up and logged in; the credentials are created through *Credentials → New* (so n8n gives them
 * ids of its own); each template goes through what *Import from File* and *Save* do to it (a
 * new workflow id, new node ids, unknown credential references replaced by the user's
 * credential of that type, the editor's default workflow settings) and is published with
 * *Publish*. Then a job runs receiver → Dispatcher (Job Trigger) → done, the reconciliation
 * endpoint answers only with the operator key, and the polling Dispatcher runs a job through the
 * Worker after the one re-link step the README gives, and releases a job whose Worker it cannot
 * start.
 */
import { randomBytes, randomUUID } from 'node:crypto';

import {
	OPERATOR_KEY,
	loadWorkflows,
	localizeWorkflows,
	startEnvironment,
	type Environment,
	type WorkflowJson,
} from '../../scripts/lib/environment';
import { N8nRestClient, type SavedWorkflow } from '../../scripts/lib/n8n/rest';
import { failedExecutions } from '../../scripts/lib/rehearsal/executions';
import { waitFor } from '../../scripts/lib/standins';
import { databaseUrl } from '../helpers/db';
import { e2eLog } from './progress';

const OWNER = {
	email: 'owner@example.com',
	password: `Owner-${randomBytes(9).toString('base64url')}-9`,
	firstName: 'Ada',
	lastName: 'Lovelace',
};

/** The workflows README's publish loop publishes (the polling Dispatcher and its Worker not). */
const PUBLISHED = [
	'DjReceiver000001',
	'DjStatus00000001',
	'DjDispatcher0001',
	'DjCallbackRelay1',
	'DjEventIntake001',
	'DjOutboxRelay001',
	'DjMonitoring0001',
	'DjReconcile00001',
	'DjDashboard00001',
];

let env: Environment;
let rest: N8nRestClient;
/** Template id → the workflow the import created. */
const imported = new Map<string, SavedWorkflow>();

/** n8n's workflow ids: 16 letters and digits. The editor makes one for each new workflow. */
function newWorkflowId(): string {
	const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
	return Array.from(randomBytes(16), (byte) => alphabet[byte % alphabet.length]).join('');
}

/**
 * What *Import from File* (or pasting the JSON) into a new workflow, then *Save*, makes of a
 * template in n8n 2.40's editor: the workflow is the new one the editor opened, with its own id;
 * every node gets a new id (Webhook nodes keep their webhookId and path); a credential reference
 * whose id the instance does not know is dropped, and the node gets the user's credential of
 * that type (the most recently updated one); name and tags are kept, but not the template's
 * workflow settings: the new workflow has the editor's defaults.
 */
function asImportedByEditor(
	template: WorkflowJson,
	credentialByType: Map<string, { id: string; name: string }>,
): Record<string, unknown> {
	const nodes = template.nodes.map((node) => {
		const copy = structuredClone(node) as WorkflowJson['nodes'][number] & {
			id?: string;
			credentials?: Record<string, { id: string; name: string }>;
		};
		copy.id = randomUUID();
		if (copy.credentials) {
			for (const type of Object.keys(copy.credentials)) {
				const own = credentialByType.get(type);
				if (!own) throw new Error(`no credential of type ${type} for ${template.name}`);
				copy.credentials[type] = own;
			}
		}
		return copy;
	});
	return {
		id: newWorkflowId(),
		name: template.name,
		nodes,
		connections: template.connections,
		settings: { executionOrder: 'v1' },
		pinData: {},
		tags: [],
		active: false,
	};
}

function byTemplate(templateId: string): SavedWorkflow {
	const workflow = imported.get(templateId);
	if (!workflow) throw new Error(`${templateId} was not imported`);
	return workflow;
}

async function publish(templateId: string): Promise<void> {
	const { id } = byTemplate(templateId);
	const { versionId } = await rest.getWorkflow(id);
	const published = await rest.publishWorkflow(id, versionId);
	expect(published.activeVersionId).toBe(versionId);
}

interface Accepted {
	job_id: string;
	status_url: string;
}

async function submitDocument(id: string): Promise<Accepted> {
	const answer = await env.request('jobs', {
		body: { document: { id, text: `name: Grace Hopper, amount: ${id.length}` } },
	});
	expect(answer.status).toBe(202);
	return answer.body as Accepted;
}

async function waitDone(
	job: Accepted,
): Promise<{ status: string; result: { crm_record_id: string } }> {
	return await waitFor(
		async () => {
			const answer = await env.request(job.status_url.replace(/^\/webhook\//, ''));
			const body = answer.body as { status: string; result: { crm_record_id: string } };
			return answer.status === 200 && body.status === 'done' ? body : undefined;
		},
		{ timeoutMs: 90_000, intervalMs: 300, what: `job ${job.job_id} done` },
	);
}

async function attemptWorkflows(jobId: string): Promise<string[]> {
	const { rows } = await env.jobsDb.query<{ workflow_id: string }>(
		`SELECT workflow_id FROM "${env.schema}".job_attempts WHERE job_id = $1 ORDER BY attempt`,
		[jobId],
	);
	return rows.map((row) => row.workflow_id);
}

beforeAll(async () => {
	// n8n with the package installed and nothing else: no credential, no workflow.
	env = await startEnvironment({
		databaseUrl: databaseUrl(),
		schema: 'dj_e2e_editor_import',
		workflows: [],
		cliSetup: false,
		log: e2eLog,
	});
	rest = new N8nRestClient(env.n8n.baseUrl);
	await rest.setupOwner(OWNER);
	await rest.login(OWNER.email, OWNER.password);

	const credentialByType = new Map<string, { id: string; name: string }>();
	for (const credential of env.credentials) {
		const created = await rest.createCredential({
			name: credential.name,
			type: credential.type,
			data: credential.data,
		});
		expect(created.id).not.toBe(credential.id);
		credentialByType.set(credential.type, { id: created.id, name: created.name });
	}
	const templates = loadWorkflows();
	localizeWorkflows(templates, env.standins, 1);
	for (const template of templates) {
		const saved = await rest.createWorkflow(asImportedByEditor(template, credentialByType));
		expect(saved.id).not.toBe(template.id);
		imported.set(template.id, saved);
	}
	e2eLog(`imported ${imported.size} workflows through the editor's REST API; publishing`);
	for (const templateId of PUBLISHED) await publish(templateId);
	e2eLog('waiting for the webhooks of the imported workflows');
	for (const [path, init] of [
		['jobs', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '[]' }],
		['jobs/status?job_id=probe&token=probe', undefined],
	] as const)
		await env.n8n.waitForWebhook(path, init);
});

afterAll(async () => {
	await env?.stop();
});

describe('the bundled workflows imported through the editor (new ids, own credentials)', () => {
	it('every template was saved under a new id, its credentials re-pointed to the ones the user created', () => {
		expect(imported.size).toBe(loadWorkflows().length);
		const reconciliation = byTemplate('DjReconcile00001');
		const webhook = reconciliation.nodes.find((node) => node.type === 'n8n-nodes-base.webhook');
		expect(webhook?.parameters.authentication).toBe('headerAuth');
		expect(webhook?.credentials?.httpHeaderAuth.id).not.toBe('DjOperatorApiKey');
	});

	it('a job runs receiver → Dispatcher (Job Trigger) → done, once at the CRM', async () => {
		const job = await submitDocument(`editor-${Date.now()}`);
		const done = await waitDone(job);
		expect(done.result.crm_record_id).toBeTruthy();
		expect(env.standins.crm.recordsForKey(job.job_id)).toHaveLength(1);
		expect(await attemptWorkflows(job.job_id)).toEqual([byTemplate('DjDispatcher0001').id]);
	});

	it('the reconciliation endpoint answers 403 without the operator key and 200 with it', async () => {
		const path = 'jobs/unknown-outcomes?queue=documents&limit=10';
		const refused = await env.request(path);
		expect(refused.status).toBe(403);
		expect(refused.text).toBe('Authorization data is wrong!');
		const allowed = await env.request(path, {
			headers: { [OPERATOR_KEY.header]: OPERATOR_KEY.value },
		});
		expect(allowed.status).toBe(200);
		expect(allowed.body).toMatchObject({ count: 0, unknown_outcomes: [] });
	});

	it('the polling Dispatcher calls the imported Worker after the re-link step (Run Worker → From list → the Worker); with the Worker archived, its job is released without using an attempt and runs once the Worker is back', async () => {
		const worker = byTemplate('DjWorker00000001');
		const polling = byTemplate('DjDispatchPoll01');
		const runWorker = polling.nodes.find((node) => node.name === 'Run Worker');
		// As imported, Run Worker still names the template's Worker id, which this n8n does not have.
		expect(runWorker?.parameters.workflowId).toMatchObject({ value: 'DjWorker00000001' });
		await expect(rest.getWorkflow('DjWorker00000001')).rejects.toThrow(/answered 40[34]/);

		// The re-link step: pick the Worker in Run Worker's list, save.
		const relinked = polling.nodes.map((node) =>
			node.name === 'Run Worker'
				? {
						...node,
						parameters: {
							...node.parameters,
							workflowId: {
								__rl: true,
								mode: 'list',
								value: worker.id,
								cachedResultName: worker.name,
							},
						},
					}
				: node,
		);
		const saved = await rest.updateWorkflow(polling.id, { nodes: relinked });
		imported.set('DjDispatchPoll01', saved);

		await rest.unpublishWorkflow(byTemplate('DjDispatcher0001').id);
		await publish('DjWorker00000001');
		await publish('DjDispatchPoll01');
		const job = await submitDocument(`editor-polling-${Date.now()}`);
		await waitDone(job);
		expect(env.standins.crm.recordsForKey(job.job_id)).toHaveLength(1);
		expect(await attemptWorkflows(job.job_id)).toEqual([polling.id]);
		const { rows } = await env.jobsDb.query<{ checkpoint: string }>(
			`SELECT checkpoint FROM "${env.schema}".job_attempts WHERE job_id = $1`,
			[job.job_id],
		);
		// The Worker ran the job: it recorded its checkpoint before the CRM call.
		expect(rows).toEqual([{ checkpoint: 'crm_request' }]);

		// The Worker archived (the first step of deleting it in the editor): Run Worker cannot start
		// it, so the job it leased is released (due again in 60 s, no attempt used) and the
		// execution fails saying what to do.
		await rest.archiveWorkflow(worker.id);
		const since = new Date();
		const stranded = await submitDocument(`editor-polling-unstarted-${Date.now()}`);
		const released = await waitFor(
			async () => {
				const { rows } = await env.jobsDb.query<{
					status: string;
					attempts: number;
					due_in_s: number;
					outcomes: string[];
				}>(
					`SELECT j.status, j.attempts, extract(epoch FROM j.run_at - now())::float8 AS due_in_s,
						array(SELECT a.outcome FROM "${env.schema}".job_attempts a WHERE a.job_id = j.id ORDER BY a.attempt) AS outcomes
					FROM "${env.schema}".jobs j WHERE j.id = $1`,
					[stranded.job_id],
				);
				return rows[0]?.outcomes.includes('released') ? rows[0] : undefined;
			},
			{ timeoutMs: 30_000, intervalMs: 300, what: 'the job released after Run Worker failed' },
		);
		expect(released).toMatchObject({ status: 'queued', attempts: 0, outcomes: ['released'] });
		expect(released.due_in_s).toBeGreaterThan(30);
		const failed = await waitFor(
			async () => {
				const rows = await failedExecutions(env, polling.id, since);
				return rows.length > 0 ? rows : undefined;
			},
			{ timeoutMs: 15_000, intervalMs: 500, what: "the polling Dispatcher's failed execution" },
		);
		expect(failed[0].data).toContain('Run Worker could not start the Worker workflow');
		expect(env.standins.crm.recordsForKey(stranded.job_id)).toHaveLength(0);

		// The Worker back: the released job runs once it is due, its release having used no attempt.
		await rest.unarchiveWorkflow(worker.id);
		await publish('DjWorker00000001');
		await waitDone(stranded);
		const { rows: strandedJob } = await env.jobsDb.query<{ attempts: number }>(
			`SELECT attempts FROM "${env.schema}".jobs WHERE id = $1`,
			[stranded.job_id],
		);
		expect(strandedJob).toEqual([{ attempts: 1 }]);
	});
});
