import { readFileSync } from 'node:fs';
import path from 'node:path';

import { NodeOperationError, type IDataObject, type INodeExecutionData } from 'n8n-workflow';

import { IdempotencyCheck } from '../../nodes/IdempotencyCheck/IdempotencyCheck.node';
import { HTTP_STATUS_FROM_ITEM, JobComplete } from '../../nodes/JobComplete/JobComplete.node';
import { JobStatus } from '../../nodes/JobStatus/JobStatus.node';
import { DEFAULT_MAX_PAYLOAD_BYTES } from '../../src/core';
import { tableSnapshot, useTestSchema } from '../helpers/db';
import { nodeRunner } from '../helpers/n8n-context';
import { itemOfJob, nodeJobs } from '../helpers/node-jobs';

/*
 * Review fixes of the node glue, run through n8n-core's execution engine on real PostgreSQL:
 * Job Complete's HTTP Status default and Max Result Size (KB), Job Story without a Callback
 * Queue field, job_id on Cancel and Requeue items, and Idempotency Check's required Claim ID.
 */
const { schema, pool } = useTestSchema(__filename, { closeCachedPools: true });
const nodes = nodeRunner(schema);

const jobs = nodeJobs(nodes);

async function enqueue(
	queue: string,
	payloads: IDataObject[],
	options: IDataObject = {},
): Promise<string[]> {
	return (await jobs.enqueue(queue, payloads, options)).map((json) => String(json.job_id));
}

async function lease(queue: string): Promise<INodeExecutionData[]> {
	return await jobs.leaseAll(queue, { leaseSeconds: 60 });
}

async function job(id: unknown) {
	const { rows } = await pool.query(`SELECT * FROM "${schema}".jobs WHERE id = $1`, [id]);
	return rows[0];
}

async function failure(run: Promise<unknown>): Promise<NodeOperationError> {
	const error = await run.catch((caught: unknown) => caught);
	expect(error).toBeInstanceOf(NodeOperationError);
	return error as NodeOperationError;
}

/** What an HTTP Request node hands on with "Include Response Headers and Status" on. */
function fullResponse(leased: INodeExecutionData, statusCode: number, body: IDataObject = {}) {
	return {
		json: {
			job_id: leased.json.job_id,
			attempt_id: leased.json.attempt_id,
			body,
			headers: { 'content-type': 'application/json' },
			statusCode,
			statusMessage: 'OK',
		},
	};
}

