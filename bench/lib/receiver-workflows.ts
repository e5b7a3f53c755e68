/**
 * Workflows the n8n benchmarks put next to the bundled receiver, to split its time: a bare
 * webhook, the receiver without its validation, and a webhook through a built-in node that
 * reads a credential. Each answers 202 on a path of its own.
 */
import { loadWorkflows, type WorkflowJson } from '../../scripts/lib/environment';

type WorkflowNode = WorkflowJson['nodes'][number];

/** The bundled receiver's id, and the ids of the workflows below. */
export const RECEIVER_ID = 'DjReceiver000001';
export const BARE_WEBHOOK_ID = 'DjBenchBare00001';
export const ENQUEUE_ONLY_ID = 'DjBenchEnqOnly01';
export const CREDENTIAL_NODE_ID = 'DjBenchCredNode1';

function webhookNode(path: string, ids: { webhookId: string; id: string }): WorkflowNode {
	return {
		name: `POST /${path}`,
		type: 'n8n-nodes-base.webhook',
		parameters: { httpMethod: 'POST', path, responseMode: 'responseNode', options: {} },
		typeVersion: 2.1,
		position: [0, 0],
		...ids,
	} as WorkflowNode;
}

function respondNode(id: string): WorkflowNode {
	return {
		name: 'Respond',
		type: 'n8n-nodes-base.respondToWebhook',
		parameters: {
			respondWith: 'json',
			responseBody: '={{ { ok: true } }}',
			options: { responseCode: 202 },
		},
		typeVersion: 1.5,
		position: [440, 0],
		id,
	} as WorkflowNode;
}

function link(from: string, to: string): Record<string, unknown> {
	return { [from]: { main: [[{ node: to, type: 'main', index: 0 }]] } };
}

/** Webhook → Respond to Webhook (202): what n8n takes for any production webhook. */
export function bareWebhookWorkflow(settings: Record<string, unknown> = {}): WorkflowJson {
	return {
		id: BARE_WEBHOOK_ID,
		name: 'Bench: bare webhook',
		nodes: [
			webhookNode('bare', {
				webhookId: '6d7f8e9a-0b1c-4d2e-8f3a-4b5c6d7e8f90',
				id: '6d7f8e9a-0b1c-4d2e-8f3a-4b5c6d7e8f91',
			}),
			respondNode('6d7f8e9a-0b1c-4d2e-8f3a-4b5c6d7e8f92'),
		],
		connections: link('POST /bare', 'Respond'),
		settings: { executionOrder: 'v1', ...settings },
		active: false,
	};
}

/**
 * The bundled receiver without its validation: Webhook → Job Enqueue → Respond 202 (or the
 * error answer), on its own path and the receiver's queue, so that the receiver's time splits
 * into what n8n takes for any webhook, what Job Enqueue adds, and what the validation adds.
 */
export function enqueueOnlyWorkflow(settings: Record<string, unknown> = {}): WorkflowJson {
	const receiver = loadWorkflows().find((workflow) => workflow.id === RECEIVER_ID);
	if (!receiver) throw new Error(`the bundled receiver (${RECEIVER_ID}) was not found`);
	const connections = receiver.connections as Record<
		string,
		{ main?: Array<Array<{ node: string }> | null> }
	>;
	// Job Enqueue and every node after it (its answers), whatever the template routes them through.
	const afterEnqueue = new Set(['Job Enqueue']);
	for (const pending = ['Job Enqueue']; pending.length > 0; ) {
		for (const output of connections[pending.pop()!]?.main ?? [])
			for (const { node } of output ?? [])
				if (!afterEnqueue.has(node)) {
					afterEnqueue.add(node);
					pending.push(node);
				}
	}
	const kept = new Set(['POST /jobs', ...afterEnqueue]);
	const missing = [...kept].filter((name) => !receiver.nodes.some((node) => node.name === name));
	if (missing.length > 0)
		throw new Error(
			`the bundled receiver has no node named ${missing.join(', ')}: update bench/lib/receiver-workflows.ts`,
		);
	const nodes = structuredClone(receiver.nodes)
		.filter((node) => kept.has(node.name))
		.map((node) =>
			node.name === 'POST /jobs'
				? {
						...node,
						...webhookNode('enqueue-only', {
							webhookId: '6d7f8e9a-0b1c-4d2e-8f3a-4b5c6d7e8f93',
							id: '6d7f8e9a-0b1c-4d2e-8f3a-4b5c6d7e8f94',
						}),
					}
				: node,
		);
	const keptConnections = Object.fromEntries(
		[...afterEnqueue]
			.filter((name) => connections[name] !== undefined)
			.map((name) => [name, structuredClone(connections[name])]),
	);
	return {
		...structuredClone(receiver),
		id: ENQUEUE_ONLY_ID,
		name: 'Bench: receiver without validation',
		nodes,
		connections: {
			...link('POST /enqueue-only', 'Job Enqueue'),
			...keptConnections,
		},
		settings: { ...(receiver.settings as object), ...settings },
		active: false,
	};
}

/**
 * Webhook → JWT (sign, with the bundled dashboard's session credential) → Respond 202: a
 * built-in node that reads a credential and does no I/O, to tell what n8n charges any node
 * with a credential from what Job Enqueue itself takes.
 */
export function credentialNodeWorkflow(settings: Record<string, unknown> = {}): WorkflowJson {
	const dashboard = loadWorkflows().find((workflow) => workflow.id === 'DjDashboard00001');
	const jwt = dashboard?.nodes.find((node) => node.type === 'n8n-nodes-base.jwt');
	if (!jwt) throw new Error('the bundled dashboard has no JWT node to copy');
	const signer = { ...structuredClone(jwt), position: [220, 0] } as WorkflowNode;
	return {
		id: CREDENTIAL_NODE_ID,
		name: 'Bench: webhook through a node with a credential',
		nodes: [
			webhookNode('credential-node', {
				webhookId: '6d7f8e9a-0b1c-4d2e-8f3a-4b5c6d7e8f95',
				id: '6d7f8e9a-0b1c-4d2e-8f3a-4b5c6d7e8f96',
			}),
			signer,
			respondNode('6d7f8e9a-0b1c-4d2e-8f3a-4b5c6d7e8f97'),
		],
		connections: {
			...link('POST /credential-node', signer.name),
			...link(signer.name, 'Respond'),
		},
		settings: { executionOrder: 'v1', ...settings },
		active: false,
	};
}
