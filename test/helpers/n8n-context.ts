/**
 * Runs a node the way n8n runs it: n8n-core's WorkflowExecute executes a two-node workflow,
 * "Input" (hands over the test's items) → the node under test, and the test reads the node's
 * run data, output by output. Parameter defaults and expressions, continue-on-fail, the error
 * output, pairedItem and error normalisation are therefore n8n's own.
 *
 * What the harness supplies is what n8n's server process would: the node-type registry (the two
 * nodes), the credential (ICredentialsHelper.getDecrypted returns the test credential with the
 * credential type's defaults), the execution's additional data and lifecycle hooks, a logger
 * that records what nodes log, and the instance settings. Every one of these is strict: a
 * member the engine or a node reads that is not modelled here throws, naming itself, so a node
 * that starts to rely on more of n8n is noticed instead of silently getting `undefined`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

import { Logger } from '@n8n/backend-common';
import { Container } from '@n8n/di';
import {
	BinaryDataConfig,
	ExecuteContext,
	ExecutionLifecycleHooks,
	InstanceSettings,
	WorkflowExecute,
} from 'n8n-core';
import {
	NodeHelpers,
	Workflow,
	createRunExecutionData,
	type ICredentialDataDecryptedObject,
	type ICredentialsHelper,
	type IDataObject,
	type IExecuteData,
	type IExecuteFunctions,
	type INode,
	type INodeCredentialsDetails,
	type INodeExecutionData,
	type INodeOutputConfiguration,
	type INodeParameters,
	type INodeType,
	type INodeTypes,
	type IRun,
	type IRunExecutionData,
	type ITaskData,
	type IWorkflowExecuteAdditionalData,
	type NodeConnectionType,
	type WorkflowExecuteMode,
} from 'n8n-workflow';

import { DurableJobsPostgresApi } from '../../credentials/DurableJobsPostgresApi.credentials';
import { databaseUrl } from './db';
import { credentialFor, pairedIndexes } from './n8n-items';

export { credentialFor, pairedIndexes, webhookItem } from './n8n-items';

export type OnError = 'stopWorkflow' | 'continueRegularOutput' | 'continueErrorOutput';

export const PACKAGE_NAME = 'n8n-nodes-durable-jobs';

const INPUT_NODE = 'Input';
const INPUT_NODE_TYPE = 'test.input';
const CREDENTIAL = new DurableJobsPostgresApi();
const CREDENTIAL_ID = 'cred-1';

export interface LogEntry {
	level: 'debug' | 'info' | 'warn' | 'error';
	message: string;
	metadata?: unknown;
}

export interface NodeContextOptions {
	/** Parameters as a workflow JSON stores them (only what differs from the defaults). */
	parameters?: INodeParameters | IDataObject;
	/** Input items; plain objects are wrapped as `{ json }`. Default: one empty item. */
	items?: Array<INodeExecutionData | IDataObject>;
	onError?: OnError;
	/** Legacy flag, used by n8n when `onError` is not set. */
	continueOnFail?: boolean;
	/** Data getCredentials returns for the node's credential type. */
	credential?: ICredentialDataDecryptedObject;
	nodeName?: string;
	workflowId?: string;
	workflowName?: string;
	executionId?: string;
	mode?: WorkflowExecuteMode;
	/** The workflow's time zone setting (n8n's default when left out). */
	timezone?: string;
	/** The node's version (default: the latest the node has). */
	typeVersion?: number;
	/**
	 * The name of the node that outputs `items` (default "Input"): a template's expressions read
	 * an earlier node's item by its name, e.g. `$('Claim event').item.json`.
	 */
	inputNodeName?: string;
}

/** Members a test runner, `await` or n8n's deep copies probe on any object; they must not throw. */
const PROBED = new Set([
	'then',
	'toJSON',
	'asymmetricMatch',
	'$$typeof',
	'nodeType',
	'constructor',
	'@@__IMMUTABLE_ITERABLE__@@',
	'@@__IMMUTABLE_RECORD__@@',
	'_isMockFunction',
]);

