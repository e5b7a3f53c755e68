/**
 * A realistic n8n execution context for calling a node's `execute()` outside n8n.
 *
 * What is real: the node's parameters are computed the way n8n's Workflow constructor does it
 * (NodeHelpers.getNodeParameters with defaults, hidden parameters dropped), expressions are
 * evaluated by n8n-workflow's own expression engine against the input items, the node's dynamic
 * `outputs` expression is resolved with NodeHelpers.getNodeOutputs, and "On Error: Continue
 * (using error output)" is post-processed like n8n-core's WorkflowExecute.handleNodeErrorOutput
 * (items that carry `.error` move from every main output to the extra last output, with the
 * paired input item's JSON merged in).
 *
 * What is simulated: credentials (built from DATABASE_URL and a schema), the logger (records
 * calls), workflow/execution ids. Any other IExecuteFunctions member throws when a node touches
 * it, so a node that starts relying on something the harness does not model is noticed.
 */
import {
	NodeHelpers,
	NodeOperationError,
	Workflow,
	type ICredentialDataDecryptedObject,
	type IDataObject,
	type IExecuteFunctions,
	type INode,
	type INodeExecutionData,
	type INodeOutputConfiguration,
	type INodeParameters,
	type INodeType,
	type INodeTypes,
	type IPairedItemData,
	type NodeConnectionType,
	type NodeParameterValueType,
	type WorkflowExecuteMode,
} from 'n8n-workflow';

import { databaseUrl } from './db';

export type OnError = 'stopWorkflow' | 'continueRegularOutput' | 'continueErrorOutput';

export const PACKAGE_NAME = 'n8n-nodes-durable-jobs';

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
}

/** Credential data of the Durable Jobs Postgres credential, from a postgres:// URL and a schema. */
export function credentialFor(
	url: string,
	schema: string,
	overrides: ICredentialDataDecryptedObject = {},
): ICredentialDataDecryptedObject {
	const parsed = new URL(url);
	return {
		host: parsed.hostname,
		port: Number(parsed.port || 5432),
		database: decodeURIComponent(parsed.pathname.slice(1) || 'postgres'),
		user: decodeURIComponent(parsed.username || process.env.USER || 'postgres'),
		password: decodeURIComponent(parsed.password),
		ssl: 'disable',
		schema,
		maxConnections: 20,
		autoMigrate: true,
		...overrides,
	};
}

/** Node types registry with just the nodes a test workflow holds. */
function nodeTypesFor(types: Record<string, INodeType>): INodeTypes {
	return {
		getByName: (name) => lookup(types, name),
		getByNameAndVersion: (name) => lookup(types, name),
		getKnownTypes: () => ({}),
	};
}

function lookup(types: Record<string, INodeType>, name: string): INodeType {
	const type = types[name];
	if (!type) throw new Error(`Unknown node type ${name}`);
	return type;
}

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

/** lodash.get for dotted paths, as n8n-core reads node parameters. */
function getPath(source: unknown, path: string): unknown {
	return path
		.split('.')
		.reduce<unknown>(
			(value, key) =>
				value !== null && typeof value === 'object' ? (value as IDataObject)[key] : undefined,
			source,
		);
}

/** n8n-core's cleanupParameterData: Luxon DateTimes returned by expressions become strings. */
function cleanupParameterData(value: unknown): unknown {
	if (value === null || typeof value !== 'object') return value;
	if ((value as { isLuxonDateTime?: boolean }).isLuxonDateTime === true) return String(value);
	if (Array.isArray(value)) return value.map(cleanupParameterData);
	for (const [key, entry] of Object.entries(value as IDataObject))
		(value as IDataObject)[key] = cleanupParameterData(entry) as IDataObject;
	return value;
}

/** Members a test runner or `await` may probe on any object; they must not throw. */
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

export interface RunResult {
	/** What execute() returned, untouched. */
	raw: INodeExecutionData[][];
	/** After n8n's error-output routing (same as raw unless onError is continueErrorOutput). */
	outputs: INodeExecutionData[][];
	/** Output display names, including "Error" with continueErrorOutput. */
	outputNames: string[];
	/** Items of the output with this display name. */
	output(name: string): INodeExecutionData[];
	/** `{ [outputName]: pairedItem indexes }` — where each input item ended up. */
	routing(): Record<string, number[]>;
}

