import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { NodeHelpers, type INodeParameters, type INodeType } from 'n8n-workflow';

import { DurableJobsPostgresApi } from '../../credentials/DurableJobsPostgresApi.credentials';
import { IdempotencyCheck } from '../../nodes/IdempotencyCheck/IdempotencyCheck.node';
import { JobComplete } from '../../nodes/JobComplete/JobComplete.node';
import { JobEnqueue } from '../../nodes/JobEnqueue/JobEnqueue.node';
import { JobLease } from '../../nodes/JobLease/JobLease.node';
import { JobStatus } from '../../nodes/JobStatus/JobStatus.node';
import { OutboxWrite } from '../../nodes/OutboxWrite/OutboxWrite.node';
import { testDurableJobsConnection } from '../../nodes/shared/credentialTest';
import { NodeContext, PACKAGE_NAME } from '../helpers/n8n-context';

const root = path.resolve(__dirname, '../..');

const NODES: Array<{ folder: string; displayName: string; name: string; create: () => INodeType }> =
	[
		{
			folder: 'JobEnqueue',
			displayName: 'Job Enqueue',
			name: 'jobEnqueue',
			create: () => new JobEnqueue(),
		},
		{
			folder: 'JobLease',
			displayName: 'Job Lease',
			name: 'jobLease',
			create: () => new JobLease(),
		},
		{
			folder: 'JobComplete',
			displayName: 'Job Complete',
			name: 'jobComplete',
			create: () => new JobComplete(),
		},
		{
			folder: 'IdempotencyCheck',
			displayName: 'Idempotency Check',
			name: 'idempotencyCheck',
			create: () => new IdempotencyCheck(),
		},
		{
			folder: 'OutboxWrite',
			displayName: 'Outbox Write',
			name: 'outboxWrite',
			create: () => new OutboxWrite(),
		},
		{
			folder: 'JobStatus',
			displayName: 'Job Status',
			name: 'jobStatus',
			create: () => new JobStatus(),
		},
	];

/** The required parameters n8n reports as missing for a node with these parameters. */
function missingParameters(nodeType: INodeType, parameters: INodeParameters = {}): string[] {
	const { node } = new NodeContext(nodeType, { parameters });
	const issues = NodeHelpers.getNodeParametersIssues(
		nodeType.description.properties,
		node,
		nodeType.description,
	);
	return Object.keys(issues?.parameters ?? {}).sort();
}

function outputNames(
	nodeType: INodeType,
	parameters: INodeParameters = {},
	onError?: 'continueErrorOutput',
): string[] {
	return new NodeContext(nodeType, { parameters, onError }).outputNames();
}