export function strict<T extends object>(target: T, what: string): T {
	return new Proxy(target, {
		get(object, property, receiver) {
			if (typeof property === 'symbol' || property in object || PROBED.has(property))
				return Reflect.get(object, property, receiver);
			throw new Error(
				`The test harness does not model ${what}.${property}; extend test/helpers/n8n-context.ts if a node needs it`,
			);
		},
	});
}

// --- The process-wide part of n8n: the DI container ---------------------------------------
//
// n8n-core takes three services from @n8n/di's Container while it runs a node; the container
// would build n8n's real ones on first use, which is more than a test wants:
// - Logger (NodeExecutionContext.logger, and the ErrorReporter that WorkflowExecute hands
//   node errors to): a winston logger writing to the console. Here: one that records.
// - InstanceSettings (every node context reads it when it is created; used for the instance
//   id and signed URLs): creates ~/.n8n/config with an encryption key. Here: strict, the id only.
// - BinaryDataConfig (WorkflowExecute asks it how to store binary output): reads the storage
//   folder from InstanceSettings. Here: mode "default", binary data kept in the item.
// Everything else n8n-core takes from the container (ErrorReporter, its tracing) it builds on
// these. @n8n/di and @n8n/backend-common must be the copies n8n-core uses, or these would
// land in another container, under another Logger class.

/** The run whose node is logging: each run() executes inside its own store. */
const currentRun = new AsyncLocalStorage<NodeContext>();

/** Log lines written outside any run (for example by a pool error after the run ended). */
export const strayLogs: LogEntry[] = [];

function recordingLogger(): Logger {
	const write =
		(level: LogEntry['level']) =>
		(message: string, metadata?: unknown): void => {
			(currentRun.getStore()?.logs ?? strayLogs).push({ level, message, metadata });
		};
	const logger = {
		error: write('error'),
		warn: write('warn'),
		info: write('info'),
		debug: write('debug'),
		scoped: () => logger,
	};
	return strict(logger, 'Logger') as unknown as Logger;
}

for (const shared of ['@n8n/di', '@n8n/backend-common'])
	if (require.resolve(shared) !== require.resolve(shared, { paths: [require.resolve('n8n-core')] }))
		throw new Error(
			`${shared} resolves to another copy than the one n8n-core uses; keep its version in package.json equal to n8n-core's`,
		);
Container.set(Logger, recordingLogger());
Container.set(
	BinaryDataConfig,
	strict({ mode: 'default' }, 'BinaryDataConfig') as BinaryDataConfig,
);
Container.set(
	InstanceSettings,
	strict({ instanceId: 'test-instance' }, 'InstanceSettings') as unknown as InstanceSettings,
);

// --- One execution --------------------------------------------------------------------------

function toItems(items: Array<INodeExecutionData | IDataObject> | undefined): INodeExecutionData[] {
	const list = items ?? [{ json: {} }];
	return list.map((item) => (isExecutionData(item) ? item : { json: item }));
}

function isExecutionData(item: INodeExecutionData | IDataObject): item is INodeExecutionData {
	return (
		typeof item === 'object' &&
		item !== null &&
		typeof (item as INodeExecutionData).json === 'object' &&
		(item as INodeExecutionData).json !== null &&
		Object.keys(item).every((key) => ['json', 'binary', 'pairedItem', 'error'].includes(key))
	);
}

/** The workflow's first node: it outputs the test's items, as a trigger would. */
function inputNodeType(items: INodeExecutionData[]): INodeType {
	return {
		description: {
			displayName: 'Test Input',
			name: INPUT_NODE_TYPE,
			group: ['trigger'],
			version: 1,
			description: 'Outputs the items of the test',
			defaults: { name: INPUT_NODE },
			inputs: [],
			outputs: ['main'],
			properties: [],
		},
		async execute() {
			return [structuredClone(items)];
		},
	};
}

