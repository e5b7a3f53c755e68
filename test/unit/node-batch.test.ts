import {
	NodeOperationError,
	type IDataObject,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
} from 'n8n-workflow';

import {
	DatabaseUnavailableError,
	classifyDatabaseError,
	DurableJobsError,
	IdempotencyConflictError,
	ValidationError,
	type ItemResults,
} from '../../src/core';
import { JobEnqueue } from '../../nodes/JobEnqueue/JobEnqueue.node';
import { JobStatus } from '../../nodes/JobStatus/JobStatus.node';
import { runBatch } from '../../nodes/shared/batch';
import { errorItem, errorJson, invalidInput, toNodeError } from '../../nodes/shared/errors';
import { NodeContext, type OnError } from '../helpers/n8n-context';

interface Input {
	n: number;
}

/**
 * runBatch in a node that n8n-core executes (test/helpers/n8n-context.ts), with a fake core
 * call: items whose `n` is negative fail in `read` (bad parameter), items whose `n` is 13 fail
 * in the core (per-item error result), odd `n` routes to output 1. `run` is the node's outputs
 * as n8n passed them on (with the Error output when onError is continueErrorOutput).
 */
async function batch(
	values: number[],
	onError?: OnError,
	call?: (inputs: Input[], allOrNothing: boolean) => Promise<ItemResults<{ doubled: number }>>,
	errorOutput?: number,
) {
	const calls: Array<{ inputs: Input[]; allOrNothing: boolean }> = [];
	const defaultCall = async (inputs: Input[], allOrNothing: boolean) => {
		calls.push({ inputs, allOrNothing });
		return inputs.map((input) =>
			input.n === 13
				? new ValidationError('n', 'is unlucky', 'Pick another number')
				: { doubled: input.n * 2 },
		);
	};
	// Job Status's description (Get: outputs Found / Not Found) with runBatch as its execute().
	const nodeType: INodeType = Object.create(new JobStatus(), {
		execute: {
			value: async function (this: IExecuteFunctions) {
				return await runBatch<Input, { doubled: number }>(this, {
					outputs: 2,
					read: (itemIndex, item) => {
						const n = item.json.n as number;
						if (n < 0)
							throw invalidInput('n', `item ${itemIndex} is negative`, 'Use a positive number');
						return { n };
					},
					call: call ?? defaultCall,
					route: (result, itemIndex, input) => ({
						output: input.n % 2,
						json: { doubled: result.doubled, itemIndex },
					}),
					errorOutput,
				});
			},
		},
	});
	const ctx = new NodeContext(nodeType, {
		items: values.map((n) => ({ n, tag: `item-${n}` })),
		onError,
	});
	const run = ctx.run().then((result) => result.outputs);
	return { ctx, calls, run };
}

function paired(items: INodeExecutionData[]): number[] {
	return items.map((item) => (item.pairedItem as { item: number }).item);
}

