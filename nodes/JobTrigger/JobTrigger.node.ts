import {
	NodeConnectionTypes,
	NodeOperationError,
	type IDataObject,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
	type IRun,
	type ITriggerFunctions,
	type ITriggerResponse,
} from 'n8n-workflow';

import {
	COUNT_LIMITS,
	DEFAULT_BACKSTOP_MS,
	DURATION_LIMITS_MS,
	JobTriggerEngine,
	peekJob,
	release,
	type Job,
	type LeasedJob,
	type LeasedJobEssentials,
} from '../../src/core';
import { leasedJobJson } from '../JobLease/JobLease.node';
import { credentialToConfig, storeFor, CREDENTIAL_TYPE } from '../shared/connection';
import { testDurableJobsConnection } from '../shared/credentialTest';
import {
	concurrencyLimitField,
	includeMetadataOption,
	includeMetadataValue,
	leaseSecondsField,
	queueField,
} from '../shared/descriptions';
import {
	concurrencyLimitParameter,
	leaseSecondsToMs,
	secondsToMs,
	wholeNumberParameter,
} from '../shared/batch';
import { toNodeError } from '../shared/errors';

const MAX_JOBS_IN_FLIGHT_DEFAULT = 10;
const BATCH_SIZE_DEFAULT = 10;

/** A test run that leases a real job holds it at most this long if the run is abandoned. */
export const TEST_LEASE_MAX_SECONDS = 60;
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