describe('Job Complete, From HTTP Status with the default HTTP Status', () => {
	it('is the expression the bundled templates set', () => {
		const [first, second] = new JobComplete().description.properties.filter(
			(entry) => entry.name === 'httpStatus',
		);
		// Version 1 keeps its default of 0; version 2 reads the HTTP Request node's status.
		expect(first.default).toBe(0);
		expect(first.displayOptions?.show?.['@version']).toEqual([1]);
		const property = second;
		expect(property?.default).toBe(HTTP_STATUS_FROM_ITEM);
		const dir = path.join(__dirname, '..', '..', 'workflows');
		// The callback relay (05) sets its outcome itself: every answer but a 2xx is retried.
		for (const file of ['03-dispatcher.json', '04-worker.json']) {
			const workflow = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as {
				nodes: Array<{ name: string; type: string; parameters: IDataObject }>;
			};
			const set = workflow.nodes.filter((node) => node.parameters.outcome === 'httpStatus');
			expect(set.length).toBeGreaterThan(1);
			for (const node of set)
				expect(node.parameters.httpStatus).toBe(
					// AI failed also takes a 2xx answer that is not JSON (Read AI answer) as no answer.
					node.name === 'AI failed'
						? '={{ $json.error === undefined && $json.ai_unreadable === undefined ? ($json.statusCode ?? 0) : 0 }}'
						: HTTP_STATUS_FROM_ITEM,
				);
		}
		expect(property?.description).toMatch(/Include Response Headers and Status/);
		expect(property?.description).toMatch(/Continue \(using error output\)/);
	});

	it('a 2xx of a full response succeeds; an error-output item is no answer, whatever statusCode it merged in', async () => {
		const [ok, timedOut] = await enqueue('http-default', [{ n: 1 }, { n: 2 }]);
		const leased = await lease('http-default');
		const byId = itemOfJob(leased);
		const items = [
			fullResponse(byId(ok), 201, { id: 'crm-1' }),
			// n8n's error output: `error`, with the input item's fields merged in (here the
			// statusCode of an earlier call, which must not be read as this call's answer).
			{
				json: {
					job_id: timedOut,
					attempt_id: byId(timedOut).json.attempt_id,
					statusCode: 200,
					error: { message: 'timeout of 30000ms exceeded', code: 'ECONNABORTED' },
				},
			},
		];
		const result = await nodes.run(new JobComplete(), {
			items,
			parameters: { outcome: 'httpStatus' },
		});
		const completed = itemOfJob(result.output('Completed'));
		expect(completed(ok).json).toMatchObject({ outcome: 'succeeded', status: 'done' });
		expect(completed(timedOut).json).toMatchObject({
			outcome: 'retry',
			status: 'queued',
			error_code: 'http_no_response',
			error_class: 'retryable',
		});
		expect(await job(ok)).toMatchObject({ status: 'done' });
		expect((await job(ok)).result).toMatchObject({ statusCode: 201, body: { id: 'crm-1' } });
	});

	it('an item without statusCode (Full Response off) is refused naming HTTP Status, and nothing is written', async () => {
		const [id] = await enqueue('http-body-only', [{ n: 1 }]);
		const [leased] = await lease('http-body-only');
		// Full Response off: the item is the response body alone.
		const items = [
			{ json: { job_id: id, attempt_id: leased.json.attempt_id, id: 'crm-2', ok: true } },
		];
		const before = await tableSnapshot(pool, schema);
		const error = await failure(
			nodes.run(new JobComplete(), { items, parameters: { outcome: 'httpStatus' } }),
		);
		expect(error.message).toBe(
			'HTTP Status: the item has no statusCode, so the default cannot tell an answer from no answer',
		);
		expect(error.description).toMatch(/"Include Response Headers and Status"/);
		expect(error.description).toMatch(/Field: HTTP Status$/);
		expect(await tableSnapshot(pool, schema)).toEqual(before);

		const routed = await nodes.run(new JobComplete(), {
			items,
			parameters: { outcome: 'httpStatus' },
			onError: 'continueErrorOutput',
		});
		expect(routed.routing()).toEqual({ Completed: [], 'Lease Lost': [], Error: [0] });
		expect(routed.output('Error')[0].json).toMatchObject({
			details: { field: 'HTTP Status', http_status: 400 },
		});
		expect(await tableSnapshot(pool, schema)).toEqual(before);
		expect(await job(id)).toMatchObject({ status: 'running' });
	});

	it('a Job Complete of version 1 keeps its default of 0: an item without statusCode is no answer, a retry', async () => {
		const [id] = await enqueue('http-version-1', [{ n: 1 }]);
		const [leased] = await lease('http-version-1');
		const result = await nodes.run(new JobComplete(), {
			items: [{ json: { job_id: id, attempt_id: leased.json.attempt_id, statusCode: 200 } }],
			parameters: { outcome: 'httpStatus' },
			typeVersion: 1,
		});
		expect(result.output('Completed')[0].json).toMatchObject({
			job_id: id,
			outcome: 'retry',
			error_code: 'http_no_response',
		});
		// The same with the outcome set by an expression: version 2's field stays hidden.
		const [other] = await enqueue('http-version-1', [{ n: 2 }]);
		const [otherLease] = await lease('http-version-1');
		const byExpression = await nodes.run(new JobComplete(), {
			items: [{ json: { job_id: other, attempt_id: otherLease.json.attempt_id } }],
			parameters: { outcome: '={{ "httpStatus" }}' },
			typeVersion: 1,
		});
		expect(byExpression.output('Completed')[0].json).toMatchObject({
			job_id: other,
			outcome: 'retry',
			error_code: 'http_no_response',
		});
	});

	it('a mapped HTTP Status keeps its meaning: empty is no answer', async () => {
		const [id] = await enqueue('http-mapped', [{ n: 1 }]);
		const [leased] = await lease('http-mapped');
		const [completed] = (
			await nodes.run(new JobComplete(), {
				items: [leased],
				parameters: { outcome: 'httpStatus', httpStatus: '={{ $json.code }}' },
			})
		).output('Completed');
		expect(completed.json).toMatchObject({
			job_id: id,
			outcome: 'retry',
			error_code: 'http_no_response',
		});
	});
});