describe.each(NODES)('$displayName node description', ({ folder, displayName, name, create }) => {
	const nodeType = create();
	const { description } = nodeType;

	it('has the fixed display name, a camelCase internal name and the n8n file layout', () => {
		expect(description.displayName).toBe(displayName);
		expect(description.defaults.name).toBe(displayName);
		expect(description.name).toBe(name);
		expect(description.name).toMatch(/^[a-z][a-zA-Z]*$/);
		// Folder, file and class follow n8n's convention: nodes/JobEnqueue/JobEnqueue.node.ts exports JobEnqueue.
		expect(nodeType.constructor.name).toBe(folder);
		expect(folder.charAt(0).toLowerCase() + folder.slice(1)).toBe(name);
		expect(existsSync(path.join(root, 'nodes', folder, `${folder}.node.ts`))).toBe(true);
	});

	it('is a programmatic, versioned, tool-usable node with a subtitle and a description', () => {
		expect(typeof nodeType.execute).toBe('function');
		// Job Complete 2 changed a default (HTTP Status); the others are at their first version.
		if (name === 'jobComplete') {
			expect(description.version).toEqual([1, 2]);
			expect(description.defaultVersion).toBe(2);
		} else expect(description.version).toBe(1);
		expect(description.usableAsTool).toBe(true);
		expect(description.subtitle).toMatch(/^=/);
		expect(description.description.length).toBeGreaterThan(20);
		expect(description.inputs).toEqual(['main']);
	});

	it('has light and dark SVG icons that exist next to the node', () => {
		const icon = description.icon as { light: string; dark: string };
		expect(icon.light).toMatch(/^file:.+\.svg$/);
		expect(icon.dark).toMatch(/^file:.+\.dark\.svg$/);
		for (const file of [icon.light, icon.dark]) {
			const iconPath = path.join(root, 'nodes', folder, file.slice('file:'.length));
			expect(existsSync(iconPath), iconPath).toBe(true);
			expect(readFileSync(iconPath, 'utf8')).toMatch(/<svg[\s>]/);
		}
		expect(icon.light).not.toBe(icon.dark);
	});

	it('has a codex file naming the published node type', () => {
		const codexPath = path.join(root, 'nodes', folder, `${folder}.node.json`);
		const codex = JSON.parse(readFileSync(codexPath, 'utf8')) as {
			node: string;
			nodeVersion: string;
			codexVersion: string;
			categories: string[];
		};
		expect(codex.node).toBe(`${PACKAGE_NAME}.${name}`);
		expect(codex.nodeVersion).toBe('1.0');
		expect(codex.codexVersion).toBe('1.0');
		expect(codex.categories.length).toBeGreaterThan(0);
	});

	it('declares the one credential with the connection test it implements', () => {
		expect(description.credentials).toEqual([
			{ name: 'durableJobsPostgresApi', required: true, testedBy: 'durableJobsConnectionTest' },
		]);
		const methods = nodeType.methods as { credentialTest?: Record<string, unknown> };
		expect(methods.credentialTest?.durableJobsConnectionTest).toBe(testDurableJobsConnection);
	});

	it('loads through n8n-workflow with default parameters', () => {
		const parameters = NodeHelpers.getNodeParameters(
			description.properties,
			{},
			true,
			false,
			{ typeVersion: 1 },
			description,
		);
		expect(parameters).not.toBeNull();
		// Every top-level parameter that is shown by default has its default value.
		for (const property of description.properties) {
			if (
				!NodeHelpers.displayParameter(
					parameters!,
					property,
					{ typeVersion: 1 } as never,
					description,
				)
			)
				continue;
			expect(parameters, property.name).toHaveProperty(property.name);
		}
		// And the Workflow constructor (which n8n uses when it loads a workflow) accepts the node.
		const context = new NodeContext(nodeType);
		expect(context.node.parameters).toEqual(parameters);
		expect(context.outputNames().length).toBeGreaterThan(0);
	});

	it('has unique parameter names per display condition and a description or hint for options', () => {
		for (const property of description.properties) {
			expect(property.displayName.length, property.name).toBeGreaterThan(0);
			if (property.type === 'options') {
				const values = (property.options as Array<{ value: unknown }>).map(
					(option) => option.value,
				);
				expect(values, property.name).toContain(property.default);
				expect(new Set(values).size).toBe(values.length);
			}
		}
	});
});

describe('required parameters n8n flags with default parameters', () => {
	it('nodes with a usable zero-config default report no issues', () => {
		// Receiver pattern: queue "default", payload and key from the webhook item.
		expect(missingParameters(new JobEnqueue())).toEqual([]);
		expect(missingParameters(new JobLease())).toEqual([]);
		expect(missingParameters(new JobLease(), { operation: 'extendLease' })).toEqual([]);
		// Job ID / Attempt ID default to expressions pointing at the lease item.
		expect(missingParameters(new JobComplete())).toEqual([]);
		expect(missingParameters(new JobStatus())).toEqual([]);
		expect(missingParameters(new JobStatus(), { operation: 'stats' })).toEqual([]);
		expect(missingParameters(new IdempotencyCheck(), { operation: 'complete' })).toEqual([]);
	});

	it('flags the parameters a builder must fill in', () => {
		expect(missingParameters(new IdempotencyCheck())).toEqual(['key']);
		expect(missingParameters(new IdempotencyCheck(), { keySource: 'fields' })).toEqual([
			'keyFields',
		]);
		expect(missingParameters(new IdempotencyCheck(), { keySource: 'payloadHash' })).toEqual([]);
		expect(
			missingParameters(new IdempotencyCheck(), { key: '={{ $json.id }}', lateEventGuard: true }),
		).toEqual(['entityKey']);
		expect(missingParameters(new OutboxWrite())).toEqual(['eventType']);
		expect(
			missingParameters(new OutboxWrite(), { eventType: 'order.paid', eventIdSource: 'custom' }),
		).toEqual(['eventId']);
		expect(
			missingParameters(new JobStatus(), { operation: 'requeue', selectBy: 'filter' }),
		).toEqual(['filterQueue']);
		expect(missingParameters(new JobEnqueue(), { queue: '' })).toEqual(['queue']);
	});
});

