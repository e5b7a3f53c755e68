import {
	NodeConnectionTypes,
	type IDataObject,
	type INodeProperties,
	type INodeTypeDescription,
} from 'n8n-workflow';

import { ValidationError } from '../../src/core';

import { testDurableJobsConnection } from './credentialTest';

/** The npm package name: node types are `${PACKAGE_NAME}.<name>` (and `<name>Tool` as AI tools). */
export const PACKAGE_NAME = 'n8n-nodes-durable-jobs';

/**
 * The connection test each node's credential entry names in `testedBy` (n8n's lint wants that
 * entry written out in every node class).
 */
export const credentialTestMethods = {
	credentialTest: { durableJobsConnectionTest: testDurableJobsConnection },
};

/** The node description fields every node of the package shares. */
export const commonDescription: Pick<INodeTypeDescription, 'group' | 'version' | 'inputs'> = {
	group: ['transform'],
	version: 1,
	inputs: [NodeConnectionTypes.Main],
};

/** The "Options" collection of a node (n8n lists its options alphabetically by display name). */
export function optionsCollection(options: INodeProperties[]): INodeProperties {
	return {
		displayName: 'Options',
		name: 'options',
		type: 'collection',
		placeholder: 'Add option',
		default: {},
		options,
	};
}

/**
 * Job Lease's and Job Trigger's option to leave a job's metadata out of its item
 * (LeaseInput.includeMetadata), read with includeMetadataValue.
 */
export const includeMetadataOption: INodeProperties = {
	displayName: 'Include Job Metadata',
	name: 'includeMetadata',
	type: 'boolean',
	default: true,
	description:
		"Whether each job's item also holds its lease end, enqueue idempotency key, priority, ordering key, correlation ID and creation time. Turn off when the workflow reads only the job ID, attempt and payload: smaller items and execution data. When off, expressions that read one of those fields get nothing.",
};

/**
 * The Include Job Metadata option of an Options collection: on unless set off. An expression may
 * give the text "true" or "false"; anything else is refused by the option's display name.
 */
export function includeMetadataValue(options: IDataObject): boolean {
	const value = options.includeMetadata;
	if (value === undefined || value === null || value === true || value === 'true') return true;
	if (value === false || value === 'false') return false;
	throw new ValidationError(
		'Include Job Metadata',
		`"${String(value).slice(0, 40)}" is not true or false`,
		'Turn Options → Include Job Metadata on or off, or give it an expression that yields true or false',
	);
}

export const queueField: INodeProperties = {
	displayName: 'Queue',
	name: 'queue',
	type: 'string',
	default: 'default',
	required: true,
	placeholder: 'documents',
	description: 'Name of the queue: letters, digits and _ . : - (up to 100 characters).',
};

export const jobIdField: INodeProperties = {
	displayName: 'Job ID',
	name: 'jobId',
	type: 'string',
	default: '={{ $json.job_id }}',
	required: true,
	description: 'ID of the job, as Job Lease returned it',
};

export const attemptIdField: INodeProperties = {
	displayName: 'Attempt ID',
	name: 'attemptId',
	type: 'string',
	default: '={{ $json.attempt_id }}',
	required: true,
	description:
		'Attempt ID from the same Job Lease item. It fences the write: a worker whose lease was taken over cannot change the job.',
};

export const leaseSecondsField: INodeProperties = {
	displayName: 'Lease Seconds',
	name: 'leaseSeconds',
	type: 'number',
	typeOptions: { minValue: 1, maxValue: 86400 },
	default: 300,
	description:
		'How long the worker owns the job. If it has not completed or extended the lease by then, another worker may take the job over with a new attempt.',
};

/** Job Lease and Job Trigger share one limit per queue (an advisory lock in the database). */
export const concurrencyLimitField: INodeProperties = {
	displayName: 'Concurrency Limit',
	name: 'concurrencyLimit',
	type: 'number',
	typeOptions: { minValue: 0 },
	default: 0,
	description:
		'Most jobs of this queue running at once, across all n8n instances and every Job Lease and Job Trigger node (0 = no limit)',
};
