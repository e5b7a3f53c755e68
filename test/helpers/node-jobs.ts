import type { IDataObject, INodeExecutionData } from 'n8n-workflow';

import { JobEnqueue } from '../../nodes/JobEnqueue/JobEnqueue.node';
import { JobLease } from '../../nodes/JobLease/JobLease.node';
import type { nodeRunner } from './n8n-context';

/** Jobs enqueued and leased through the nodes themselves, as a workflow would, for node tests. */
export function nodeJobs(nodes: ReturnType<typeof nodeRunner>) {
	return {
		/** Job Enqueue of one job per payload: its output items' JSON. */
		enqueue: async (
			queue: string,
			payloads: IDataObject[],
			options: IDataObject = {},
		): Promise<IDataObject[]> =>
			(await nodes.run(new JobEnqueue(), { items: payloads, parameters: { queue, options } }))
				.output('main')
				.map((item) => item.json),
		/** Job Lease of up to 100 jobs of `queue`: its Leased items. */
		leaseAll: async (queue: string, parameters: IDataObject = {}): Promise<INodeExecutionData[]> =>
			(
				await nodes.run(new JobLease(), {
					parameters: { queue, maxJobs: 100, ...parameters },
					executionId: `lease-${queue}`,
				})
			).output('Leased'),
	};
}

/**
 * A node output's item of each job id (`json.job_id`): Job Lease's Leased items, Job Complete's
 * Completed items. Outputs keep lease order, not enqueue order. An id without an item throws.
 */
export function itemOfJob(items: INodeExecutionData[]): (id: string) => INodeExecutionData {
	return (id) => {
		const item = items.find((candidate) => candidate.json.job_id === id);
		if (item === undefined) throw new Error(`no item of job ${id} among ${items.length} items`);
		return item;
	};
}
