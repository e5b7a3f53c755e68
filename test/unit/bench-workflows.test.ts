import {
	bareWebhookWorkflow,
	credentialNodeWorkflow,
	enqueueOnlyWorkflow,
} from '../../bench/lib/receiver-workflows';

type Connections = Record<string, { main?: Array<Array<{ node: string }> | null> }>;

/** Every node a workflow's connections name, as source or as target. */
function namedNodes(connections: Connections): string[] {
	const names = Object.keys(connections);
	for (const { main } of Object.values(connections))
		for (const output of main ?? []) for (const { node } of output ?? []) names.push(node);
	return names;
}

describe('the workflows bench/n8n-receiver.ts imports beside the bundled ones', () => {
	it.each([
		['bare webhook', bareWebhookWorkflow],
		['receiver without validation', enqueueOnlyWorkflow],
		['node with a credential', credentialNodeWorkflow],
	])('%s connects only nodes it has (n8n refuses to import it otherwise)', (_, build) => {
		const workflow = build();
		const nodes = new Set(workflow.nodes.map((node) => node.name));
		const unknown = namedNodes(workflow.connections as Connections).filter(
			(name) => !nodes.has(name),
		);
		expect(unknown).toEqual([]);
	});

	it('keeps every answer of Job Enqueue in the receiver without validation', () => {
		const workflow = enqueueOnlyWorkflow();
		const names = workflow.nodes.map((node) => node.name);
		expect(names).toEqual(expect.arrayContaining(['Job Enqueue', 'Respond 202', 'Respond error']));
		expect(names).not.toContain('Validate request');
		const connections = workflow.connections as Connections;
		const afterEnqueue = (connections['Job Enqueue'].main ?? []).map((output) =>
			(output ?? []).map(({ node }) => node),
		);
		expect(afterEnqueue[0]).toEqual(['Respond 202']);
		expect(afterEnqueue[1]?.length).toBe(1);
	});
});