/** The test credential as n8n's CredentialsHelper.getDecrypted hands it to a node. */
function credentialsHelper(context: NodeContext): ICredentialsHelper {
	const helper = {
		isCredentialUsableByNode: () => true,
		getDecrypted: async (
			_additionalData: IWorkflowExecuteAdditionalData,
			nodeCredentials: INodeCredentialsDetails,
			type: string,
		): Promise<ICredentialDataDecryptedObject> => {
			if (type !== CREDENTIAL.name || nodeCredentials.id !== CREDENTIAL_ID)
				throw new Error(`The test harness has no credential ${nodeCredentials.id} of type ${type}`);
			const data = context.credential;
			if (!data)
				throw new Error(
					'The node asked for its credential, but the test gave none (NodeContextOptions.credential)',
				);
			for (const [key, value] of Object.entries(data))
				if (typeof value === 'string' && value.startsWith('='))
					throw new Error(
						`The test harness does not resolve expressions in credentials (${key}: ${value})`,
					);
			// n8n fills in what the stored credential leaves out from the credential type's defaults.
			return NodeHelpers.getNodeParameters(
				CREDENTIAL.properties,
				structuredClone(data) as INodeParameters,
				true,
				false,
				null,
				null,
			) as ICredentialDataDecryptedObject;
		},
	};
	return strict(helper, 'ICredentialsHelper') as unknown as ICredentialsHelper;
}

/**
 * What n8n's server process passes to WorkflowExecute for one execution. The members read
 * without being used (optional in n8n's types) are listed as undefined, so anything else a node
 * or the engine reads is caught by `strict`.
 */
function additionalData(context: NodeContext): IWorkflowExecuteAdditionalData {
	const data: Partial<IWorkflowExecuteAdditionalData> = {
		executionId: context.executionId,
		credentialsHelper: credentialsHelper(context),
		hooks: new ExecutionLifecycleHooks(context.mode, context.executionId, {
			id: context.workflow.id,
			name: context.workflow.name ?? '',
			active: false,
			isArchived: false,
			nodes: Object.values(context.workflow.nodes),
			connections: context.workflow.connectionsBySourceNode,
			createdAt: new Date(),
			updatedAt: new Date(),
			activeVersionId: null,
		}),
		currentNodeExecutionIndex: 0,
		variables: {},
		restartExecutionId: undefined,
		executionTimeoutTimestamp: undefined,
		currentNodeParameters: undefined,
		evalLlmMockHandler: undefined,
		executionContext: undefined,
		userId: undefined,
		encryptedRunnerIdentity: undefined,
		evaluationRunId: undefined,
		restApiUrl: undefined,
		// Expressions can read these ($execution.resumeUrl, $execution.resumeFormUrl).
		instanceBaseUrl: 'http://localhost:5678/',
		webhookWaitingBaseUrl: 'http://localhost:5678/webhook-waiting',
		formWaitingBaseUrl: 'http://localhost:5678/form-waiting',
		'data-table': undefined,
		'dynamic-credentials': undefined,
	};
	return strict(data, 'IWorkflowExecuteAdditionalData') as IWorkflowExecuteAdditionalData;
}

export interface RunResult {
	/** The node's outputs as n8n passed them on (its run data), in output order. */
	outputs: INodeExecutionData[][];
	/** Output display names, including "Error" with continueErrorOutput. */
	outputNames: string[];
	/** Items of the output with this display name. */
	output(name: string): INodeExecutionData[];
	/** `{ [outputName]: pairedItem indexes }` — where each input item ended up. */
	routing(): Record<string, number[]>;
	/** The node's run data as WorkflowExecute recorded it. */
	taskData: ITaskData;
	/** The whole execution as WorkflowExecute returned it. */
	run: IRun;
}

/**
 * One node after an "Input" node in a workflow that n8n-core executes. Create one per
 * execution (as n8n does); `run()` executes the workflow and returns the node's outputs.
 */
export class NodeContext {
	readonly workflow: Workflow;
	/** The node as n8n holds it: parameters with defaults applied. */
	readonly node: INode;
	readonly items: INodeExecutionData[];
	/** What the node logged through n8n's logger during run(). */
	readonly logs: LogEntry[] = [];
	readonly executionId: string;
	readonly mode: WorkflowExecuteMode;
	readonly credential: ICredentialDataDecryptedObject | undefined;
	/** The name of the node that outputs the items. */
	readonly inputName: string;
	/** What the node under test returned from execute() and what it threw, per call. */
	private readonly returned: INodeExecutionData[][][] = [];
	private readonly thrown: unknown[] = [];
	private executeFunctions: IExecuteFunctions | undefined;