describe('Job Complete, From HTTP Status with Also Retry Statuses', () => {
	it('409 of a request sent with an Idempotency-Key retries when listed (http_409, retryable), and fails needs_mapping when not', async () => {
		const [listed, unlisted, other] = await enqueue('http-also-retry', [
			{ n: 1 },
			{ n: 2 },
			{ n: 3 },
		]);
		const leased = await lease('http-also-retry');
		const byId = itemOfJob(leased);
		const retried = await nodes.run(new JobComplete(), {
			items: [fullResponse(byId(listed), 409), fullResponse(byId(other), 422)],
			parameters: { outcome: 'httpStatus', options: { alsoRetryStatuses: ' 409 , 423' } },
		});
		const completed = itemOfJob(retried.output('Completed'));
		expect(completed(listed).json).toMatchObject({
			outcome: 'retry',
			status: 'queued',
			error_code: 'http_409',
			error_class: 'retryable',
		});
		expect(completed(other).json).toMatchObject({
			outcome: 'failed',
			error_class: 'needs_mapping',
		});
		expect(await job(listed)).toMatchObject({ status: 'queued' });

		const failed = await nodes.run(new JobComplete(), {
			items: [fullResponse(byId(unlisted), 409)],
			parameters: { outcome: 'httpStatus' },
		});
		expect(failed.output('Completed')[0].json).toMatchObject({
			outcome: 'failed',
			status: 'failed',
			error_code: 'http_409',
			error_class: 'needs_mapping',
		});
	});

	it.each([['abc'], ['409;423'], ['200'], ['503'], ['4090'], ['409, x']])(
		'"%s" is refused naming the option, and nothing of the batch is written',
		async (value) => {
			const [first, second] = await enqueue('http-also-retry-bad', [{ n: 1 }, { n: 2 }]);
			const leased = await lease('http-also-retry-bad');
			const byId = itemOfJob(leased);
			const before = await tableSnapshot(pool, schema);
			const error = await failure(
				nodes.run(new JobComplete(), {
					items: [fullResponse(byId(first), 201), fullResponse(byId(second), 409)],
					parameters: { outcome: 'httpStatus', options: { alsoRetryStatuses: value } },
				}),
			);
			expect(error.message).toMatch(/^Also Retry Statuses: ".+" is not a 4xx status code$/);
			expect(error.description).toMatch(/e\.g\. 409 for a request sent with an Idempotency-Key/);
			expect(error.description).toMatch(/Field: Also Retry Statuses$/);
			expect(await tableSnapshot(pool, schema)).toEqual(before);
			expect(await job(first)).toMatchObject({ status: 'running' });
		},
	);

	it('the bundled templates list 409 on the Job Complete after the CRM call and after the outbox delivery, not after the AI call', () => {
		const dir = path.join(__dirname, '..', '..', 'workflows');
		const listed: string[] = [];
		for (const file of ['03-dispatcher.json', '04-worker.json', '07-outbox-relay.json']) {
			const workflow = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as {
				nodes: Array<{ name: string; type: string; parameters: IDataObject }>;
			};
			for (const node of workflow.nodes.filter(
				(candidate) => candidate.parameters.outcome === 'httpStatus',
			))
				listed.push(
					`${file} ${node.name}: ${String((node.parameters.options as IDataObject).alsoRetryStatuses)}`,
				);
		}
		expect(listed).toEqual([
			'03-dispatcher.json Finish job: 409',
			'03-dispatcher.json AI failed: undefined',
			'04-worker.json Finish job: 409',
			'04-worker.json AI failed: undefined',
			'07-outbox-relay.json Job Complete: 409',
		]);
	});
});

