import {
	NodeConnectionTypes,
	NodeOperationError,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
} from 'n8n-workflow';

import { JobComplete } from '../../nodes/JobComplete/JobComplete.node';
import { JobEnqueue } from '../../nodes/JobEnqueue/JobEnqueue.node';
import { JobStatus } from '../../nodes/JobStatus/JobStatus.node';
import { NodeContext, credentialFor, strayLogs, webhookItem } from '../helpers/n8n-context';

/** A node with two outputs ("First", "Second") whose execute() is the test's. */
function probeNode(
	execute: (this: IExecuteFunctions) => Promise<INodeExecutionData[][]>,
): INodeType {
	return {
		description: {
			displayName: 'Harness Probe',
			name: 'harnessProbe',
			group: ['transform'],
			version: 1,
			description: 'A node for the tests of the harness',
			defaults: { name: 'Harness Probe' },
			inputs: [NodeConnectionTypes.Main],
			outputs: [NodeConnectionTypes.Main, NodeConnectionTypes.Main],
			outputNames: ['First', 'Second'],
			credentials: [{ name: 'durableJobsPostgresApi', required: true }],
			properties: [],
		},
		execute,
	};
}

/** The harness must hand nodes n8n's own parameters, or node tests prove nothing. */
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
		const {
			maxConnections: _maxConnections,
			autoMigrate: _autoMigrate,
			...stored
		} = credentialFor('postgres://u:p%40ss@db:6000/app', 'djt_x');
		const ctx = new NodeContext(new JobEnqueue(), {
			workflowId: 'wf-9',
			executionId: 'ex-9',
			credential: stored,
		});
		expect(ctx.context.getWorkflow()).toEqual({
			id: 'wf-9',
			name: 'Node test workflow',
			active: false,
		});
		expect(ctx.context.getExecutionId()).toBe('ex-9');
		// The credential as stored, with the credential type's defaults for what it leaves out.
		expect(await ctx.context.getCredentials('durableJobsPostgresApi')).toEqual({
			host: 'db',
			port: 6000,
			database: 'app',
			user: 'u',
			password: 'p@ss',
			ssl: 'disable',
			schema: 'djt_x',
			maxConnections: 10,
			autoMigrate: true,
			preparedStatements: true,
			durableLeases: false,
		});
		await expect(ctx.context.getCredentials('postgres')).rejects.toThrow(
			/does not have any credentials of type "postgres"/,
		);
		await expect(
			new NodeContext(new JobEnqueue()).context.getCredentials('durableJobsPostgresApi'),
		).rejects.toThrow(/the test gave none/);
		// What n8n's server would supply and the harness does not model throws, naming itself.
		expect(() => ctx.context.getSignedResumeUrl()).toThrow(
			/does not model InstanceSettings.hmacSignatureSecret/,
		);
		expect(() => ctx.context.getCredentialsProperties('durableJobsPostgresApi')).toThrow(
			/does not model ICredentialsHelper.getCredentialsProperties/,
		);
		// What a node logs during its run is recorded on its context.
		const logging = new NodeContext(
			probeNode(async function () {
				this.logger.warn('hello', { a: 1 });
				return [[{ json: {}, pairedItem: { item: 0 } }], []];
			}),
		);
		await logging.run();
		expect(logging.logs).toEqual([{ level: 'warn', message: 'hello', metadata: { a: 1 } }]);
		expect(strayLogs).toEqual([]);
	});
});

describe('test harness: n8n error-output routing', () => {
	const inputs: INodeExecutionData[] = [0, 1, 2, 3].map((n) => ({ json: { n, original: true } }));

	it('moves error items from every regular output to the last output, merging the input JSON', async () => {
		const ctx = new NodeContext(
			probeNode(async function () {
				return [
					[
						{ json: { ok: 0 }, pairedItem: { item: 0 } },
						{
							json: { error: 'bad', code: 'x' },
							error: new NodeOperationError(this.getNode(), 'bad'),
							pairedItem: { item: 1 },
						},
					],
					[
						{ json: { error: 'only error' }, pairedItem: { item: 2 } },
						{ json: { error: 'not only', extra: 1 }, pairedItem: { item: 3 } },
					],
				];
			}),
			{ items: inputs, onError: 'continueErrorOutput' },
		);
		const result = await ctx.run();
		expect(result.outputNames).toEqual(['First', 'Second', 'Error']);
		expect(result.output('First').map((item) => item.json)).toEqual([{ ok: 0 }]);
		// An item whose JSON has more than error/message/details and no .error is a regular item.
		expect(result.output('Second').map((item) => item.json)).toEqual([
			{ error: 'not only', extra: 1 },
		]);
		expect(result.output('Error').map((item) => item.json)).toEqual([
			// An item with an `error` property: n8n keeps only its message.
			{ error: 'bad' },
			{ n: 2, original: true, error: 'only error' },
		]);
		expect(result.routing()).toEqual({ First: [0], Second: [3], Error: [1, 2] });
	});
});
