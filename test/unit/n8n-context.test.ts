import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { JobComplete } from '../../nodes/JobComplete/JobComplete.node';
import { JobEnqueue } from '../../nodes/JobEnqueue/JobEnqueue.node';
import { JobStatus } from '../../nodes/JobStatus/JobStatus.node';
import {
	NodeContext,
	credentialFor,
	routeToErrorOutput,
	webhookItem,
} from '../helpers/n8n-context';

/** The harness must resolve parameters as n8n does, or node tests prove nothing. */
describe('test harness: parameters as n8n resolves them', () => {
	it('applies defaults and evaluates default expressions against each item', () => {
		const ctx = new NodeContext(new JobComplete(), {
			items: [
				{ job_id: 'job-a', attempt_id: 'att-a' },
				{ job_id: 'job-b', attempt_id: 'att-b' },
			],
		});
		expect(ctx.node.parameters).toMatchObject({
			jobId: '={{ $json.job_id }}',
			outcome: 'succeeded',
			resultSource: 'item',
			options: {},
		});
		const fn = ctx.context as IExecuteFunctions;
		expect(fn.getNodeParameter('jobId', 0)).toBe('job-a');
		expect(fn.getNodeParameter('attemptId', 1)).toBe('att-b');
		expect(fn.getNodeParameter('outcome', 1)).toBe('succeeded');
	});

	it('drops parameters hidden by displayOptions, so the node sees its fallback', () => {
		const ctx = new NodeContext(new JobComplete(), { parameters: { httpStatus: 503 } });
		expect(ctx.node.parameters).not.toHaveProperty('httpStatus');
		expect(ctx.context.getNodeParameter('httpStatus', 0, 0)).toBe(0);
		expect(() => ctx.context.getNodeParameter('httpStatus', 0)).toThrow(
			'Could not get parameter "httpStatus"',
		);
		// An expression in the controlling parameter keeps dependent parameters (n8n cannot know).
		const dynamic = new NodeContext(new JobComplete(), {
			parameters: { outcome: '={{ $json.outcome }}', httpStatus: 503 },
		});
		expect(dynamic.node.parameters.httpStatus).toBe(503);
	});

	it('returns collections as objects with the expressions inside resolved', () => {
		const ctx = new NodeContext(new JobEnqueue(), {
			parameters: {
				options: {
					priority: '={{ $json.p }}',
					correlationId: '={{ "c-" + $json.id }}',
					statusUrlBase: '/status',
				},
			},
			items: [{ p: 7, id: 'x' }],
		});
		expect(ctx.context.getNodeParameter('options', 0, {})).toEqual({
			priority: 7,
			correlationId: 'c-x',
			statusUrlBase: '/status',
		});
		// The stored parameters keep the expressions.
		expect((ctx.node.parameters.options as Record<string, unknown>).priority).toBe(
			'={{ $json.p }}',
		);
	});

	it("resolves Job Status's default job id and token from a webhook query or a Job Enqueue item", () => {
		const ctx = new NodeContext(new JobStatus(), {
			items: [
				webhookItem({}, {}, { query: { job_id: 'from-query', token: 'tq' } }),
				{ job_id: 'from-item', status_token: 'ti' },
			],
		});
		expect([
			ctx.context.getNodeParameter('jobId', 0),
			ctx.context.getNodeParameter('token', 0),
		]).toEqual(['from-query', 'tq']);
		expect([
			ctx.context.getNodeParameter('jobId', 1),
			ctx.context.getNodeParameter('token', 1),
		]).toEqual(['from-item', 'ti']);
	});

	it('models continueOnFail, workflow, execution id and credentials like n8n-core', async () => {
		expect(new NodeContext(new JobEnqueue()).context.continueOnFail()).toBe(false);
		expect(
			new NodeContext(new JobEnqueue(), { onError: 'stopWorkflow' }).context.continueOnFail(),
		).toBe(false);
		expect(
			new NodeContext(new JobEnqueue(), {
				onError: 'continueRegularOutput',
			}).context.continueOnFail(),
		).toBe(true);
		expect(
			new NodeContext(new JobEnqueue(), {
				onError: 'continueErrorOutput',
			}).context.continueOnFail(),
		).toBe(true);
		expect(
			new NodeContext(new JobEnqueue(), { continueOnFail: true }).context.continueOnFail(),
		).toBe(true);
		const ctx = new NodeContext(new JobEnqueue(), {
			workflowId: 'wf-9',
			executionId: 'ex-9',
			credential: credentialFor('postgres://u:p%40ss@db:6000/app', 'djt_x'),
		});
		expect(ctx.context.getWorkflow()).toEqual({
			id: 'wf-9',
			name: 'Node test workflow',
			active: false,
		});
		expect(ctx.context.getExecutionId()).toBe('ex-9');
		expect(await ctx.context.getCredentials('durableJobsPostgresApi')).toEqual({
			host: 'db',
			port: 6000,
			database: 'app',
			user: 'u',
			password: 'p@ss',
			ssl: 'disable',
			schema: 'djt_x',
			maxConnections: 20,
			autoMigrate: true,
		});
		await expect(ctx.context.getCredentials('postgres')).rejects.toThrow(
			/does not have any credentials of type "postgres"/,
		);
		expect(
			() => (ctx.context as unknown as { helpers: { httpRequest: unknown } }).helpers.httpRequest,
		).toThrow(/does not model this.helpers.httpRequest/);
		expect(() => ctx.context.getWorkflowStaticData('node')).toThrow(
			/does not model IExecuteFunctions.getWorkflowStaticData/,
		);
		ctx.context.logger.warn('hello', { a: 1 });
		expect(ctx.logs).toEqual([{ level: 'warn', message: 'hello', metadata: { a: 1 } }]);
	});
});

describe('test harness: n8n error-output routing', () => {
	const inputs: INodeExecutionData[] = [0, 1, 2, 3].map((n) => ({ json: { n, original: true } }));

	it('moves error items from every regular output to the last output, merging the input JSON', () => {
		const raw: INodeExecutionData[][] = [
			[
				{ json: { ok: 0 }, pairedItem: { item: 0 } },
				{
					json: { error: 'bad', code: 'x' },
					error: new Error('bad') as never,
					pairedItem: { item: 1 },
				},
			],
			[
				{ json: { error: 'only error' }, pairedItem: { item: 2 } },
				{ json: { error: 'not only', extra: 1 }, pairedItem: { item: 3 } },
			],
		];
		const [first, second, errors] = routeToErrorOutput(raw, 3, inputs);
		expect(first).toEqual([{ json: { ok: 0 }, pairedItem: { item: 0 } }]);
		// An item whose JSON has more than error/message/details and no .error is a regular item.
		expect(second).toEqual([{ json: { error: 'not only', extra: 1 }, pairedItem: { item: 3 } }]);
		expect(errors.map((item) => item.json)).toEqual([
			{ n: 1, original: true, error: 'bad', code: 'x' },
			{ n: 2, original: true, error: 'only error' },
		]);
		expect(errors.map((item) => item.pairedItem)).toEqual([{ item: 1 }, { item: 2 }]);
		// The input to routing is not changed.
		expect(raw[0]).toHaveLength(2);
	});
});