describe('Job Complete, From HTTP Status and a Retry-After header', () => {
	/** Seconds from the database's now to the job's next run. */
	async function waitsSeconds(id: string): Promise<number> {
		const { rows } = await pool.query<{ s: number }>(
			`SELECT extract(epoch FROM run_at - now())::float8 AS s FROM "${schema}".jobs WHERE id = $1 AND status = 'queued'`,
			[id],
		);
		expect(rows).toHaveLength(1);
		return rows[0].s;
	}

	function answer(leased: INodeExecutionData, statusCode: number, headers: IDataObject) {
		const item = fullResponse(leased, statusCode);
		return { json: { ...item.json, headers: { 'content-type': 'application/json', ...headers } } };
	}

	it('a retried answer waits at least what its Retry-After asks (seconds or a date, any case of the name), at most Backoff Max Seconds', async () => {
		const ids = await enqueue('http-retry-after', [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
		const leased = await lease('http-retry-after');
		const byId = itemOfJob(leased);
		const inNinetySeconds = new Date(Date.now() + 90_000).toUTCString();
		const result = await nodes.run(new JobComplete(), {
			items: [
				answer(byId(ids[0]), 429, { 'retry-after': '120' }),
				answer(byId(ids[1]), 503, { 'Retry-After': inNinetySeconds }),
				answer(byId(ids[2]), 429, { 'retry-after': '86400' }),
				answer(byId(ids[3]), 503, { 'retry-after': 'later' }),
			],
			parameters: { outcome: 'httpStatus', options: { backoffMaxSeconds: 600 } },
		});
		expect(result.output('Completed').map((item) => item.json.outcome)).toEqual([
			'retry',
			'retry',
			'retry',
			'retry',
		]);
		const waits = await Promise.all(ids.map(waitsSeconds));
		expect(waits[0]).toBeGreaterThan(115);
		expect(waits[0]).toBeLessThanOrEqual(120);
		expect(waits[1]).toBeGreaterThan(80);
		expect(waits[1]).toBeLessThanOrEqual(91);
		// Capped by Backoff Max Seconds.
		expect(waits[2]).toBeGreaterThan(595);
		expect(waits[2]).toBeLessThanOrEqual(600);
		// Unreadable: the backoff (first retry: between 2.5 and 5 s).
		expect(waits[3]).toBeLessThanOrEqual(5);
	});

	it('a Retry-After shorter than the backoff waits the backoff: a naive 503 "Retry-After: 1" during an outage does not use up the attempts faster', async () => {
		const [id] = await enqueue('http-retry-after-short', [{ n: 1 }]);
		const [leased] = await lease('http-retry-after-short');
		await nodes.run(new JobComplete(), {
			items: [answer(leased, 503, { 'retry-after': '1' })],
			parameters: { outcome: 'httpStatus', options: { backoffBaseSeconds: 60 } },
		});
		// First retry: between d/2 and d, d = 60 s.
		const waited = await waitsSeconds(id);
		expect(waited).toBeGreaterThan(28);
		expect(waited).toBeLessThanOrEqual(60);
	});

	it('Retry After Seconds wins; Honor Retry-After off, no answer, or a 2xx is the backoff or no wait at all', async () => {
		const ids = await enqueue('http-retry-after-not', [{ n: 1 }, { n: 2 }, { n: 3 }]);
		const leased = await lease('http-retry-after-not');
		const byId = itemOfJob(leased);
		await nodes.run(new JobComplete(), {
			items: [answer(byId(ids[0]), 429, { 'retry-after': '120' })],
			parameters: { outcome: 'httpStatus', options: { retryAfterSeconds: 40 } },
		});
		await nodes.run(new JobComplete(), {
			items: [answer(byId(ids[1]), 429, { 'retry-after': '120' })],
			parameters: { outcome: 'httpStatus', options: { honorRetryAfter: false } },
		});
		// n8n's error output: no answer, with the fields of an earlier answer merged in.
		await nodes.run(new JobComplete(), {
			items: [
				{
					json: {
						...answer(byId(ids[2]), 429, { 'retry-after': '120' }).json,
						error: { message: 'timeout of 30000ms exceeded' },
					},
				},
			],
			parameters: { outcome: 'httpStatus' },
		});
		const [explicit, off, noAnswer] = await Promise.all(ids.map(waitsSeconds));

		// HTTP Status mapped to another call's status: the item's headers are not that answer's.
		const [mapped] = await enqueue('http-retry-after-mapped', [{ n: 1 }]);
		const [mappedLease] = await lease('http-retry-after-mapped');
		await nodes.run(new JobComplete(), {
			items: [
				{
					json: {
						...answer(mappedLease, 200, { 'retry-after': '120' }).json,
						upstream_status: 503,
					},
				},
			],
			parameters: { outcome: 'httpStatus', httpStatus: '={{ $json.upstream_status }}' },
		});
		expect(await waitsSeconds(mapped)).toBeLessThanOrEqual(5);
		expect(explicit).toBeGreaterThan(35);
		expect(explicit).toBeLessThanOrEqual(40);
		expect(off).toBeLessThanOrEqual(5);
		expect(noAnswer).toBeLessThanOrEqual(5);

		const [done] = await enqueue('http-retry-after-2xx', [{ n: 1 }]);
		const [doneLease] = await lease('http-retry-after-2xx');
		const [completed] = (
			await nodes.run(new JobComplete(), {
				items: [answer(doneLease, 200, { 'retry-after': '120' })],
				parameters: { outcome: 'httpStatus' },
			})
		).output('Completed');
		expect(completed.json).toMatchObject({ job_id: done, outcome: 'succeeded', status: 'done' });
	});
});

describe('Job Complete, Max Result Size (KB)', () => {
	const defaultKb = DEFAULT_MAX_PAYLOAD_BYTES / 1024;
	const big = 'x'.repeat(DEFAULT_MAX_PAYLOAD_BYTES + 10_000);

	it('is an option of Job Complete with the core default', () => {
		const options = new JobComplete().description.properties.find(
			(entry) => entry.name === 'options',
		);
		const option = (options?.options as Array<{ name: string; default: unknown }>).find(
			(entry) => entry.name === 'maxResultKb',
		);
		expect(option?.default).toBe(defaultKb);
	});

	it('a result over the default is refused with a fix naming the option; nothing of the batch is written', async () => {
		const [small, large] = await enqueue('result-size', [{ n: 1 }, { n: 2 }]);
		const leased = await lease('result-size');
		const byId = itemOfJob(leased);
		const items = [
			{ json: { ...byId(small).json, answer: 'short' } },
			{ json: { ...byId(large).json, answer: big } },
		];
		const before = await tableSnapshot(pool, schema);
		const error = await failure(nodes.run(new JobComplete(), { items }));
		expect(error.context.itemIndex).toBe(1);
		expect(error.message).toMatch(
			new RegExp(`^result: is \\d+ bytes; the limit is ${DEFAULT_MAX_PAYLOAD_BYTES}$`),
		);
		expect(error.description).toContain(
			`or raise Max Result Size (KB) in Options (now ${defaultKb})`,
		);
		expect(error.description).toMatch(/Field: result$/);
		expect(await tableSnapshot(pool, schema)).toEqual(before);

		// With the error output, the large item fails alone, with the same fix; the other completes.
		const routed = await nodes.run(new JobComplete(), {
			items,
			onError: 'continueErrorOutput',
		});
		expect(routed.routing()).toEqual({ Completed: [0], 'Lease Lost': [], Error: [1] });
		expect(routed.output('Error')[0].json).toMatchObject({
			details: {
				code: 'payload_too_large',
				field: 'result',
				http_status: 413,
				fix: expect.stringContaining('Max Result Size (KB)'),
			},
		});
		expect(await job(small)).toMatchObject({ status: 'done' });
		expect(await job(large)).toMatchObject({ status: 'running', result: null });
	});

	it('with the option raised, the same result is stored', async () => {
		const [id] = await enqueue('result-size-raised', [{ n: 1 }]);
		const [leased] = await lease('result-size-raised');
		const [completed] = (
			await nodes.run(new JobComplete(), {
				items: [{ json: { ...leased.json, answer: big } }],
				parameters: { options: { maxResultKb: 2 * defaultKb } },
			})
		).output('Completed');
		expect(completed.json).toMatchObject({ job_id: id, status: 'done' });
		const stored = await job(id);
		expect(stored.status).toBe('done');
		expect(stored.result.answer).toHaveLength(big.length);
	});

	it.each([[0], ['={{ "big" }}'], [-1]])(
		'Max Result Size (KB) %p is refused by its name before anything is written',
		async (value) => {
			const [id] = await enqueue('result-size-bad', [{ n: 1 }]);
			const [leased] = await lease('result-size-bad');
			const before = await tableSnapshot(pool, schema);
			const error = await failure(
				nodes.run(new JobComplete(), {
					items: [leased],
					parameters: { options: { maxResultKb: value } },
				}),
			);
			expect(error.message).toMatch(/^Max Result Size \(KB\): must be a number of at least 1/);
			expect(error.description).toMatch(
				new RegExp(
					`Set Max Result Size \\(KB\\) to 1 or more, or remove it for the default ${defaultKb}`,
				),
			);
			expect(await tableSnapshot(pool, schema)).toEqual(before);
			// With "continue", the setting fails every item of the execution.
			const routed = await nodes.run(new JobComplete(), {
				items: [leased],
				parameters: { options: { maxResultKb: value } },
				onError: 'continueErrorOutput',
			});
			expect(routed.routing()).toEqual({ Completed: [], 'Lease Lost': [], Error: [0] });
			expect(await tableSnapshot(pool, schema)).toEqual(before);
			// Finish it, so the next case leases its own job.
			await nodes.run(new JobComplete(), { items: [leased] });
			expect(await job(id)).toMatchObject({ status: 'done' });
		},
	);
});

describe('Job Story reads callback deliveries from the queue Job Complete writes them to', () => {
	it('has no Callback Queue field, and shows the job-finished event Job Complete wrote', async () => {
		const names = new JobStatus().description.properties.map((property) => property.name);
		expect(names).not.toContain('callbackQueue');
		const [id] = await enqueue('story-callback', [{ doc: 'cb.pdf' }], {
			callbackUrl: 'https://client.example.com/hooks/jobs',
		});
		const [leased] = await lease('story-callback');
		const [completed] = (await nodes.run(new JobComplete(), { items: [leased] })).output(
			'Completed',
		);
		const [story] = (
			await nodes.run(new JobStatus(), {
				items: [{ job_id: id }],
				parameters: { operation: 'jobStory' },
			})
		).output('main');
		expect(story.json).toMatchObject({ found: true, job: { job_id: id, status: 'done' } });
		expect(story.json.callback_events).toEqual([
			expect.objectContaining({
				event_id: completed.json.callback_event_id,
			}),
		]);
	});
});

describe('Cancel and Requeue items carry job_id, so the next node reads it by default', () => {
	it('Job Complete failed → Requeue → Cancel → Job Story, each on its default Job ID', async () => {
		const [id] = await enqueue('chain', [{ n: 1 }], { maxAttempts: 1 });
		const [leased] = await lease('chain');
		await nodes.run(new JobComplete(), {
			items: [leased],
			parameters: { outcome: 'failed', errorCode: 'crm_rejected' },
		});

		const requeued = (
			await nodes.run(new JobStatus(), {
				items: [{ job_id: id }],
				parameters: { operation: 'requeue' },
			})
		).output('main');
		expect(requeued.map((item) => item.json)).toEqual([
			{
				job_id: id,
				id,
				queue: 'chain',
				status: 'queued',
				attempts: 1,
				max_attempts: 4,
				requeued: true,
			},
		]);

		const cancelled = (
			await nodes.run(new JobStatus(), {
				items: requeued,
				parameters: { operation: 'cancel', reason: 'replayed by mistake' },
			})
		).output('main');
		expect(cancelled.map((item) => item.json)).toEqual([
			{ job_id: id, id, cancelled: true, status: 'cancelled' },
		]);
		expect(cancelled[0].pairedItem).toEqual({ item: 0 });

		const [story] = (
			await nodes.run(new JobStatus(), {
				items: cancelled,
				parameters: { operation: 'jobStory' },
			})
		).output('main');
		expect(story.json).toMatchObject({
			found: true,
			job: { job_id: id, status: 'cancelled' },
		});
	});

	it('Requeue by filter: each replayed job carries job_id too', async () => {
		const [id] = await enqueue('chain-filter', [{ n: 1 }], { maxAttempts: 1 });
		const [leased] = await lease('chain-filter');
		await nodes.run(new JobComplete(), {
			items: [leased],
			parameters: { outcome: 'retry', errorClass: 'retryable' },
		});
		const replayed = (
			await nodes.run(new JobStatus(), {
				parameters: {
					operation: 'requeue',
					selectBy: 'filter',
					filterQueue: 'chain-filter',
					confirm: true,
				},
			})
		).output('main');
		expect(replayed.map((item) => [item.json.job_id, item.json.id, item.json.requeued])).toEqual([
			[id, id, true],
		]);
	});
});

describe('Idempotency Check Complete and Fail / Release need a Claim ID', () => {
	let claimed: INodeExecutionData;

	async function keyRow(key: string) {
		const { rows } = await pool.query(
			`SELECT status, claim_id, result FROM "${schema}".idempotency_keys WHERE scope = 'fence' AND key = $1`,
			[key],
		);
		return rows[0];
	}

	beforeAll(async () => {
		[claimed] = (
			await nodes.run(new IdempotencyCheck(), {
				items: [{ event_id: 'evt-fence' }],
				parameters: { scope: 'fence', key: '={{ $json.event_id }}' },
			})
		).output('New');
	});

	it('the field is required and says that empty is refused', () => {
		const property = new IdempotencyCheck().description.properties.find(
			(entry) => entry.name === 'claimId',
		);
		expect(property?.required).toBe(true);
		expect(property?.description).toMatch(/An empty Claim ID is refused/);
	});

	it.each(['complete', 'fail'])(
		'%s: an empty Claim ID (an item without a claim) is refused by name, with the expression that works, and nothing is written',
		async (operation) => {
			const before = await tableSnapshot(pool, schema);
			// After a node that replaced the item, with Key mapped and Claim ID left at its default.
			const afterHttp = await failure(
				nodes.run(new IdempotencyCheck(), {
					items: [{ statusCode: 200, body: {} }],
					parameters: { operation, scope: 'fence', settleKey: 'evt-fence' },
				}),
			);
			expect(afterHttp.message).toBe(
				'Claim ID: is empty, so the write could not be fenced by the claim',
			);
			expect(afterHttp.description).toContain(
				"Map Claim ID to the claim_id of the Claim operation's New item that this item settles",
			);
			expect(afterHttp.description).toContain(
				"{{ $('Idempotency Check').item.json.idempotency.claim_id }}",
			);
			expect(afterHttp.description).toMatch(/Field: Claim ID$/);

			// A Duplicate / In Progress item carries claim_id: null.
			const routed = await nodes.run(new IdempotencyCheck(), {
				items: [{ idempotency: { key: 'evt-fence', claim_id: null } }],
				parameters: { operation, scope: 'fence' },
				onError: 'continueErrorOutput',
			});
			expect(routed.routing()).toEqual({ Settled: [], 'Claim Lost': [], Error: [0] });
			expect(routed.output('Error')[0].json).toMatchObject({
				details: { field: 'Claim ID', http_status: 400 },
			});
			expect(await tableSnapshot(pool, schema)).toEqual(before);
			expect(await keyRow('evt-fence')).toMatchObject({ status: 'in_progress' });
		},
	);

	it('the claim item itself settles, fenced by its claim id', async () => {
		const settled = await nodes.run(new IdempotencyCheck(), {
			items: [claimed],
			parameters: { operation: 'complete', scope: 'fence', result: '={{ { done: true } }}' },
		});
		expect(settled.routing()).toEqual({ Settled: [0], 'Claim Lost': [] });
		expect(await keyRow('evt-fence')).toMatchObject({
			status: 'completed',
			claim_id: (claimed.json.idempotency as IDataObject).claim_id,
			result: { done: true },
		});
	});
});
