import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { NodeHelpers, type INodeType } from 'n8n-workflow';

import { JobTrigger } from '../../nodes/JobTrigger/JobTrigger.node';
import { testDurableJobsConnection } from '../../nodes/shared/credentialTest';
import { PACKAGE_NAME } from '../helpers/n8n-context';
import { TriggerContext } from '../helpers/trigger-context';

const root = path.resolve(__dirname, '../..');

describe('Job Trigger node description', () => {
	const nodeType = new JobTrigger();
	const { description } = nodeType;

	it('is a trigger node named jobTrigger, with no input and one output, in the n8n file layout', () => {
		expect(description.displayName).toBe('Job Trigger');
		expect(description.defaults.name).toBe('Job Trigger');
		expect(description.name).toBe('jobTrigger');
		expect(description.group).toEqual(['trigger']);
		expect(description.inputs).toEqual([]);
		expect(description.outputs).toEqual(['main']);
		expect(description.version).toBe(1);
		expect(description.subtitle).toMatch(/^=/);
		expect(typeof nodeType.trigger).toBe('function');
		expect((nodeType as INodeType).execute).toBeUndefined();
		const packageJson = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
			n8n: { nodes: string[] };
		};
		expect(packageJson.n8n.nodes).toContain('dist/nodes/JobTrigger/JobTrigger.node.js');
	});

	it('has light and dark icons, a codex file and the one credential with its test', () => {
		const icon = description.icon as { light: string; dark: string };
		for (const file of [icon.light, icon.dark]) {
			const iconPath = path.join(root, 'nodes', 'JobTrigger', file.slice('file:'.length));
			expect(readFileSync(iconPath, 'utf8')).toMatch(/<svg[\s>]/);
		}
		const codexPath = path.join(root, 'nodes', 'JobTrigger', 'JobTrigger.node.json');
		expect(existsSync(codexPath)).toBe(true);
		expect(JSON.parse(readFileSync(codexPath, 'utf8'))).toMatchObject({
			node: `${PACKAGE_NAME}.jobTrigger`,
			nodeVersion: '1.0',
			codexVersion: '1.0',
		});
		expect(description.credentials).toEqual([
			{ name: 'durableJobsPostgresApi', required: true, testedBy: 'durableJobsConnectionTest' },
		]);
		expect(
			(nodeType.methods as { credentialTest: Record<string, unknown> }).credentialTest
				.durableJobsConnectionTest,
		).toBe(testDurableJobsConnection);
	});

	it('loads with its defaults: queue "default", 10 in flight, one execution per job, LISTEN, test run shows a job', () => {
		const { node } = new TriggerContext(nodeType);
		expect(node.parameters).toMatchObject({
			queue: 'default',
			maxJobsInFlight: 10,
			leaseSeconds: 300,
			concurrencyLimit: 0,
			emit: 'perJob',
			options: {},
		});
		expect(
			NodeHelpers.getNodeParametersIssues(description.properties, node, description),
		).toBeNull();
		const options = description.properties.find((property) => property.name === 'options')!
			.options as Array<{ name: string; default: unknown }>;
		expect(Object.fromEntries(options.map((option) => [option.name, option.default]))).toEqual({
			backstopSeconds: 30,
			includeMetadata: true,
			pollIntervalSeconds: 0,
			testRun: 'sample',
		});
	});

	it('says in the node how to run behind PgBouncer in transaction mode and what a test run does', () => {
		const notice = description.properties.find((property) => property.type === 'notice')!;
		expect(notice.displayName).toMatch(/PgBouncer in transaction mode.*Poll Interval/);
		expect(notice.displayName).toMatch(/without leasing it/);
	});
});
