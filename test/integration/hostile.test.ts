import { DurableJobsError } from '../../src/core';
import { ok, tableSnapshot, useTestSchema } from '../helpers/db';

const { schema, pool, store } = useTestSchema(__filename, {
	poolSize: 10,
	migrate: true,
	storeOptions: { maxPayloadBytes: 4 * 1024 * 1024 },
});

const HOSTILE = [
	`'; DROP TABLE ${'jobs'}; --`,
	`" OR "1"="1`,
	`Robert'); DELETE FROM jobs WHERE ('1'='1`,
	`$1 $$ $body$ \\x00 \\'`,
	'Ünïcödé — 日本語 — 🚀 — עברית — ‮RTL',
	'%s %n %x {{ $json.secret }} ${process.env.HOME}',
];
const BIG = 'x'.repeat(1024 * 1024);

describe('hostile text is data', () => {
	it('every text field of enqueue → lease → complete stores hostile strings verbatim', async () => {
		for (const text of HOSTILE) {
			const enqueued = ok(
				(
					await store.enqueue([
						{
							queue: 'hostile',
							payload: { text, [text]: text },
							idempotencyKey: text,
							orderingKey: text,
							correlationId: text,
						},
					])
				)[0],
			);
			const again = ok(
				(
					await store.enqueue([
						{ queue: 'hostile', payload: { text, [text]: text }, idempotencyKey: text },
					])
				)[0],
			);
			expect(again.jobId).toBe(enqueued.jobId);
			const [job] = await store.lease({ queue: 'hostile', workflowId: text, executionId: text });
			expect(job.payload).toEqual({ text, [text]: text });
			expect(job.idempotency_key).toBe(text);
			ok(
				(
					await store.complete([
						{
							jobId: job.id,
							attemptId: job.attempt_id,
							outcome: 'failed',
							errorCode: text,
							errorMessage: text,
							errorNode: text,
							errorWorkflow: text,
							errorExecution: text,
						},
					])
				)[0],
			);
			const row = (
				await pool.query(
					`SELECT error_code, error_message, error_node, ordering_key, correlation_id FROM ${schema}.jobs WHERE id = $1`,
					[job.id],
				)
			).rows[0];
			expect(Object.values(row)).toEqual([text, text, text, text, text]);
		}
		const tables = await pool.query(
			`SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1`,
			[schema],
		);
		expect(tables.rows.map((row) => row.tablename)).toEqual([
			'entity_versions',
			'idempotency_keys',
			'job_attempt_records',
			'job_counts',
			'jobs',
			'migrations',
			'settings',
		]);
	});

	it('idempotency scope/key/result and guard fields store hostile strings verbatim', async () => {
		for (const text of HOSTILE) {
			const claim = ok(
				(
					await store.claim([
						{
							scope: text,
							key: text,
							fingerprint: text,
							guard: { entityKey: text, state: text, stateOrder: [text] },
						},
					])
				)[0],
			);
			expect(claim.route).toBe('new');
			ok(
				(
					await store.completeClaims([
						{ scope: text, key: text, claimId: claim.claimId, result: { text } },
					])
				)[0],
			);
			const dup = ok((await store.claim([{ scope: text, key: text, fingerprint: text }]))[0]);
			expect(dup).toMatchObject({ route: 'duplicate', storedResult: { text } });
		}
	});

	it('1 MB strings are stored when within the limit, and over-long keys are rejected with the field named', async () => {
		const enqueued = ok((await store.enqueue([{ queue: 'big', payload: { doc: BIG } }]))[0]);
		const [job] = await store.lease({ queue: 'big' });
		expect(job.id).toBe(enqueued.jobId);
		expect((job.payload as { doc: string }).doc.length).toBe(BIG.length);
		ok(
			(
				await store.complete([
					{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded', result: { echo: BIG } },
				])
			)[0],
		);
		const before = await tableSnapshot(pool, schema);
		const results = await store.enqueue([
			{ queue: 'big', payload: {}, idempotencyKey: BIG },
			{ queue: 'big', payload: {}, orderingKey: BIG },
			{ queue: 'big', payload: {}, correlationId: BIG },
			{ queue: BIG, payload: {} },
		]);
		expect(results.map((result) => (result as DurableJobsError).field)).toEqual([
			'idempotencyKey',
			'orderingKey',
			'correlationId',
			'queue',
		]);
		const claims = await store.claim([{ scope: 's', key: BIG }]);
		expect((claims[0] as DurableJobsError).field).toBe('key');
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	it('NUL characters are rejected with a clear message, nothing written', async () => {
		const before = await tableSnapshot(pool, schema);
		const results = await store.enqueue([
			{ queue: 'nul', payload: { text: 'a\u0000b' } },
			{ queue: 'nul', payload: {}, correlationId: 'a\u0000b' },
			{ queue: 'nul', payload: {}, idempotencyKey: 'a\u0000b' },
		]);
		for (const result of results) {
			expect(result).toBeInstanceOf(DurableJobsError);
			expect((result as DurableJobsError).message).toMatch(/NUL|control/);
		}
		expect(await tableSnapshot(pool, schema)).toEqual(before);
	});

	it('non-JSON payloads (circular, BigInt) are rejected before any SQL', async () => {
		const circular: Record<string, unknown> = {};
		circular.self = circular;
		const results = await store.enqueue([
			{ queue: 'json', payload: circular },
			{ queue: 'json', payload: { n: BigInt(1) } },
		]);
		expect(
			results.every((result) => result instanceof DurableJobsError && result.field === 'payload'),
		).toBe(true);
	});
});