export class JobTrigger implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Job Trigger',
		name: 'jobTrigger',
		icon: { light: 'file:jobTrigger.svg', dark: 'file:jobTrigger.dark.svg' },
		group: ['trigger'],
		version: 1,
		subtitle: '={{ "jobs from " + $parameter["queue"] }}',
		description:
			'Starts an execution for each job of a queue the moment it is due (LISTEN/NOTIFY), with a bound on jobs in flight',
		eventTriggerDescription: 'Waiting for a job in the queue',
		activationMessage:
			'Jobs of this queue now start executions as soon as they are due; nothing runs while the queue is empty.',
		defaults: { name: 'Job Trigger' },
		inputs: [],
		outputs: [NodeConnectionTypes.Main],
		credentials: [
			{ name: 'durableJobsPostgresApi', required: true, testedBy: 'durableJobsConnectionTest' },
		],
		properties: [
			{
				displayName:
					'Each leased job starts an execution with the same item as Job Lease → Leased (job_id, attempt_id, payload, …); finish it with Job Complete. Behind PgBouncer in transaction mode LISTEN cannot work: set Options → Poll Interval. Testing this node shows the next job without leasing it (Options → Test Run).',
				name: 'notice',
				type: 'notice',
				default: '',
			},
			queueField,
			{
				displayName: 'Max Jobs in Flight',
				name: 'maxJobsInFlight',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: 10000 },
				default: MAX_JOBS_IN_FLIGHT_DEFAULT,
				description:
					'Most jobs this trigger has started and whose execution has not finished yet. A new job is leased only when an execution ends.',
			},
			leaseSecondsField,
			concurrencyLimitField,
			{
				displayName: 'Emit',
				name: 'emit',
				type: 'options',
				options: [
					{
						name: 'One Execution per Job',
						value: 'perJob',
						description: 'Each execution gets one item: one job',
					},
					{
						name: 'One Execution per Batch',
						value: 'batch',
						description: 'Each execution gets up to Batch Size items, one per job',
					},
				],
				default: 'perJob',
			},
			{
				displayName: 'Batch Size',
				name: 'batchSize',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: 10000 },
				default: BATCH_SIZE_DEFAULT,
				displayOptions: { show: { emit: ['batch'] } },
				description:
					'Most jobs in one execution (each job still counts against Max Jobs in Flight)',
			},
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add option',
				default: {},
				options: [
					{
						displayName: 'Backstop Seconds',
						name: 'backstopSeconds',
						type: 'number',
						typeOptions: { minValue: 1 },
						default: 30,
						description:
							'How often to look for jobs no notice announced: expired leases of crashed workers, notices lost while disconnected',
					},
					includeMetadataOption,
					{
						displayName: 'Poll Interval (Seconds)',
						name: 'pollIntervalSeconds',
						type: 'number',
						typeOptions: { minValue: 0 },
						default: 0,
						description:
							'0 = wake up on LISTEN/NOTIFY (needs a direct connection or PgBouncer in session mode). Behind PgBouncer in transaction mode, set e.g. 2: the trigger then polls inside n8n and still starts no execution while nothing is due.',
					},
					{
						displayName: 'Test Run',
						name: 'testRun',
						type: 'options',
						options: [
							{
								name: 'Show Next Job (Nothing Leased)',
								value: 'sample',
								description:
									'Shows the job a lease would take next, without leasing it; Job Complete and Extend Lease answer Lease Lost for it, so nothing in the queue changes',
							},
							{
								name: 'Lease One Job',
								value: 'leaseOne',
								description: `Waits for a due job, leases it (for at most ${TEST_LEASE_MAX_SECONDS} s) and gives it back when the test execution ends without finishing it`,
							},
						],
						default: 'sample',
						description:
							'What "Execute step" / "Execute workflow" in the editor does. Published workflows are not affected.',
					},
				],
			},
		],
	};

	methods = { credentialTest: { durableJobsConnectionTest: testDurableJobsConnection } };

	async trigger(this: ITriggerFunctions): Promise<ITriggerResponse> {
		const node = this.getNode();
		if (this.getWorkflowSettings().engineType === 'v2') {
			throw new NodeOperationError(
				node,
				'Job Trigger needs the default execution engine: it waits for each execution to finish before it leases more jobs, which Engine 2.0 does not support yet',
				{ description: 'Workflow settings → Execution engine: choose the default (v1)' },
			);
		}
		const queue = this.getNodeParameter('queue') as string;
		const options = this.getNodeParameter('options', {}) as IDataObject;
		let durations: TriggerDurations;
		let maxInFlight: number;
		let concurrencyLimit: number | null;
		let batchSize: number;
		try {
			maxInFlight = wholeNumberParameter(
				this.getNodeParameter('maxJobsInFlight', null),
				'Max Jobs in Flight',
				COUNT_LIMITS.inFlight,
				MAX_JOBS_IN_FLIGHT_DEFAULT,
			);
			concurrencyLimit = concurrencyLimitParameter(this.getNodeParameter('concurrencyLimit', null));
			batchSize =
				this.getNodeParameter('emit', 'perJob') === 'batch'
					? wholeNumberParameter(
							this.getNodeParameter('batchSize', null),
							'Batch Size',
							COUNT_LIMITS.triggerBatch,
							BATCH_SIZE_DEFAULT,
						)
					: 1;
			durations = triggerDurations(this.getNodeParameter('leaseSeconds', 300), options);
		} catch (error) {
			throw toNodeError(node, error);
		}
		const leaseSeconds = durations.leaseMs / 1000;
		const config = credentialToConfig(await this.getCredentials(CREDENTIAL_TYPE));
		const openStore = async () => await storeFor(this);

		if (this.getMode() === 'manual' && (options.testRun ?? 'sample') === 'sample') {
			return {
				manualTriggerFunction: async () => {
					try {
						const next = await peekJob(await openStore(), queue);
						const sample = sampleJson(next, queue, leaseSeconds, includeMetadataValue(options));
						this.emit([[{ json: sample }]]);
					} catch (error) {
						throw toNodeError(node, error);
					}
				},
			};
		}

		const manual = this.getMode() === 'manual';
		const leasedSeconds = manual ? Math.min(leaseSeconds, TEST_LEASE_MAX_SECONDS) : leaseSeconds;
		const toItems = (jobs: Array<LeasedJob | LeasedJobEssentials>): INodeExecutionData[] =>
			jobs.map((job) => ({ json: leasedJobJson(job, leasedSeconds) }));
		let engine: JobTriggerEngine;
		try {
			engine = new JobTriggerEngine({
				store: openStore,
				schema: config.schema ?? 'durable_jobs',
				queue,
				maxInFlight: manual ? 1 : maxInFlight,
				maxEmissions: manual ? 1 : undefined,
				leaseMs: Math.round(leasedSeconds * 1000),
				concurrencyLimit,
				batchSize: manual ? 1 : batchSize,
				backstopMs: durations.backstopMs,
				pollIntervalMs: durations.pollIntervalMs,
				connection: config,
				applicationName: `n8n-nodes-durable-jobs trigger pid=${process.pid}`,
				workflowId: this.getWorkflow().id ?? null,
				includeMetadata: includeMetadataValue(options),
				logger: this.logger,
				emit: async (jobs: Array<LeasedJob | LeasedJobEssentials>) => {
					const done = this.helpers.createDeferredPromise<IRun>();
					this.emit([toItems(jobs)], undefined, done);
					if (!manual) return await done.promise;
					// A test run gives its job back when it ends without finishing it; Job Complete
					// in the test has fenced it already, so the release then changes nothing.
					return await done.promise.finally(async () => await release(await openStore(), jobs));
				},
			});
		} catch (error) {
			throw toNodeError(node, error);
		}

		if (manual) {
			return {
				// Called by n8n right after this node's output, and when the test is cancelled.
				closeFunction: async () => await engine.stop(),
				manualTriggerFunction: async () => {
					try {
						await engine.start();
					} catch (error) {
						throw toNodeError(node, error);
					}
				},
			};
		}
		try {
			await engine.start();
		} catch (error) {
			throw toNodeError(node, error);
		}
		return { closeFunction: async () => await engine.stop() };
	}
}

