import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { errorJson } from '../../nodes/shared/errors';
import { classifyDatabaseError } from '../../src/core/errors';

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

/** The expression of the If node `name`'s one condition (the helpers here read no other kind). */
export function condition(template: Template, name: string): string {
	const { conditions } = node(template, name).parameters.conditions as {
		conditions: Array<{ leftValue: string }>;
	};
	if (conditions.length !== 1)
		throw new Error(`If node "${name}" has ${conditions.length} conditions`);
	return conditions[0].leftValue;
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

/** A node parameter as n8n reads it: an expression evaluated (see `evaluate`), anything else as it is. */
export function parameterValue(
	parameter: unknown,
	$json: unknown,
	upstream: Record<string, unknown> = {},
): unknown {
	if (typeof parameter !== 'string' || !/^=\{\{[\s\S]*\}\}$/.test(parameter)) return parameter;
	return evaluate(parameter, $json, upstream);
}

/** The response headers a Respond to Webhook node sets, by name. */
export function responseHeaders(respond: TemplateNode): Record<string, string> {
	const options = respond.parameters.options as {
		responseHeaders?: { entries: Array<{ name: string; value: string }> };
	};
	return Object.fromEntries(
		(options.responseHeaders?.entries ?? []).map((entry) => [entry.name, entry.value]),
	);
}

/** The error item a node of this package puts out for a driver error (code and message). */
export function driverErrorItem(error: {
	code?: string;
	message?: unknown;
}): Record<string, unknown> {
	return errorJson(classifyDatabaseError(Object.assign(new Error(String(error.message)), error)));
}

/** The error item a node of this package puts out for what `work` throws (it must throw). */
export function thrownErrorItem(work: () => unknown): Record<string, unknown> {
	try {
		work();
	} catch (error) {
		return errorJson(error);
	}
	throw new Error('it did not throw');
}

/** The 415 problem+json the receiver (01) and the event intake (06) answer to an XML body. */
export const XML_BODY_REFUSED = {
	type: 'https://www.npmjs.com/package/n8n-nodes-durable-jobs#errors',
	title: 'Unsupported media type',
	status: 415,
	detail: 'Content-Type: must be application/json (got "application/xml")',
	errors: [{ field: 'Content-Type', message: 'must be application/json (got "application/xml")' }],
};