describe('output routing: named outputs per operation', () => {
	it('Job Enqueue and Outbox Write have one output', () => {
		expect(outputNames(new JobEnqueue())).toEqual(['main']);
		expect(outputNames(new OutboxWrite())).toEqual(['main']);
	});

	it('Job Lease: Leased / Empty, and Extended / Lease Lost for Extend Lease', () => {
		expect(outputNames(new JobLease())).toEqual(['Leased', 'Empty']);
		expect(outputNames(new JobLease(), { operation: 'lease' })).toEqual(['Leased', 'Empty']);
		expect(outputNames(new JobLease(), { operation: 'extendLease' })).toEqual([
			'Extended',
			'Lease Lost',
		]);
	});

	it('Job Complete: Completed / Lease Lost', () => {
		expect(outputNames(new JobComplete())).toEqual(['Completed', 'Lease Lost']);
	});

	it('Idempotency Check: New / Duplicate / In Progress / Conflict, plus Stale with the late-event guard', () => {
		expect(outputNames(new IdempotencyCheck())).toEqual([
			'New',
			'Duplicate',
			'In Progress',
			'Conflict',
		]);
		expect(outputNames(new IdempotencyCheck(), { lateEventGuard: true, entityKey: 'x' })).toEqual([
			'New',
			'Duplicate',
			'In Progress',
			'Conflict',
			'Stale',
		]);
		expect(outputNames(new IdempotencyCheck(), { operation: 'complete' })).toEqual([
			'Settled',
			'Claim Lost',
		]);
		expect(outputNames(new IdempotencyCheck(), { operation: 'fail' })).toEqual([
			'Settled',
			'Claim Lost',
		]);
		// The guard toggle only exists for Claim; a leftover value must not add Stale elsewhere.
		expect(
			outputNames(new IdempotencyCheck(), { operation: 'complete', lateEventGuard: true }),
		).toEqual(['Settled', 'Claim Lost']);
	});

	it('Job Status: Found / Not Found for Get, one output otherwise', () => {
		expect(outputNames(new JobStatus())).toEqual(['Found', 'Not Found']);
		for (const operation of ['stats', 'requeue', 'cancel', 'purge', 'unknownOutcomes']) {
			expect(outputNames(new JobStatus(), { operation }), operation).toEqual(['main']);
		}
	});

	it('with "On Error: Continue (using error output)" n8n adds an Error output last', () => {
		expect(outputNames(new JobEnqueue(), {}, 'continueErrorOutput')).toEqual(['Success', 'Error']);
		expect(outputNames(new JobComplete(), {}, 'continueErrorOutput')).toEqual([
			'Completed',
			'Lease Lost',
			'Error',
		]);
		expect(
			outputNames(new JobLease(), { operation: 'extendLease' }, 'continueErrorOutput'),
		).toEqual(['Extended', 'Lease Lost', 'Error']);
	});
});