	constructor(
		readonly nodeType: INodeType,
		options: NodeContextOptions = {},
	) {
		const description = nodeType.description;
		const type = `${PACKAGE_NAME}.${description.name}`;
		const node: INode = {
			id: 'node-under-test',
			name: options.nodeName ?? description.defaults.name ?? description.displayName,
			type,
			typeVersion:
				options.typeVersion ??
				(Array.isArray(description.version)
					? Math.max(...description.version)
					: description.version),
			position: [250, 0],
			parameters: structuredClone(options.parameters ?? {}) as INodeParameters,
			credentials: { [CREDENTIAL.name]: { id: CREDENTIAL_ID, name: 'Durable Jobs Postgres' } },
			...(options.onError ? { onError: options.onError } : {}),
			...(options.continueOnFail !== undefined ? { continueOnFail: options.continueOnFail } : {}),
		};
		this.inputName = options.inputNodeName ?? INPUT_NODE;
		const input: INode = {
			id: 'input',
			name: this.inputName,
			type: INPUT_NODE_TYPE,
			typeVersion: 1,
			position: [0, 0],
			parameters: {},
		};
		this.items = toItems(options.items);
		const types: Record<string, INodeType> = {
			[INPUT_NODE_TYPE]: inputNodeType(this.items),
			[type]: this.recording(nodeType),
		};
		const nodeTypes: INodeTypes = {
			getByName: (name) => lookup(types, name),
			getByNameAndVersion: (name) => lookup(types, name),
			getKnownTypes: () => ({}),
		};
		// The Workflow constructor applies NodeHelpers.getNodeParameters(…, returnDefaults: true,
		// returnNoneDisplayed: false) to every node, exactly as n8n does when it loads a workflow.
		this.workflow = new Workflow({
			id: options.workflowId ?? 'wf-test-1',
			name: options.workflowName ?? 'Node test workflow',
			nodes: [input, node],
			connections: {
				[this.inputName]: { main: [[{ node: node.name, type: 'main', index: 0 }]] },
			},
			active: false,
			nodeTypes,
			settings: {
				executionOrder: 'v1',
				...(options.timezone !== undefined ? { timezone: options.timezone } : {}),
			},
		});
		this.node = this.workflow.nodes[node.name];
		this.executionId = options.executionId ?? `exec-${Math.floor(Math.random() * 1e9)}`;
		this.mode = options.mode ?? 'manual';
		this.credential = options.credential;
	}

	/** The node type as the registry hands it to n8n: the same, with execute() observed. */
	private recording(nodeType: INodeType): INodeType {
		const returned = this.returned;
		const thrown = this.thrown;
		const execute = nodeType.execute!;
		return Object.create(nodeType, {
			execute: {
				value: async function (this: IExecuteFunctions) {
					try {
						const result = (await execute.call(this)) as INodeExecutionData[][];
						// Copied: n8n adds the error output and pairedItems to these arrays and items.
						returned.push(result.map((items) => items.map((item) => ({ ...item }))));
						return result;
					} catch (error) {
						thrown.push(error);
						throw error;
					}
				},
			},
		}) as INodeType;
	}

	/**
	 * The IExecuteFunctions n8n-core gives the node for this input (an ExecuteContext over the
	 * same workflow and additional data as run()), for tests that call node code directly.
	 */
	get context(): IExecuteFunctions {
		if (!this.executeFunctions) {
			const runExecutionData: IRunExecutionData = createRunExecutionData();
			const inputData = { main: [this.items] };
			const executeData: IExecuteData = {
				node: this.node,
				data: inputData,
				source: { main: [{ previousNode: this.inputName }] },
			};
			this.executeFunctions = new ExecuteContext(
				this.workflow,
				this.node,
				additionalData(this),
				this.mode,
				runExecutionData,
				0,
				this.items,
				inputData,
				executeData,
				[],
			);
		}
		return this.executeFunctions;
	}