describe('runBatch: the per-item contract every node shares', () => {
	it('routes each result to its output with pairedItem, calling the core once for all items', async () => {
		const { calls, run } = await batch([2, 3, 4, 5]);
		const [even, odd] = await run;
		expect(calls).toEqual([
			{ inputs: [{ n: 2 }, { n: 3 }, { n: 4 }, { n: 5 }], allOrNothing: true },
		]);
		expect(even).toEqual([
			{ json: { doubled: 4, itemIndex: 0 }, pairedItem: { item: 0 } },
			{ json: { doubled: 8, itemIndex: 2 }, pairedItem: { item: 2 } },
		]);
		expect(odd.map((item) => item.json.doubled)).toEqual([6, 10]);
		expect(paired(odd)).toEqual([1, 3]);
	});

	it('without continue-on-fail a bad parameter stops the node before the core is called, naming the item', async () => {
		const { calls, run } = await batch([2, -1, 4]);
		const error = await run.catch((caught: unknown) => caught);
		expect(error).toBeInstanceOf(NodeOperationError);
		expect((error as NodeOperationError).context.itemIndex).toBe(1);
		expect((error as NodeOperationError).message).toBe('n: item 1 is negative');
		expect((error as NodeOperationError).description).toBe('Use a positive number — Field: n');
		expect(calls).toEqual([]);
	});

	it('with continue (error output) bad items go to the error output with their input merged; the rest proceed', async () => {
		const { ctx, calls, run } = await batch([2, -1, 4, -3, 5], 'continueErrorOutput');
		const [even, odd, errors] = await run;
		// Only the good items reach the core, and its results map back to the right items.
		expect(calls).toEqual([{ inputs: [{ n: 2 }, { n: 4 }, { n: 5 }], allOrNothing: false }]);
		expect(ctx.outputNames()).toEqual(['Found', 'Not Found', 'Error']);
		expect(even.map((item) => item.json)).toEqual([
			{ doubled: 4, itemIndex: 0 },
			{ doubled: 8, itemIndex: 2 },
		]);
		expect(paired(even)).toEqual([0, 2]);
		expect(odd.map((item) => item.json)).toEqual([{ doubled: 10, itemIndex: 4 }]);
		expect(paired(odd)).toEqual([4]);
		expect(paired(errors)).toEqual([1, 3]);
		expect(errors[0].json).toMatchObject({
			n: -1,
			tag: 'item--1',
			error: 'n: item 1 is negative',
			details: {
				code: 'invalid_input',
				field: 'n',
				fix: 'Use a positive number',
				http_status: 400,
			},
		});
		expect(errors.every((item) => item.error === undefined)).toBe(true);
	});

	it('with continue (regular output) bad items stay on the first output, flagged with the error', async () => {
		const { run } = await batch([-1, 3], 'continueRegularOutput');
		const [first, second] = await run;
		expect(paired(first)).toEqual([0]);
		expect(first[0].json.error).toBe('n: item 0 is negative');
		expect(paired(second)).toEqual([1]);
	});

	it('a node that names an error output sends failed items there with continue (regular output), and to the error output with continue (error output)', async () => {
		// Bad parameter (-1), a per-item error from the core (13), a good item on each output.
		const regular = await batch([-1, 2, 13, 3], 'continueRegularOutput', undefined, 1);
		const [first, second] = await regular.run;
		expect(paired(first)).toEqual([1]);
		expect(paired(second).sort()).toEqual([0, 2, 3]);
		expect(second.filter((item) => item.json.error).map((item) => item.json.error)).toEqual([
			'n: item 0 is negative',
			'n: is unlucky',
		]);
		expect(first.some((item) => item.json.error !== undefined)).toBe(false);

		// A whole call that fails sends every item it held there too.
		const unavailable = async () => {
			throw new DatabaseUnavailableError('The database is unreachable', 'Start it');
		};
		const down = await batch([2, 3], 'continueRegularOutput', unavailable, 1);
		const [none, all] = await down.run;
		expect(none).toEqual([]);
		expect(paired(all)).toEqual([0, 1]);
		expect(all.every((item) => item.json.details !== undefined)).toBe(true);

		const errorOutput = await batch([-1, 2, 13, 3], 'continueErrorOutput', undefined, 1);
		const [even, odd, errors] = await errorOutput.run;
		expect(paired(even)).toEqual([1]);
		expect(paired(odd)).toEqual([3]);
		expect(paired(errors).sort()).toEqual([0, 2]);
	});

	it('a per-item error from the core fails only that item (continue) or names it (stop)', async () => {
		const continued = await batch([2, 13, 4], 'continueErrorOutput');
		const [even, , errors] = await continued.run;
		expect(paired(even)).toEqual([0, 2]);
		expect(paired(errors)).toEqual([1]);
		expect(errors[0].json).toMatchObject({
			n: 13,
			error: 'n: is unlucky',
			details: { field: 'n' },
		});

		const stopped = await batch([2, 13]);
		const error = await stopped.run.catch((caught: unknown) => caught);
		expect(error).toBeInstanceOf(NodeOperationError);
		expect((error as NodeOperationError).context.itemIndex).toBe(1);
	});

	it('a batch error thrown by the core names the input item, accounting for items skipped before', async () => {
		// Position 1 among the items passed to the core is input item 2 (item 1 was filtered out).
		const failing = async (inputs: Input[]) => {
			const error = new IdempotencyConflictError('key-1', '0190aaaa-0000-7000-8000-000000000000');
			error.itemPosition = inputs.findIndex((input) => input.n === 4);
			throw error;
		};
		const continued = await batch([2, -1, 4], 'continueErrorOutput', failing);
		const [even, odd, errors] = await continued.run;
		expect(even).toEqual([]);
		expect(odd).toEqual([]);
		// With continue the whole call failed, so every item that reached it goes to the error output.
		expect(paired(errors).sort()).toEqual([0, 1, 2]);
		expect(errors.find((item) => paired([item])[0] === 2)!.json).toMatchObject({
			details: {
				code: 'idempotency_key_reused',
				http_status: 422,
				existing_job_id: '0190aaaa-0000-7000-8000-000000000000',
			},
		});

		const stopped = await batch([2, 4], undefined, failing);
		const error = (await stopped.run.catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.context.itemIndex).toBe(1);
		expect(error.message).toMatch(
			/Idempotency key "key-1" was already used with a different payload/,
		);
		expect(error.description).toMatch(/Field: idempotencyKey/);
	});

	it('a database outage without continue is one NodeOperationError without an item', async () => {
		const down = async () => {
			throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
		};
		const { run } = await batch([1, 2], undefined, down);
		const error = (await run.catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		// n8n's NodeError swaps messages containing ECONNREFUSED for its own wording and keeps ours.
		expect(error.message).toBe('The service refused the connection - perhaps it is offline');
		expect(error.messages).toContain('PostgreSQL is unreachable (ECONNREFUSED)');
		expect(error.description).toMatch(/Check that PostgreSQL is running and that Host and Port/);
		expect(error.context.itemIndex).toBeUndefined();
	});

	it('an item the core returned no result for is an error, not a silently dropped item', async () => {
		const shifted = async (inputs: Input[]) => {
			const results: ItemResults<{ doubled: number }> = new Array(inputs.length);
			results[0] = { doubled: inputs[0].n * 2 };
			return results;
		};
		const continued = await batch([2, 4], 'continueErrorOutput', shifted);
		const [even, , errors] = await continued.run;
		expect(paired(even)).toEqual([0]);
		expect(paired(errors)).toEqual([1]);
		expect((errors[0].json.details as { code: string }).code).toBe('no_result');
	});
});

describe('error mapping', () => {
	const node = new NodeContext(new JobEnqueue()).node;

	it('toNodeError names the message, the fix and the field, and keeps the item index', () => {
		const error = toNodeError(
			node,
			new ValidationError(
				'queue',
				'"bad queue" is not a valid queue name',
				'Use letters and digits',
			),
			3,
		);
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.message).toBe('queue: "bad queue" is not a valid queue name');
		expect(error.description).toBe('Use letters and digits — Field: queue');
		expect(error.context.itemIndex).toBe(3);
		expect(error.node.name).toBe('Job Enqueue');
	});

	it('toNodeError passes NodeOperationErrors through and classifies driver errors', () => {
		const original = new NodeOperationError(node, 'already mapped', { itemIndex: 2 });
		expect(toNodeError(node, original, 5)).toBe(original);
		const auth = toNodeError(
			node,
			Object.assign(new Error('password authentication failed for user "x"'), { code: '28P01' }),
			undefined,
		);
		expect(auth.message).toBe('PostgreSQL rejected the user name or password');
		expect(auth.description).toMatch(/Check User and Password/);
		// pg's own words when a SCRAM server asks for a password and none (or an empty one) is set.
		for (const missing of ['a string', 'a non-empty string']) {
			const noPassword = toNodeError(
				node,
				new Error(`SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be ${missing}`),
			);
			expect(noPassword.message).toBe(
				'PostgreSQL asks for a password, and the credential has none',
			);
			expect(noPassword.description).toMatch(/Fill in Password/);
		}
		const missingDb = toNodeError(
			node,
			Object.assign(new Error('database "nope" does not exist'), { code: '3D000' }),
		);
		expect(missingDb.message).toMatch(/does not exist/);
	});

	it('errorJson gives the receiver what it needs to answer: code, field, fix and HTTP status', () => {
		expect(errorJson(new IdempotencyConflictError('k1', 'job-1'))).toEqual({
			error: 'Idempotency key "k1" was already used with a different payload',
			details: {
				code: 'idempotency_key_reused',
				field: 'idempotencyKey',
				fix: 'Send the original payload again, or use a new idempotency key for a different request',
				http_status: 422,
				existing_job_id: 'job-1',
			},
		});
		expect(
			errorJson(new DatabaseUnavailableError('PostgreSQL is unreachable', 'Start it')),
		).toEqual({
			error: 'PostgreSQL is unreachable',
			details: {
				code: 'database_unavailable',
				field: null,
				fix: 'Start it',
				http_status: 503,
				setup_fault: false,
			},
		});
		// A server error says whether a retry can get past it (a receiver's 503) or the setup
		// must be fixed first (its 500).
		expect(
			errorJson(
				classifyDatabaseError(
					Object.assign(new Error('password authentication failed'), { code: '28P01' }),
				),
			).details,
		).toMatchObject({ code: 'database_unavailable', http_status: 503, setup_fault: true });
		expect(
			errorJson(new NodeOperationError(node, 'bad parameter', { description: 'fix it' })),
		).toMatchObject({ error: 'bad parameter', details: { fix: 'fix it', http_status: 400 } });
	});

	it('errorItem is exactly { error, details } with the pairedItem, the shape n8n routes to the error output and keeps', () => {
		const item = errorItem(
			node,
			new DurableJobsError('x', 'boom', { field: 'f', fix: 'do y', httpStatus: 400 }),
			4,
		);
		expect(item.pairedItem).toEqual({ item: 4 });
		expect(item.json).toEqual({
			error: 'boom',
			details: { code: 'x', field: 'f', fix: 'do y', http_status: 400 },
		});
		// An `error` property would make n8n replace the JSON with { error: message } and lose the details.
		expect(item.error).toBeUndefined();
	});

	it('an expression that fails in a parameter is reported as a parameter problem, not as a database error', async () => {
		const ctx = new NodeContext(new JobEnqueue(), {
			parameters: { idempotencyKey: "={{ $('No Such Node').item.json.id }}" },
			items: [{ a: 1 }],
		});
		const read = jest.fn(
			(itemIndex: number) =>
				ctx.context.getNodeParameter('idempotencyKey', itemIndex) as IDataObject,
		);
		const error = (await runBatch(ctx.context, {
			outputs: 1,
			read,
			call: async () => [],
			route: () => ({ output: 0, json: {} }),
		}).catch((caught: unknown) => caught)) as NodeOperationError;
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(error.context.itemIndex).toBe(0);
		expect(error.message).toMatch(/Referenced node doesn't exist/);
		expect(error.message).not.toMatch(/Database error/);
		expect(error.description).toMatch(/Field: idempotencyKey/);
		expect(error.description).not.toMatch(/PostgreSQL log/);
		expect(errorJson(new Error('plain bug'))).toMatchObject({
			details: { code: 'database_error' },
		});
	});
});