/**
 * One node in a one-node workflow, with an IExecuteFunctions bound to it. Create one per
 * execution (as n8n does); `run()` executes the node and routes its output like n8n.
 */
export class NodeContext {
	readonly workflow: Workflow;
	/** The node as n8n holds it: parameters with defaults applied. */
	readonly node: INode;
	readonly items: INodeExecutionData[];
	readonly logs: LogEntry[] = [];
	readonly executionId: string;
	readonly context: IExecuteFunctions;
	private readonly mode: WorkflowExecuteMode;

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
			typeVersion: Array.isArray(description.version)
				? Math.max(...description.version)
				: description.version,
			position: [0, 0],
			parameters: structuredClone(options.parameters ?? {}) as INodeParameters,
			credentials: { durableJobsPostgresApi: { id: 'cred-1', name: 'Durable Jobs Postgres' } },
			...(options.onError ? { onError: options.onError } : {}),
			...(options.continueOnFail !== undefined ? { continueOnFail: options.continueOnFail } : {}),
		};
		// The Workflow constructor applies NodeHelpers.getNodeParameters(…, returnDefaults: true,
		// returnNoneDisplayed: false) to every node, exactly as n8n does when it loads a workflow.
		this.workflow = new Workflow({
			id: options.workflowId ?? 'wf-test-1',
			name: options.workflowName ?? 'Node test workflow',
			nodes: [node],
			connections: {},
			active: false,
			nodeTypes: nodeTypesFor({ [type]: nodeType }),
		});
		this.node = this.workflow.nodes[node.name];
		this.items = toItems(options.items);
		this.executionId = options.executionId ?? `exec-${Math.floor(Math.random() * 1e9)}`;
		this.mode = options.mode ?? 'manual';
		const credential = options.credential;

		const logger = Object.fromEntries(
			(['debug', 'info', 'warn', 'error'] as const).map((level) => [
				level,
				(message: string, metadata?: unknown) => void this.logs.push({ level, message, metadata }),
			]),
		);

		const context = {
			getInputData: (inputIndex = 0) => (inputIndex === 0 ? this.items : []),
			getNode: () => structuredClone(this.node),
			getNodeParameter: (
				name: string,
				itemIndex: number,
				fallback?: unknown,
				parameterOptions?: { rawExpressions?: boolean },
			) => this.parameter(name, itemIndex, fallback, parameterOptions),
			continueOnFail: () => {
				if (this.node.onError === undefined) return this.node.continueOnFail === true;
				return ['continueRegularOutput', 'continueErrorOutput'].includes(this.node.onError);
			},
			getCredentials: async (credentialType: string) => {
				const declared = (description.credentials ?? []).some(
					(entry) => entry.name === credentialType,
				);
				if (!declared || !this.node.credentials?.[credentialType]) {
					throw new NodeOperationError(
						this.node,
						`Node type "${this.node.type}" does not have any credentials of type "${credentialType}" set`,
						{ level: 'warning' },
					);
				}
				if (!credential)
					throw new NodeOperationError(this.node, 'Node does not have any credentials set', {
						level: 'warning',
					});
				return structuredClone(credential);
			},
			getWorkflow: () => ({
				id: this.workflow.id,
				name: this.workflow.name,
				active: this.workflow.active,
			}),
			getExecutionId: () => this.executionId,
			getMode: () => this.mode,
			getTimezone: () => this.workflow.timezone,
			logger: strict(logger, 'logger'),
			helpers: strict({}, 'this.helpers'),
		};
		this.context = strict(context, 'IExecuteFunctions') as unknown as IExecuteFunctions;
	}

	/** n8n-core's ExecuteContext.getNodeParameter: lodash get with fallback, then expressions. */
	parameter(
		name: string,
		itemIndex: number,
		fallback?: unknown,
		options: { rawExpressions?: boolean } = {},
	): NodeParameterValueType | object {
		let value = getPath(this.node.parameters, name);
		if (value === undefined) value = fallback;
		if (value === undefined) throw new Error(`Could not get parameter "${name}"`);
		if (options.rawExpressions) return value as NodeParameterValueType;
		try {
			const resolved = this.workflow.expression.getParameterValue(
				value as NodeParameterValueType,
				null,
				0,
				itemIndex,
				this.node.name,
				this.items,
				this.mode,
				{},
			);
			return cleanupParameterData(resolved) as NodeParameterValueType;
		} catch (error) {
			// As n8n-core does: the failing parameter is named in the error's context.
			const context = (error as { context?: IDataObject }).context;
			if (context) context.parameter = name;
			throw error;
		}
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

	async execute(): Promise<INodeExecutionData[][]> {
		const result = await this.nodeType.execute!.call(this.context);
		return result as INodeExecutionData[][];
	}

	/**
	 * Executes the node and returns its outputs as n8n would pass them on. Also checks two
	 * invariants n8n relies on: the node returns one array per (non-error) output, and every
	 * item names the input item it came from.
	 */
	async run(): Promise<RunResult> {
		const raw = await this.execute();
		const outputNames = this.outputNames();
		const errorOutput = this.node.onError === 'continueErrorOutput';
		const regularOutputs = errorOutput ? outputNames.length - 1 : outputNames.length;
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
		const outputs = normalizeNodeErrors(
			errorOutput
				? routeToErrorOutput(raw, outputNames.length, this.items)
				: raw.map((items) => [...items]),
		);
		return {
			raw,
			outputs,
			outputNames,
			output(name: string) {
				const index = outputNames.indexOf(name);
				if (index < 0)
					throw new Error(`No output named "${name}" (outputs: ${outputNames.join(', ')})`);
				return outputs[index] ?? [];
			},
			routing() {
				return Object.fromEntries(
					outputNames.map((name, index) => [name, (outputs[index] ?? []).flatMap(pairedIndexes)]),
				);
			},
		};
	}
}