	/** The node's outputs as n8n computes them (dynamic `outputs` expressions resolved, error output added). */
	outputs(): Array<NodeConnectionType | INodeOutputConfiguration> {
		return NodeHelpers.getNodeOutputs(this.workflow, this.node, this.nodeType.description);
	}

	outputNames(): string[] {
		const names = this.nodeType.description.outputNames ?? [];
		return this.outputs().map((output, index) =>
			typeof output === 'string'
				? (names[index] ?? output)
				: (output.displayName ?? names[index] ?? output.type),
		);
	}

	/**
	 * Executes the workflow and returns the node's outputs as n8n passed them on. When the node
	 * stops the workflow, rejects with the error the node threw (n8n's run data keeps a copy).
	 * Also checks two invariants n8n relies on, on what the node returned before n8n touched
	 * it: one array per (non-error) output, and every item names the input item it came from.
	 */
	async run(): Promise<RunResult> {
		const engine = new WorkflowExecute(additionalData(this), this.mode);
		const run = await currentRun.run(
			this,
			async () =>
				await engine.run({
					workflow: this.workflow,
					startNode: this.workflow.nodes[this.inputName],
				}),
		);
		const taskData = run.data.resultData.runData[this.node.name]?.[0];
		const failure = run.data.resultData.error;
		if (failure || !taskData) {
			const thrown = this.thrown.at(-1);
			if (thrown !== undefined && failure?.message === (thrown as Error).message) throw thrown;
			throw new Error(
				`The workflow stopped before ${this.node.name} finished: ${failure?.message ?? 'no run data'}`,
				{ cause: failure },
			);
		}
		this.checkReturned();
		const outputNames = this.outputNames();
		const outputs = outputNames.map((_, index) => taskData.data?.main?.[index] ?? []);
		return {
			outputs,
			outputNames,
			output(name: string) {
				const index = outputNames.indexOf(name);
				if (index < 0)
					throw new Error(`No output named "${name}" (outputs: ${outputNames.join(', ')})`);
				return outputs[index];
			},
			routing() {
				return Object.fromEntries(
					outputNames.map((name, index) => [name, outputs[index].flatMap(pairedIndexes)]),
				);
			},
			taskData,
			run,
		};
	}

	private checkReturned(): void {
		const raw = this.returned.at(-1);
		if (!raw) return; // the node threw and n8n continued (continue on fail)
		const outputNames = this.outputNames();
		const regularOutputs =
			this.node.onError === 'continueErrorOutput' ? outputNames.length - 1 : outputNames.length;
		if (raw.length !== regularOutputs) {
			throw new Error(
				`${this.node.name} returned ${raw.length} output arrays but declares ${regularOutputs} outputs (${outputNames.join(', ')})`,
			);
		}
		raw.forEach((items, outputIndex) =>
			items.forEach((item, position) => {
				const paired = pairedIndexes(item);
				if (
					paired.length === 0 ||
					paired.some((index) => index < 0 || index >= this.items.length)
				) {
					throw new Error(
						`${this.node.name}: item ${position} of output ${outputNames[outputIndex]} has no valid pairedItem (${JSON.stringify(item.pairedItem)})`,
					);
				}
			}),
		);
	}
}

function lookup(types: Record<string, INodeType>, name: string): INodeType {
	const type = types[name];
	if (!type) throw new Error(`Unknown node type ${name}`);
	return type;
}

/**
 * For integration tests: contexts whose credential points at the test database and `schema`.
 * `run(new JobEnqueue(), { items })` executes the node once, as one n8n execution would.
 */
export function nodeRunner(schema: string, defaults: NodeContextOptions = {}) {
	const create = (nodeType: INodeType, options: NodeContextOptions = {}) =>
		new NodeContext(nodeType, {
			credential: credentialFor(databaseUrl(), schema),
			...defaults,
			...options,
		});
	return {
		create,
		run: async (nodeType: INodeType, options: NodeContextOptions = {}) =>
			await create(nodeType, options).run(),
	};
}
