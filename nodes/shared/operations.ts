import type {
	IDisplayOptions,
	IExecuteFunctions,
	INodeExecutionData,
	INodeProperties,
	INodePropertyOptions,
} from 'n8n-workflow';

import { runOnce } from './batch';

/**
 * One operation of a node with several, laid out as n8n's own nodes do
 * (`actions/<resource>/<operation>.operation.ts`): its parameters, shown only for it, next to
 * the code that runs it.
 */
export interface NodeOperation {
	description: INodeProperties[];
	execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]>;
}

/** The properties, each shown only where `displayOptions` also hold (n8n's updateDisplayOptions). */
export function withDisplayOptions(
	displayOptions: IDisplayOptions,
	properties: INodeProperties[],
): INodeProperties[] {
	return properties.map((property) => {
		const own = property.displayOptions ?? {};
		const merged: IDisplayOptions = {
			...own,
			show: { ...displayOptions.show, ...own.show },
		};
		if (displayOptions.hide || own.hide) merged.hide = { ...displayOptions.hide, ...own.hide };
		return { ...property, displayOptions: merged };
	});
}

/**
 * A subtitle expression that shows the chosen operation by its name in the list ("Queue
 * Stats"), not by its stored value ("stats"), optionally followed by more expression text.
 */
export function operationSubtitle(options: INodePropertyOptions[], suffix = ''): string {
	const names = Object.fromEntries(options.map((option) => [option.value, option.name]));
	return `={{ (${JSON.stringify(names)}[$parameter["operation"]] ?? $parameter["operation"])${suffix} }}`;
}

/** Whether n8n runs this node as an AI agent's tool (its `<name>Tool` variant). */
export function isToolNode(context: IExecuteFunctions): boolean {
	return context.getNode().type.endsWith('Tool');
}

/**
 * Answers an operation the node will not run with its error, through the batch runner like
 * any other: the node fails, or with "continue" the error goes to the error output.
 */
export async function rejectOperation(
	context: IExecuteFunctions,
	error: Error,
	outputs = 1,
): Promise<INodeExecutionData[][]> {
	return await runOnce<never, never>(context, {
		outputs,
		read: () => {
			throw error;
		},
		call: async () => {
			throw error;
		},
		route: () => [],
	});
}

/** The Operation selector of a node with several operations. */
export function operationProperty(
	options: INodePropertyOptions[],
	defaultOperation: string,
): INodeProperties {
	return {
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		options,
		default: defaultOperation,
	};
}
