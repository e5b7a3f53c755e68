import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import {
	NodeConnectionTypes,
	NodeHelpers,
	NodeOperationError,
	deepCopy,
	type IDataObject,
	type INode,
	type INodeParameters,
	type INodeProperties,
	type INodePropertyOptions,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import { IdempotencyCheck } from '../../nodes/IdempotencyCheck/IdempotencyCheck.node';
import { JobComplete } from '../../nodes/JobComplete/JobComplete.node';
import { JobLease } from '../../nodes/JobLease/JobLease.node';
import { JobStatus } from '../../nodes/JobStatus/JobStatus.node';
import { COMPLETE_MARKER } from '../../scripts/lib/cache';
import { n8nInstallDir } from '../../scripts/lib/n8n/install';
import { NodeContext, type NodeContextOptions } from '../helpers/n8n-context';

type ToolConverter = (description: INodeTypeDescription) => INodeTypeDescription;

/**
 * What n8n 2.40 does to a `usableAsTool` node to offer it to an AI agent (n8n's
 * tool-generation convertNodeToAiTool, applied to a deep copy with `usableAsTool.replacements`
 * merged in): the type name gets the suffix "Tool", which is what `@tool` in displayOptions
 * tests; the node gets no main input and one ai_tool output; "Tool Description" parameters
 * are added.
 */
const toolVariantLikeN8n: ToolConverter = (source) => {
	const replacements =
		typeof source.usableAsTool === 'object' ? source.usableAsTool.replacements : {};
	const description = { ...deepCopy(source), ...replacements } as INodeTypeDescription;
	delete description.usableAsTool;
	const toolDescription: INodeProperties = {
		displayName: 'Description',
		name: 'toolDescription',
		type: 'string',
		default: description.description,
		required: true,
	};
	return {
		...description,
		name: `${description.name}Tool`,
		displayName: `${description.displayName} Tool`,
		inputs: [],
		outputs: [NodeConnectionTypes.AiTool],
		properties: [toolDescription, ...description.properties],
	};
};

/** n8n's own converter, when the n8n that the end-to-end tests use is installed here. */
function n8nConverter(): ToolConverter | undefined {
	// The folder `npm run n8n:install` fills (the same cache rules), for the n8n these tests name.
	const installDir = n8nInstallDir('2.40.7');
	const file = path.join(installDir, 'node_modules/n8n/dist/tool-generation/ai-tools.js');
	if (!existsSync(path.join(installDir, COMPLETE_MARKER)) || !existsSync(file)) return undefined;
	const { convertNodeToAiTool } = createRequire(__filename)(file) as {
		convertNodeToAiTool: (item: { description: INodeTypeDescription }) => {
			description: INodeTypeDescription;
		};
	};
	return (source) => convertNodeToAiTool({ description: deepCopy(source) }).description;
}

/**
 * Without n8n in the cache (`npm run n8n:install`, which `npm test` runs first), the second
 * converter's tests are listed as skipped, so the number of tests stays the same either way.
 */
const CONVERTERS: Array<[string, ToolConverter | undefined]> = [
	['as n8n 2.40 builds it', toolVariantLikeN8n],
	["by n8n 2.40's own converter", n8nConverter()],
];

/** Parameters as the editor shows them for a node of this description, and the node itself. */
function shown(description: INodeTypeDescription, parameters: INodeParameters = {}) {
	const node = { typeVersion: 1, parameters } as unknown as INode;
	const values = NodeHelpers.getNodeParameters(
		description.properties,
		parameters,
		true,
		false,
		node,
		description,
	)!;
	const visible = description.properties.filter((property) =>
		NodeHelpers.displayParameter(values, property, node, description),
	);
	return {
		names: visible.map((property) => property.name),
		operations: visible
			.filter((property) => property.name === 'operation')
			.flatMap((property) =>
				((property.options ?? []) as INodePropertyOptions[]).map((option) => String(option.value)),
			),
	};
}

for (const [label, converter] of CONVERTERS)
	(converter ? describe : describe.skip)(`Job Status as an AI agent tool, ${label}`, () => {
		// A skipped block is still collected: it converts with the stand-in, and none of it runs.
		const convert = converter ?? toolVariantLikeN8n;
		const regular = new JobStatus();
		const tool = convert(regular.description);
		const toolType: INodeType = { description: tool, execute: regular.execute };

		it('is the jobStatusTool variant n8n generates', () => {
			expect(tool.name).toBe('jobStatusTool');
			expect(tool.outputs).toEqual([NodeConnectionTypes.AiTool]);
		});

		it('offers reads and requeue by ID, never Purge, Cancel or Requeue by filter', () => {
			expect(shown(tool).operations.sort()).toEqual(['get', 'requeue', 'stats', 'unknownOutcomes']);
			const requeue = shown(tool, { operation: 'requeue', selectBy: 'filter' });
			expect(requeue.names).not.toContain('selectBy');
			expect(requeue.names).not.toContain('filterQueue');
			expect(requeue.names).not.toContain('confirm');
			expect(requeue.names).toContain('requeueJobIds');
			// The node in a workflow keeps every operation, the dashboard's included.
			expect(shown(regular.description).operations.sort()).toEqual([
				'cancel',
				'dashboardAction',
				'dashboardPage',
				'get',
				'jobStory',
				'listJobs',
				'purge',
				'queueOverview',
				'requeue',
				'stats',
				'unknownOutcomes',
			]);
			expect(shown(regular.description, { operation: 'requeue' }).names).toContain('selectBy');
		});

		it.each([
			[{ operation: 'purge' }, /"purge" is not available when Job Status is an AI agent's tool/],
			[{ operation: 'cancel' }, /"cancel" is not available/],
			[{ operation: 'dashboardAction' }, /"dashboardAction" is not available/],
		])('refuses %j at run time, e.g. in an imported workflow', async (parameters, message) => {
			const error = await new NodeContext(toolType, { parameters })
				.run()
				.catch((caught: unknown) => caught);
			expect(error).toBeInstanceOf(NodeOperationError);
			expect((error as NodeOperationError).message).toMatch(message);
			expect((error as NodeOperationError).description).toMatch(/Field: operation/);
		});

		it('drops a filter an imported workflow sets: the tool can only requeue the jobs it names', async () => {
			// n8n's Workflow drops parameters the description hides, so Select By never reaches the
			// tool variant, which then requeues by Job IDs (none here: n8n itself refuses the run)
			// and ignores the filter.
			const ctx = new NodeContext(toolType, {
				parameters: { operation: 'requeue', selectBy: 'filter', filterQueue: 'q', confirm: true },
				items: [{}],
			});
			expect(ctx.node.parameters).not.toHaveProperty('selectBy');
			const error = await ctx.run().catch((caught: unknown) => caught);
			expect((error as Error).message).toMatch(/Parameter "Job IDs" is required/);
		});

		it('runs the operations it offers (they get as far as the missing credential here)', async () => {
			for (const parameters of [
				{ operation: 'get' },
				{ operation: 'stats' },
				{ operation: 'unknownOutcomes' },
				{ operation: 'requeue' },
			]) {
				const error = await new NodeContext(toolType, {
					parameters,
					items: [{ job_id: '0190d1a2-0000-7000-8000-000000000000' }],
				})
					.run()
					.catch((caught: unknown) => caught);
				expect((error as Error).message, parameters.operation).toMatch(/credential/);
			}
		});
	});

async function failure(nodeType: INodeType, options: NodeContextOptions) {
	const error = await new NodeContext(nodeType, options).run().catch((caught: unknown) => caught);
	expect(error).toBeInstanceOf(NodeOperationError);
	return error as NodeOperationError;
}

describe('defaults that read the previous item: the error and the notice show what works', () => {
	it('Job Complete after a node that replaced the item', async () => {
		const error = await failure(new JobComplete(), { items: [{ statusCode: 200 }] });
		expect(error.message).toBe('jobId: "undefined" is not a valid id');
		expect(error.description).toContain(
			"The default {{ $json.job_id }} reads the item right before this node; with another node in between, use {{ $('Job Lease').item.json.job_id }}",
		);
		expect(error.description).toMatch(/Field: jobId$/);
		const attempt = await failure(new JobComplete(), {
			items: [{ job_id: '0190d1a2-0000-7000-8000-000000000000' }],
		});
		expect(attempt.description).toContain("{{ $('Job Lease').item.json.attempt_id }}");
	});

	it('Extend Lease after a node that replaced the item', async () => {
		const error = await failure(new JobLease(), {
			parameters: { operation: 'extendLease' },
			items: [{ body: {} }],
		});
		expect(error.description).toContain("{{ $('Job Lease').item.json.job_id }}");
	});

	it('Idempotency Check Complete and Fail / Release after a node that replaced the item', async () => {
		for (const operation of ['complete', 'fail']) {
			const error = await failure(new IdempotencyCheck(), {
				parameters: { operation },
				items: [{ statusCode: 201 }],
			});
			expect(error.message, operation).toMatch(/^key: /);
			expect(error.description, operation).toContain(
				"{{ $('Idempotency Check').item.json.idempotency.key }}",
			);
			const claim = await failure(new IdempotencyCheck(), {
				parameters: { operation },
				items: [{ idempotency: { key: 'evt-1', claim_id: 'not-a-claim' } }],
			});
			expect(claim.description, operation).toContain(
				"{{ $('Idempotency Check').item.json.idempotency.claim_id }}",
			);
		}
	});

	it.each([
		[new JobComplete(), {}, "{{ $('Job Lease').item.json.job_id }}"],
		[new JobLease(), { operation: 'extendLease' }, "{{ $('Job Lease').item.json.attempt_id }}"],
		[
			new IdempotencyCheck(),
			{ operation: 'complete' },
			"{{ $('Idempotency Check').item.json.idempotency.key }}",
		],
		[
			new IdempotencyCheck(),
			{ operation: 'fail' },
			"{{ $('Idempotency Check').item.json.idempotency.claim_id }}",
		],
	])('%# the node shows a notice with the working expression', (nodeType, parameters, text) => {
		const { description } = nodeType as INodeType;
		const notices = description.properties.filter((property) => property.type === 'notice');
		const visible = shown(description, parameters as IDataObject as INodeParameters).names;
		const notice = notices.find((property) => visible.includes(property.name));
		expect(notice?.displayName).toContain(text);
	});

	it('the notices of Job Complete and Extend Lease name both nodes whose items carry the ids', () => {
		for (const [nodeType, parameters] of [
			[new JobComplete(), {}],
			[new JobLease(), { operation: 'extendLease' }],
		] as const) {
			const visible = shown(nodeType.description, parameters).names;
			const notice = nodeType.description.properties.find(
				(property) => property.type === 'notice' && visible.includes(property.name),
			);
			expect(notice?.displayName).toMatch(/with the name of your Job Lease or Job Trigger node/);
		}
	});

	it('Job Lease and Claim show no such notice', () => {
		for (const [nodeType, parameters] of [
			[new JobLease(), {}],
			[new IdempotencyCheck(), {}],
		] as const) {
			const visible = shown(nodeType.description, parameters).names;
			expect(visible.some((name) => name.endsWith('Notice'))).toBe(false);
		}
	});
});

describe('subtitles name the operation as the list does', () => {
	function subtitle(nodeType: INodeType, parameters: INodeParameters): unknown {
		const ctx = new NodeContext(nodeType, { parameters });
		return ctx.workflow.expression.getSimpleParameterValue(
			ctx.node,
			nodeType.description.subtitle!,
			'internal',
			{},
		);
	}

	it('Job Status', () => {
		const expected: Record<string, string> = {
			cancel: 'Cancel',
			get: 'Get',
			purge: 'Purge',
			stats: 'Queue Stats',
			requeue: 'Requeue',
			unknownOutcomes: 'Unknown Outcomes',
		};
		for (const [operation, name] of Object.entries(expected))
			expect(subtitle(new JobStatus(), { operation })).toBe(name);
		expect(subtitle(new JobStatus(), {})).toBe('Get');
	});

	it('Idempotency Check', () => {
		expect(subtitle(new IdempotencyCheck(), { operation: 'fail', scope: 'events' })).toBe(
			'Fail / Release in events',
		);
		expect(subtitle(new IdempotencyCheck(), { key: 'x' })).toBe('Claim in default');
	});
});
