import { readdirSync } from 'node:fs';

import {
	WORKFLOWS,
	condition,
	evaluate,
	load,
	node,
	targets,
	type Template,
} from '../helpers/templates';

/**
 * How the bundled templates call other services and start their Worker, read from the workflow
 * JSON: the HTTP Request nodes' redirect setting, and the polling Dispatcher's (11) answer to a
 * Worker it cannot start. test/e2e/editor-import.test.ts runs the latter in a real n8n.
 */

const templates: Array<[string, Template]> = readdirSync(WORKFLOWS)
	.filter((file) => file.endsWith('.json'))
	.sort()
	.map((file) => [file, load(file)]);

describe('nodes of this package in the templates', () => {
	const packageNodes = templates.flatMap(([file, template]) =>
		template.nodes
			.filter((candidate) => candidate.type.startsWith('n8n-nodes-durable-jobs.'))
			.map((packageNode) => [`${file}: ${packageNode.name}`, packageNode] as const),
	);

	// n8n refuses to publish a workflow with a node that has no credential; import:credentials
	// gives the bundled credential this id, and the editor's import replaces an unknown one.
	it.each(packageNodes)('%s names the Durable Jobs credential', (_name, packageNode) => {
		expect(packageNode.credentials).toEqual({
			durableJobsPostgresApi: { id: 'DurableJobsCred1', name: 'Durable Jobs' },
		});
	});
});

describe('HTTP Request nodes of the templates', () => {
	const requests = templates.flatMap(([file, template]) =>
		template.nodes
			.filter((candidate) => candidate.type === 'n8n-nodes-base.httpRequest')
			.map((request) => [`${file}: ${request.name}`, request] as const),
	);

	it('there are some (the AI and CRM calls, the relays, the alert)', () => {
		expect(requests.length).toBeGreaterThanOrEqual(8);
	});

	// Followed, a POST redirected with 301/302/303 is sent again as a GET: a login page or an
	// http → https hop then answers 200, which the job, the event or the delivery would take for
	// success. Not followed, the 3xx reaches the template, which fails it (classify.ts).
	it.each(requests)('%s does not follow redirects', (_name, request) => {
		const options = request.parameters.options as {
			redirect?: { redirect?: { followRedirects?: unknown } };
		};
		expect(options.redirect?.redirect?.followRedirects).toBe(false);
	});
});

describe('Dispatcher (polling, 11): a Worker it cannot start', () => {
	const polling = load('11-dispatcher-polling.json');

	it("Run Worker's failure releases the job and returns to the loop; its success returns to the loop", () => {
		const run = node(polling, 'Run Worker');
		// Not "Continue (using error output)": with it, n8n 2.40 starts the Worker with no input.
		expect(run.onError).toBe('continueRegularOutput');
		expect(targets(polling, 'Run Worker')).toEqual([['Run Worker failed?']]);
		const failed = condition(polling, 'Run Worker failed?');
		// n8n's item for a failure is { error } alone; a started Worker hands on the job's item.
		const startedItem = { job_id: 'j', attempt_id: 'a', payload: {} };
		expect(evaluate(failed, { error: 'Workflow does not exist' })).toBe(true);
		expect(evaluate(failed, startedItem)).toBe(false);
		expect(targets(polling, 'Run Worker failed?')).toEqual([
			['Release: Worker not started'],
			['One job at a time'],
		]);
		const release = node(polling, 'Release: Worker not started');
		expect(release.type).toBe('n8n-nodes-durable-jobs.jobComplete');
		expect(release.parameters).toMatchObject({
			outcome: 'release',
			jobId: "={{ $('One job at a time').item.json.job_id }}",
			attemptId: "={{ $('One job at a time').item.json.attempt_id }}",
			options: { retryAfterSeconds: 60 },
		});
		// Released or not (Lease Lost: another attempt owns the job), the loop takes the next job.
		expect(targets(polling, 'Release: Worker not started')).toEqual([
			['One job at a time'],
			['One job at a time'],
		]);
	});

	it('after the loop, the execution fails when a job was released, and only then', () => {
		const [done, loop] = targets(polling, 'One job at a time');
		expect(loop).toEqual(['Run Worker']);
		expect(done).toEqual(['Worker not started?']);
		const check = node(polling, 'Worker not started?');
		const { conditions } = check.parameters.conditions as {
			conditions: Array<{ leftValue: string; operator: { type: string; operation: string } }>;
		};
		expect(conditions).toEqual([
			expect.objectContaining({
				leftValue: "={{ $('Release: Worker not started').isExecuted }}",
				operator: expect.objectContaining({ type: 'boolean', operation: 'true' }),
			}),
		]);
		expect(targets(polling, 'Worker not started?')).toEqual([['Stop: Worker not started'], []]);
		const stop = node(polling, 'Stop: Worker not started');
		expect(stop.type).toBe('n8n-nodes-base.stopAndError');
		expect(stop.parameters.errorMessage).toMatch(
			/^Run Worker could not start the Worker workflow .*released.*due again in 60 s without using an attempt\. Check that "Durable Jobs: Worker" exists, is not archived and is published/,
		);
	});
});