export function pairedIndexes(item: INodeExecutionData): number[] {
	const paired = item.pairedItem;
	if (paired === undefined || paired === null) return [];
	if (typeof paired === 'number') return [paired];
	return (Array.isArray(paired) ? paired : [paired]).map((entry: IPairedItemData) => entry.item);
}

/**
 * n8n-core WorkflowExecute.handleNodeErrorOutput: with onError "continueErrorOutput", every item
 * that has `.error` (or whose JSON holds only error/message/details) moves from each regular main
 * output into the last (error) output, its JSON merged over the paired input item's JSON.
 */
export function routeToErrorOutput(
	raw: INodeExecutionData[][],
	mainOutputCount: number,
	inputItems: INodeExecutionData[],
): INodeExecutionData[][] {
	const outputs: INodeExecutionData[][] = raw.map((items) => [...items]);
	const errorItems: INodeExecutionData[] = [];
	for (let outputIndex = 0; outputIndex < mainOutputCount - 1; outputIndex++) {
		const successItems: INodeExecutionData[] = [];
		for (const item of outputs[outputIndex] ?? []) {
			const isError =
				item.error !== undefined ||
				(item.json.error !== undefined &&
					Object.keys(item.json).every((key) => ['error', 'message', 'details'].includes(key)));
			if (!isError) {
				successItems.push(item);
				continue;
			}
			const [paired] = pairedIndexes(item);
			const input = paired === undefined ? undefined : inputItems[paired];
			errorItems.push(input ? { ...item, json: { ...input.json, ...item.json } } : item);
		}
		outputs[outputIndex] = successItems;
	}
	outputs[mainOutputCount - 1] = errorItems;
	return outputs;
}

/**
 * n8n-core WorkflowExecute.normalizeNodeErrors, run on every node's output after the error
 * output routing: an item that carries an `error` property has its JSON replaced by
 * `{ error: message }`.
 */
export function normalizeNodeErrors(outputs: INodeExecutionData[][]): INodeExecutionData[][] {
	return outputs.map((items) =>
		items.map((item) =>
			item.error !== undefined ? { ...item, json: { error: item.error.message } } : item,
		),
	);
}

/** A Webhook node's output item for a JSON POST, as n8n 2.x produces it. */
export function webhookItem(
	body: IDataObject,
	headers: Record<string, string> = {},
	extra: { query?: IDataObject; webhookUrl?: string } = {},
): IDataObject {
	return {
		headers: {
			host: 'localhost:5678',
			'user-agent': 'curl/8.5.0',
			'content-type': 'application/json',
			accept: '*/*',
			...headers,
		},
		params: {},
		query: extra.query ?? {},
		body,
		webhookUrl: extra.webhookUrl ?? 'http://localhost:5678/webhook/jobs',
		executionMode: 'production',
	};
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
