import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * The Dispatcher (03) runs each job's steps itself, one execution per job started by its Job
 * Trigger, instead of calling the Worker (04) as a sub-workflow: a sub-workflow would double the
 * executions per job, and the Worker must be published and re-linked by id after an editor
 * import. The Worker (04) keeps the same steps for the polling Dispatcher (11). So the steps are
 * written twice, and this test fails when the two copies drift apart: every node but the sticky
 * notes and the entry node (Job Trigger in 03, the Execute Workflow Trigger in 04), compared by
 * type, version, parameters, credentials and settings, and every connection, with ids and
 * positions ignored and references to the entry node read as one name.
 */
const WORKFLOWS = resolve(__dirname, '..', '..', 'workflows');

interface TemplateNode {
	id?: string;
	name: string;
	type: string;
	typeVersion?: number;
	position?: number[];
	parameters: Record<string, unknown>;
	[key: string]: unknown;
}

type Connections = Record<
	string,
	Record<string, Array<Array<{ node: string; type: string; index: number }> | null>>
>;

interface Template {
	id: string;
	nodes: TemplateNode[];
	connections: Connections;
}

const ENTRY = '<entry node>';
const ENTRY_TYPES = ['n8n-nodes-durable-jobs.jobTrigger', 'n8n-nodes-base.executeWorkflowTrigger'];

function load(file: string): Template {
	return JSON.parse(readFileSync(join(WORKFLOWS, file), 'utf8')) as Template;
}

function entryNode(template: Template): TemplateNode {
	const entries = template.nodes.filter((node) => ENTRY_TYPES.includes(node.type));
	expect(entries.map((node) => node.name)).toHaveLength(1);
	return entries[0];
}

function escapeRegExp(text: string): string {
	return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * `value` with the entry node's references (`$('…')`, `$node["…"]`) renamed in every string, and
 * without the ids of list entries (an If node's conditions, a Set node's assignments): the
 * editor makes those, like node ids.
 */
function renameEntry(value: unknown, entryName: string): unknown {
	if (typeof value === 'string') {
		const name = escapeRegExp(entryName);
		return value
			.replace(new RegExp(`\\$\\((['"])${name}\\1\\)`, 'g'), `$('${ENTRY}')`)
			.replace(new RegExp(`\\$node\\[(['"])${name}\\1\\]`, 'g'), `$node['${ENTRY}']`);
	}
	if (Array.isArray(value))
		return value.map((item) => {
			if (item === null || typeof item !== 'object' || Array.isArray(item))
				return renameEntry(item, entryName);
			// eslint-disable-next-line @typescript-eslint/no-unused-vars
			const { id, ...rest } = item as Record<string, unknown>;
			return renameEntry(rest, entryName);
		});
	if (value !== null && typeof value === 'object')
		return Object.fromEntries(
			Object.entries(value).map(([key, item]) => [key, renameEntry(item, entryName)]),
		);
	return value;
}

interface WorkerPart {
	/** By node name: everything of the node but its id and position. */
	nodes: Record<string, Record<string, unknown>>;
	/** "source[output type][output index] → target[input index]", the entry node as ENTRY. */
	connections: string[];
}

/** The worker steps of a template: its nodes but the sticky notes and the entry node. */
function workerPart(template: Template): WorkerPart {
	const entry = entryNode(template);
	const nodes: WorkerPart['nodes'] = {};
	for (const node of template.nodes) {
		if (node === entry || node.type === 'n8n-nodes-base.stickyNote') continue;
		// eslint-disable-next-line @typescript-eslint/no-unused-vars
		const { id, position, ...rest } = node;
		nodes[node.name] = renameEntry(rest, entry.name) as Record<string, unknown>;
	}
	const named = (name: string) => (name === entry.name ? ENTRY : name);
	const connections: string[] = [];
	for (const [source, byType] of Object.entries(template.connections))
		for (const [type, outputs] of Object.entries(byType))
			outputs.forEach((targets, output) => {
				for (const target of targets ?? [])
					connections.push(
						`${named(source)}[${type}][${output}] → ${named(target.node)}[${target.type}][${target.index}]`,
					);
			});
	return { nodes, connections: connections.sort() };
}

describe('the Dispatcher (03) and the Worker (04) run the same job steps', () => {
	const dispatcher = load('03-dispatcher.json');
	const worker = load('04-worker.json');

	it('each has one entry node: Job Trigger in the Dispatcher, Execute Workflow Trigger in the Worker', () => {
		expect(entryNode(dispatcher).type).toBe('n8n-nodes-durable-jobs.jobTrigger');
		expect(entryNode(worker).type).toBe('n8n-nodes-base.executeWorkflowTrigger');
	});

	it('the same nodes: types, versions, parameters, credentials and settings', () => {
		const ours = workerPart(dispatcher).nodes;
		const theirs = workerPart(worker).nodes;
		expect(Object.keys(ours).sort(), 'node names').toEqual(Object.keys(theirs).sort());
		for (const name of Object.keys(theirs))
			expect(ours[name], `node "${name}" (03 vs 04): change both templates`).toEqual(theirs[name]);
		// Not vacuous: the steps are there, and one of them reads the entry node's item.
		expect(Object.keys(theirs)).toEqual(
			expect.arrayContaining([
				'Config',
				'Call AI',
				'Read AI answer',
				'Create CRM record',
				'Finish job',
			]),
		);
		expect(JSON.stringify(theirs)).toContain(`$('${ENTRY}')`);
	});

	it('the same connections, from the entry node on', () => {
		const ours = workerPart(dispatcher).connections;
		const theirs = workerPart(worker).connections;
		expect(ours, 'connections (03 vs 04): change both templates').toEqual(theirs);
		expect(theirs).toContain(`${ENTRY}[main][0] → Config[main][0]`);
	});

	it('notices a difference (the comparison itself works)', () => {
		const changed = structuredClone(worker);
		const crm = changed.nodes.find((node) => node.name === 'Create CRM record');
		if (!crm) throw new Error('no Create CRM record node in 04');
		crm.parameters.method = 'PUT';
		expect(workerPart(changed).nodes).not.toEqual(workerPart(dispatcher).nodes);
		const rewired = structuredClone(worker);
		rewired.connections['Call AI'].main[1] = [];
		expect(workerPart(rewired).connections).not.toEqual(workerPart(dispatcher).connections);
		const moved = structuredClone(worker);
		for (const node of moved.nodes) {
			node.id = `${node.id}-x`;
			node.position = [0, 0];
		}
		expect(workerPart(moved)).toEqual(workerPart(worker));
	});
});