interface TriggerDurations {
	leaseMs: number;
	backstopMs: number;
	/** 0: wake up on LISTEN/NOTIFY. */
	pollIntervalMs: number;
}

/** The trigger's durations, checked in the fields' own names and seconds before anything starts. */
function triggerDurations(leaseSeconds: unknown, options: IDataObject): TriggerDurations {
	const pollSeconds = options.pollIntervalSeconds;
	return {
		leaseMs: leaseSecondsToMs(leaseSeconds),
		backstopMs:
			secondsToMs(
				options.backstopSeconds,
				'Backstop Seconds',
				DURATION_LIMITS_MS.triggerBackstop,
			) ?? DEFAULT_BACKSTOP_MS,
		pollIntervalMs:
			pollSeconds === 0 || pollSeconds === '0'
				? 0
				: (secondsToMs(
						pollSeconds,
						'Poll Interval (Seconds)',
						DURATION_LIMITS_MS.triggerPollInterval,
					) ?? 0),
	};
}

/**
 * The test-run item: a job as Job Lease would emit it, read without leasing it. Its attempt id
 * is the nil UUID, which never matches a lease, so Job Complete and Extend Lease route it to
 * Lease Lost and change nothing. Without any queued job, an example of the shape.
 * `leaseSeconds` is the lease the published trigger would lease it with.
 */
function sampleJson(
	job: (Job & { due: boolean }) | null,
	queue: string,
	leaseSeconds: number,
	includeMetadata: boolean,
): IDataObject {
	const now = new Date();
	const leased: LeasedJob = job
		? {
				...job,
				attempt_id: NIL_UUID,
				attempts: job.attempts + 1,
				lease_until: now,
				recovered: false,
			}
		: {
				id: NIL_UUID,
				queue,
				payload: {},
				idempotency_key: null,
				priority: 0,
				attempts: 1,
				max_attempts: 5,
				attempt_id: NIL_UUID,
				lease_until: now,
				ordering_key: null,
				correlation_id: null,
				created_at: now,
				recovered: false,
			};
	const base = leasedJobJson(
		includeMetadata
			? leased
			: {
					id: leased.id,
					queue: leased.queue,
					payload: leased.payload,
					attempts: leased.attempts,
					max_attempts: leased.max_attempts,
					attempt_id: leased.attempt_id,
					recovered: leased.recovered,
				},
		leaseSeconds,
	);
	return {
		...base,
		test_run: job
			? job.due
				? 'The next due job, shown without leasing it: nothing in the queue changed'
				: `No job is due yet; this one is due at ${job.run_at.toISOString()}. Shown without leasing it`
			: 'The queue has no queued job; this is an example of the item shape',
	};
}
