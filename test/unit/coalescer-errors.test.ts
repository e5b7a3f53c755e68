/**
 * The coalescer's own failures, with a sender that answers from memory: no caller may be left
 * waiting, and an error stays with the call that caused it. What PostgreSQL does with merged
 * statements is tested against a real server in test/integration/coalescing.test.ts.
 */
import { Coalescer, type SendRows } from '../../src/core/coalescer';
import { DurableJobsError } from '../../src/core/errors';
import type { RowStatement } from '../../src/core/executor';
import type { SqlQuery } from '../../src/core/sql/types';

interface Row {
	ord: number;
	job: string;
}

/** Answers every row of a statement with itself; records each statement's rows. */
function recordingSender(sent: Row[][]): SendRows {
	return async (query: SqlQuery) => {
		const rows = query.values[0] as Row[];
		sent.push(rows);
		return rows.map((row) => ({ ...row }));
	};
}

/** The coalescer takes any row type with an `ord`, as the executor hands statements to it. */
type AnyStatement = RowStatement<{ ord: number }>;

function statement(jobs: string[], sameRowKey?: (row: Row) => string): AnyStatement {
	const typed: RowStatement<Row> = {
		key: 'test',
		rows: jobs.map((job, ord) => ({ ord, job })),
		build: (rows) => ({ text: 'test', values: [rows] }),
		coalesce: true,
		sameRowKey,
	};
	return typed as unknown as AnyStatement;
}

function settled<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown }> {
	return promise.then(
		(value) => ({ value }),
		(error: unknown) => ({ error }),
	);
}

describe('coalescer errors', () => {
	it('a call whose row keys throw fails alone; the calls before and after it are answered', async () => {
		const coalescer = new Coalescer();
		const sent: Row[][] = [];
		const send = recordingSender(sent);
		const throwing = () => {
			throw new Error('no key for this row');
		};
		const byJob = (row: Row) => row.job;
		const results = await Promise.all([
			settled(coalescer.run<Row>(statement(['a'], byJob), send, 0)),
			settled(coalescer.run<Row>(statement(['b'], byJob), send, 0)),
			settled(coalescer.run<Row>(statement(['c'], throwing), send, 0)),
			settled(coalescer.run<Row>(statement(['d'], byJob), send, 0)),
		]);

		expect(results[0].value).toEqual([{ ord: 0, job: 'a' }]);
		expect(results[1].value).toEqual([{ ord: 0, job: 'b' }]);
		expect(results[2].error).toBeInstanceOf(DurableJobsError);
		expect(String((results[2].error as DurableJobsError).message)).toContain('no key for this row');
		expect(results[3].value).toEqual([{ ord: 0, job: 'd' }]);
		// c never reached the sender; the others shared a statement.
		expect(sent.map((rows) => rows.map((row) => row.job))).toEqual([['a', 'b', 'd']]);
	});

	it("a call repeating a row key of an earlier call waits for that call's flush to end; the calls behind it do not", async () => {
		const coalescer = new Coalescer();
		const order: string[] = [];
		let releaseFirst!: () => void;
		const firstSent = new Promise<void>((resolve) => (releaseFirst = resolve));
		const send: SendRows = async (query) => {
			const rows = query.values[0] as Row[];
			const jobs = rows.map((row) => row.job).join('+');
			order.push(`start ${jobs}`);
			if (jobs.includes('a1')) await firstSent;
			order.push(`end ${jobs}`);
			return rows.map((row) => ({ ...row }));
		};
		const byJob = (row: Row) => row.job.slice(0, 1);
		const first = coalescer.run<Row>(statement(['a1'], byJob), send, 0);
		// Waits behind the first flush, which stalls after 100 ms.
		await new Promise((resolve) => setImmediate(resolve));
		const repeat = coalescer.run<Row>(statement(['a2'], byJob), send, 0);
		const other = coalescer.run<Row>(statement(['b'], byJob), send, 0);
		await other;
		expect(order).toEqual(['start a1', 'start b', 'end b']);
		expect(coalescer.stats.stalledFlushes).toBe(1);
		releaseFirst();
		await Promise.all([first, repeat]);
		expect(order).toEqual(['start a1', 'start b', 'end b', 'end a1', 'start a2', 'end a2']);
	});

	it('a call that throws while its statement is built fails alone, and the next flush runs', async () => {
		const coalescer = new Coalescer();
		const sent: Row[][] = [];
		const send = recordingSender(sent);
		const broken: AnyStatement = {
			...statement(['x']),
			build: () => {
				throw new Error('cannot build');
			},
		};
		const first = settled(coalescer.run<Row>(broken, send, 0));
		expect((await first).error).toBeInstanceOf(DurableJobsError);
		expect(await coalescer.run<Row>(statement(['y']), send, 0)).toEqual([{ ord: 0, job: 'y' }]);
		expect(sent.map((rows) => rows.map((row) => row.job))).toEqual([['y']]);
	});
});
