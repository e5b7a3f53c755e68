/**
 * An n8n trigger context (ITriggerFunctions) for calling a trigger node's `trigger()` outside
 * n8n, modelled on n8n 2.40's TriggerContext and its activation:
 *
 * - parameters: the node's defaults applied by n8n-workflow's Workflow constructor, as n8n does
 *   when it loads a workflow; `getNodeParameter(name, fallback)` resolves expressions;
 * - `emit(data, responsePromise, donePromise)`: records an emission. A production emission's
 *   `donePromise` settles when the test says the execution ended (`finish`, or the `execution`
 *   callback the harness runs for every emission), as n8n settles it when the execution's
 *   post-execute promise does (queue mode included);
 * - manual mode ("Execute step"): as n8n-core's TriggersAndPollers does, the first emission
 *   becomes the test execution's trigger output, and its donePromise resolves at the end of that
 *   execution (`endManualExecution`); the closeFunction is called right after the output, as
 *   n8n-core's WorkflowExecute does;
 * - `activate()` / `deactivate()`: trigger() and its closeFunction, as n8n's activation and
 *   deactivation call them.
 *
 * Anything else the node touches on the context throws, so a node that starts relying on
 * something the harness does not model is noticed.
 */
import {
	Workflow,
	type ICredentialDataDecryptedObject,
	type IDataObject,
	type INode,
	type INodeExecutionData,
	type INodeType,
	type INodeTypes,
	type IRun,
	type ITriggerFunctions,
	type ITriggerResponse,
	type IWorkflowSettings,
	type NodeParameterValueType,
	type WorkflowActivateMode,
} from 'n8n-workflow';

import { credentialFor, PACKAGE_NAME, strict, type LogEntry } from './n8n-context';
import { databaseUrl } from './db';

interface Deferred<T> {
	promise: Promise<T>;
	resolve: (value: T) => void;
	reject: (error: Error) => void;
}

function deferred<T>(): Deferred<T> {
	let resolve!: (value: T) => void;
	let reject!: (error: Error) => void;
	const promise = new Promise<T>((res, rej) => {
		resolve = res;
		reject = rej;
	});
	return { promise, resolve, reject };
}

export interface Emission {
	items: INodeExecutionData[];
	/** Settles the emission's donePromise, as n8n does when the execution has finished. */
	finish(run?: Partial<IRun>): void;
	/** Rejects it, as n8n does when the execution could not run. */
	fail(error: Error): void;
	readonly finished: boolean;
}

export interface TriggerContextOptions {
	parameters?: IDataObject;
	credential?: ICredentialDataDecryptedObject;
	mode?: 'trigger' | 'manual';
	activation?: WorkflowActivateMode;
	workflowId?: string;
	workflowSettings?: IWorkflowSettings;
	/**
	 * Runs for every production emission, like the execution n8n starts; when it settles, the
	 * emission's donePromise resolves (or rejects). Without it, call `finish()` yourself.
	 */
	execution?: (items: INodeExecutionData[], emission: Emission) => Promise<void>;
}

export class TriggerContext {
	readonly workflow: Workflow;
	readonly node: INode;
	readonly logs: LogEntry[] = [];
	readonly emissions: Emission[] = [];
	readonly errors: Error[] = [];
	readonly context: ITriggerFunctions;
	private response: ITriggerResponse | undefined;
	private readonly manualOutput = deferred<INodeExecutionData[][]>();
	private manualDone: Deferred<IRun> | undefined;

