import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * The bundled templates read as JSON, for unit tests that run their Code nodes' scripts and
 * their expressions on items shaped as n8n gives them, without an n8n.
 */
export const WORKFLOWS = resolve(__dirname, '..', '..', 'workflows');

export interface TemplateNode {
	name: string;
	type: string;
	parameters: Record<string, unknown>;
	[key: string]: unknown;
}

export interface Template {
	nodes: TemplateNode[];
	connections: Record<string, { main: Array<Array<{ node: string }> | null> }>;
	settings: Record<string, unknown>;
}

export function load(file: string): Template {
	return JSON.parse(readFileSync(join(WORKFLOWS, file), 'utf8')) as Template;
}

export function node(template: Template, name: string): TemplateNode {
	const found = template.nodes.find((candidate) => candidate.name === name);
	if (!found) throw new Error(`no node "${name}"`);
	return found;
}

/** The nodes each output of `name` leads to. */
export function targets(template: Template, name: string): string[][] {
	return (template.connections[name]?.main ?? []).map((output) =>
		(output ?? []).map((target) => target.node),
	);
}

/**
 * An n8n expression (`={{ … }}`) evaluated with `$json`, and with `$('Node')` reading the paired
 * item of an earlier node from `upstream` (node name → that item's JSON).
 */
export function evaluate(
	expression: unknown,
	$json: unknown,
	upstream: Record<string, unknown> = {},
): unknown {
	const match = /^=\{\{([\s\S]*)\}\}$/.exec(String(expression));
	if (!match) throw new Error(`not an expression: ${String(expression)}`);
	const $ = (name: string) => {
		if (!(name in upstream)) throw new Error(`the test gives no item of node "${name}"`);
		return { item: { json: upstream[name] }, first: () => ({ json: upstream[name] }) };
	};
	return new Function('$json', '$', `return (${match[1]});`)($json, $);
}