describe('credential', () => {
	const credential = new DurableJobsPostgresApi();

	it('is its own credential type with a masked password, SSL modes, schema, pool size and auto-migrate', () => {
		expect(credential.name).toBe('durableJobsPostgresApi');
		expect(credential.displayName).toBe('Durable Jobs Postgres');
		const byName = Object.fromEntries(
			credential.properties.map((property) => [property.name, property]),
		);
		expect(Object.keys(byName)).toEqual(
			expect.arrayContaining([
				'host',
				'port',
				'database',
				'user',
				'password',
				'ssl',
				'caCertificate',
				'schema',
				'maxConnections',
				'autoMigrate',
			]),
		);
		expect(byName.password.typeOptions?.password).toBe(true);
		expect(byName.caCertificate.typeOptions?.password).toBe(true);
		expect((byName.ssl.options as Array<{ value: string }>).map((option) => option.value)).toEqual([
			'disable',
			'require',
			'verify',
		]);
		expect(byName.schema.default).toBe('durable_jobs');
		expect(byName.autoMigrate.default).toBe(true);
		const defaults = NodeHelpers.getNodeParameters(
			credential.properties,
			{},
			true,
			false,
			null,
			null,
		);
		expect(defaults).toMatchObject({
			host: 'localhost',
			port: 5432,
			ssl: 'disable',
			schema: 'durable_jobs',
			autoMigrate: true,
		});
	});

	it('has light and dark icons that exist', () => {
		const icon = credential.icon as { light: string; dark: string };
		for (const file of [icon.light, icon.dark]) {
			expect(existsSync(path.join(root, 'credentials', file.slice('file:'.length))), file).toBe(
				true,
			);
		}
	});
});

describe('package.json n8n block', () => {
	const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
		name: string;
		keywords: string[];
		files: string[];
		n8n: { n8nNodesApiVersion: number; nodes: string[]; credentials: string[] };
	};

	it('lists every node and the credential, each built from an existing TypeScript source', () => {
		expect(pkg.name).toBe(PACKAGE_NAME);
		expect(pkg.keywords).toContain('n8n-community-node-package');
		expect(pkg.n8n.n8nNodesApiVersion).toBe(1);
		expect(pkg.files).toContain('dist');
		// The trigger node has its own description test (trigger-description.test.ts).
		expect(pkg.n8n.nodes.map((file) => path.basename(path.dirname(file))).sort()).toEqual(
			[...NODES.map((node) => node.folder), 'JobTrigger'].sort(),
		);
		for (const file of [...pkg.n8n.nodes, ...pkg.n8n.credentials]) {
			expect(file).toMatch(/^dist\/.+\.js$/);
			// tsc maps <rootDir>/x.ts to dist/x.js (rootDir ".").
			const source = path.join(root, file.replace(/^dist\//, '').replace(/\.js$/, '.ts'));
			expect(existsSync(source), source).toBe(true);
		}
		expect(pkg.n8n.credentials).toEqual(['dist/credentials/DurableJobsPostgresApi.credentials.js']);
	});

	it('the build copies icons and codex files next to the compiled nodes', () => {
		const tsconfig = readFileSync(path.join(root, 'tsconfig.json'), 'utf8');
		expect(tsconfig).toMatch(/"rootDir":\s*"\."/);
		expect(tsconfig).toMatch(/"outDir":\s*"\.\/dist"/);
		execFileSync('npx', ['gulp', 'build:icons'], { cwd: root, stdio: 'pipe' });
		for (const folder of [
			'JobEnqueue',
			'JobLease',
			'JobComplete',
			'IdempotencyCheck',
			'OutboxWrite',
			'JobStatus',
			'JobTrigger',
		]) {
			const name = folder[0].toLowerCase() + folder.slice(1);
			for (const file of [`${name}.svg`, `${name}.dark.svg`, `${folder}.node.json`]) {
				expect(
					existsSync(path.join(root, 'dist', 'nodes', folder, file)),
					`dist/nodes/${folder}/${file}`,
				).toBe(true);
			}
		}
		expect(existsSync(path.join(root, 'dist', 'credentials', 'durableJobs.svg'))).toBe(true);
		expect(existsSync(path.join(root, 'dist', 'credentials', 'durableJobs.dark.svg'))).toBe(true);
	});
});