	constructor(
		readonly nodeType: INodeType,
		readonly options: TriggerContextOptions = {},
	) {
		const description = nodeType.description;
		const type = `${PACKAGE_NAME}.${description.name}`;
		const node: INode = {
			id: 'trigger-under-test',
			name: description.defaults.name ?? description.displayName,
			type,
			typeVersion: 1,
			position: [0, 0],
			parameters: structuredClone(options.parameters ?? {}) as INode['parameters'],
			credentials: { durableJobsPostgresApi: { id: 'cred-1', name: 'Durable Jobs Postgres' } },
		};
		const nodeTypes: INodeTypes = {
			getByName: () => nodeType,
			getByNameAndVersion: () => nodeType,
			getKnownTypes: () => ({}),
		};
		this.workflow = new Workflow({
			id: options.workflowId ?? 'wf-trigger-1',
			name: 'Trigger test workflow',
			nodes: [node],
			connections: {},
			active: true,
			nodeTypes,
			settings: options.workflowSettings ?? {},
		});
		this.node = this.workflow.nodes[node.name];
		const mode = options.mode ?? 'trigger';
		const logger = Object.fromEntries(
			(['debug', 'info', 'warn', 'error'] as const).map((level) => [
				level,
				(message: string, metadata?: unknown) => void this.logs.push({ level, message, metadata }),
			]),
		);
		const context = {
			getNode: () => structuredClone(this.node),
			getNodeParameter: (name: string, fallback?: unknown) => this.parameter(name, fallback),
			getCredentials: async (credentialType: string) => {
				if (!(description.credentials ?? []).some((entry) => entry.name === credentialType))
					throw new Error(`The node does not declare credential type ${credentialType}`);
				return structuredClone(options.credential ?? {});
			},
			getWorkflow: () => ({
				id: this.workflow.id,
				name: this.workflow.name,
				active: true,
			}),
			getWorkflowSettings: () => this.workflow.settings,
			getMode: () => mode,
			getActivationMode: () => options.activation ?? (mode === 'manual' ? 'manual' : 'activate'),
			logger: strict(logger, 'logger'),
			helpers: strict({ createDeferredPromise: <T>() => deferred<T>() }, 'this.helpers'),
			emit: (data: INodeExecutionData[][], _response?: unknown, donePromise?: Deferred<IRun>) =>
				this.emit(data, donePromise),
			emitError: (error: Error) => void this.errors.push(error),
			saveFailedExecution: (error: Error) => void this.errors.push(error),
		};
		this.context = strict(context, 'ITriggerFunctions') as unknown as ITriggerFunctions;
	}

	parameter(name: string, fallback?: unknown): NodeParameterValueType | object {
		let value: unknown = name
			.split('.')
			.reduce<unknown>(
				(current, key) =>
					current !== null && typeof current === 'object'
						? (current as IDataObject)[key]
						: undefined,
				this.node.parameters,
			);
		if (value === undefined) value = fallback;
		if (value === undefined) throw new Error(`Could not get parameter "${name}"`);
		return this.workflow.expression.getParameterValue(
			value as NodeParameterValueType,
			null,
			0,
			0,
			this.node.name,
			[],
			this.options.mode ?? 'trigger',
			{},
		) as NodeParameterValueType;
	}

	private emit(data: INodeExecutionData[][], donePromise: Deferred<IRun> | undefined): void {
		const items = data[0] ?? [];
		if ((this.options.mode ?? 'trigger') === 'manual') {
			// TriggersAndPollers replaces emit in manual mode: the data becomes the trigger's output
			// and the donePromise resolves when the test execution ends.
			this.manualDone = donePromise;
			this.manualOutput.resolve(data);
			return;
		}
		let finished = false;
		const emission: Emission = {
			items,
			finish: (run = {}) => {
				if (finished) return;
				finished = true;
				donePromise?.resolve({
					status: 'success',
					finished: true,
					mode: 'trigger',
					...run,
				} as IRun);
			},
			fail: (error) => {
				if (finished) return;
				finished = true;
				donePromise?.reject(error);
			},
			get finished() {
				return finished;
			},
		};
		this.emissions.push(emission);
		if (this.options.execution) {
			this.options.execution(items, emission).then(
				() => emission.finish(),
				(error: unknown) => emission.fail(error as Error),
			);
		}
	}

	/** Activation: trigger() as n8n calls it when the workflow is published (or tested). */
	async activate(): Promise<ITriggerResponse> {
		const response = (await this.nodeType.trigger!.call(this.context)) ?? {};
		this.response = response;
		return response;
	}

	/** Deactivation: the closeFunction, as n8n calls it when the workflow is unpublished. */
	async deactivate(): Promise<void> {
		await this.response?.closeFunction?.();
	}

	/**
	 * A test run as n8n-core's WorkflowExecute.executeTriggerNode does it: trigger(), then the
	 * manualTriggerFunction, then the first emission is the node's output; the closeFunction
	 * is called right after that output. Returns the output items.
	 */
	async runManual(): Promise<INodeExecutionData[]> {
		const response = await this.activate();
		await response.manualTriggerFunction?.();
		const output = await this.manualOutput.promise;
		void response.closeFunction?.();
		return output[0] ?? [];
	}

	/** The test execution ended (n8n's workflowExecuteAfter hook): resolves its donePromise. */
	endManualExecution(run: Partial<IRun> = {}): void {
		this.manualDone?.resolve({ status: 'success', finished: true, mode: 'manual', ...run } as IRun);
	}
}

/** Contexts whose credential points at the test database and `schema`. */
export function triggerRunner(schema: string) {
	return (nodeType: INodeType, options: TriggerContextOptions = {}) =>
		new TriggerContext(nodeType, {
			credential: credentialFor(databaseUrl(), schema),
			...options,
		});
}
