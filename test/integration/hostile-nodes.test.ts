/**
 * Hostile input through every node, executed by n8n-core's WorkflowExecute
 * (test/helpers/n8n-context.ts). Each case answers with a NodeOperationError that names the
 * field (or, for fenced writes and status lookups, the documented "Lease Lost" / "Claim Lost" /
 * "Not Found" output) and leaves every table of the job schema exactly as it was. For input
 * that is rejected by validation, the test also proves that no SQL reached the database (the
 * node's pool is instrumented). SQL-injection strings in text fields that are valid data are
 * stored verbatim and change nothing else. The list of cases and their answers is printed at
 * the end of the run (and summarised in docs/SECURITY.md).
 */
import { randomBytes } from 'node:crypto';
import { WorkflowHasIssuesError } from 'n8n-core';
import {
	NodeOperationError,
	type ICredentialDataDecryptedObject,
	type IDataObject,
	type INodeType,
} from 'n8n-workflow';

import { finishNoticesSent, getPool, resetMigrationCache } from '../../src/core';
import { IdempotencyCheck } from '../../nodes/IdempotencyCheck/IdempotencyCheck.node';
import { JobComplete } from '../../nodes/JobComplete/JobComplete.node';
import { JobEnqueue } from '../../nodes/JobEnqueue/JobEnqueue.node';
import { JobLease } from '../../nodes/JobLease/JobLease.node';
import { JobStatus } from '../../nodes/JobStatus/JobStatus.node';
import { OutboxWrite } from '../../nodes/OutboxWrite/OutboxWrite.node';
import { credentialToConfig } from '../../nodes/shared/connection';
import { freePort, startPostgres, type RunningPostgres } from '../../scripts/lib/postgres';
import { databaseUrl, testSchema, useTestSchema } from '../helpers/db';
import {
	credentialFor,
	nodeRunner,
	webhookItem,
	type NodeContextOptions,
	type RunResult,
} from '../helpers/n8n-context';

// The pid keeps a concurrent run of this file (e.g. a full suite run by someone else) apart.
const bizSchema = testSchema(__filename, `business-${process.pid}`);
const missingSchema = testSchema(__filename, `never-migrated-${process.pid}`);
const { schema, pool } = useTestSchema(__filename, {
	suffix: `${process.pid}`,
	poolSize: 6,
	otherSchemas: [missingSchema, bizSchema],
	closeCachedPools: true,
});
const nodes = nodeRunner(schema);

/** Strings that would do damage if they reached SQL as text. */
const INJECTIONS = [
	`x'; DROP TABLE "${schema}".jobs; --`,
	`x"; DELETE FROM "${schema}".settings; --`,
	`') OR ('1'='1`,
	`$1; TRUNCATE "${schema}".job_attempts CASCADE; --`,
	`$$; DROP SCHEMA "${schema}" CASCADE; $$`,
	`\\'; SELECT pg_sleep(10); --`,
];

interface CaseRecord {
	node: string;
	name: string;
	answer: string;
}
const cases: CaseRecord[] = [];

/** Counts every statement and connection the nodes' pool sees (the pool is shared through the cache). */
const sql = { count: 0 };
function instrument(credential: ICredentialDataDecryptedObject): void {
	const target = getPool(credentialToConfig(credential)) as unknown as {
		query: (...args: unknown[]) => unknown;
		connect: (...args: unknown[]) => unknown;
	};
	const query = target.query.bind(target);
	const connect = target.connect.bind(target);
	target.query = (...args: unknown[]) => {
		sql.count++;
		return query(...args);
	};
	target.connect = (...args: unknown[]) => {
		sql.count++;
		return connect(...args);
	};
}

/** Every row of every table of the job schema and of the business schema, as text, sorted. */
async function snapshot(): Promise<Record<string, string[]>> {
	const { rows: tables } = await pool.query<{ schemaname: string; tablename: string }>(
		'SELECT schemaname, tablename FROM pg_tables WHERE schemaname = ANY($1) ORDER BY 1, 2',
		[[schema, bizSchema]],
	);
	const result: Record<string, string[]> = {};
	for (const { schemaname, tablename } of tables) {
		const { rows } = await pool.query<{ row: string }>(
			`SELECT t::text AS row FROM "${schemaname}"."${tablename}" t ORDER BY 1`,
		);
		result[`${schemaname}.${tablename}`] = rows.map((row) => row.row);
	}
	return result;
}

function nodeName(nodeType: INodeType): string {
	return nodeType.description.displayName;
}

/**
 * Runs a node that must fail: a NodeOperationError whose message or description names `field`,
 * nothing changed in any table, and (with `noSql`) not one statement sent.
 */
async function rejects(
	name: string,
	nodeType: INodeType,
	options: NodeContextOptions,
	expected: { field?: string; message: RegExp; noSql?: boolean },
): Promise<NodeOperationError> {
	// An earlier completion's finish notice (sent after it) is not this case's.
	await finishNoticesSent();
	const before = await snapshot();
	const statements = sql.count;
	const error = await nodes.run(nodeType, options).then(
		() => undefined,
		(caught: unknown) => caught,
	);
	expect(error, name).toBeInstanceOf(NodeOperationError);
	const nodeError = error as NodeOperationError;
	expect(nodeError.message, name).toMatch(expected.message);
	if (expected.field)
		expect(`${nodeError.message} ${nodeError.description ?? ''}`, name).toContain(expected.field);
	if (expected.noSql !== false) expect(sql.count - statements, `${name}: statements sent`).toBe(0);
	expect(await snapshot(), name).toEqual(before);
	cases.push({
		node: nodeName(nodeType),
		name,
		answer: `NodeOperationError "${nodeError.message}"${nodeError.description ? ` — ${nodeError.description}` : ''}`,
	});
	return nodeError;
}

/** Runs a node that answers on a non-error output (Lease Lost, Not Found, …) and must change nothing. */
async function answersWithoutWriting(
	name: string,
	nodeType: INodeType,
	options: NodeContextOptions,
	output: string,
): Promise<RunResult> {
	const before = await snapshot();
	const result = await nodes.run(nodeType, options);
	const items = result.output(output);
	expect(items.length, name).toBeGreaterThan(0);
	expect(await snapshot(), name).toEqual(before);
	cases.push({
		node: nodeName(nodeType),
		name,
		answer: `output "${output}": ${JSON.stringify(items[0].json).slice(0, 160)}`,
	});
	return result;
}

let alpha: IDataObject[];
let beta: IDataObject[];
let leasedAlpha: IDataObject;
let leasedBeta: IDataObject;
let outboxJobId: string;

beforeAll(async () => {
	await pool.query(`CREATE SCHEMA "${bizSchema}"`);
	await pool.query(
		`CREATE TABLE "${bizSchema}".orders (id text PRIMARY KEY, status text NOT NULL CHECK (status IN ('new', 'paid')))`,
	);
	resetMigrationCache();
	instrument(credentialFor(databaseUrl(), schema));
	// Fixtures: two queued jobs in "alpha", one in "beta", one of each leased, an outbox event,
	// a completed idempotency claim.
	alpha = (
		await nodes.run(new JobEnqueue(), {
			items: [{ n: 1 }, { n: 2 }],
			parameters: { queue: 'alpha' },
		})
	)
		.output('main')
		.map((item) => item.json);
	beta = (await nodes.run(new JobEnqueue(), { items: [{ n: 3 }], parameters: { queue: 'beta' } }))
		.output('main')
		.map((item) => item.json);
	[leasedAlpha] = (await nodes.run(new JobLease(), { parameters: { queue: 'alpha', maxJobs: 1 } }))
		.output('Leased')
		.map((item) => item.json);
	[leasedBeta] = (await nodes.run(new JobLease(), { parameters: { queue: 'beta', maxJobs: 1 } }))
		.output('Leased')
		.map((item) => item.json);
	const [event] = (
		await nodes.run(new OutboxWrite(), {
			items: [{ id: 'o-1' }],
			parameters: { eventType: 'order.paid' },
		})
	).output('main');
	outboxJobId = String((event.json.outbox as IDataObject).job_id);
	const [claimed] = (
		await nodes.run(new IdempotencyCheck(), {
			items: [{ event_id: 'evt-1' }],
			parameters: { scope: 'events', key: '={{ $json.event_id }}' },
		})
	).output('New');
	await nodes.run(new IdempotencyCheck(), {
		items: [claimed],
		parameters: { operation: 'complete', scope: 'events' },
	});
});

afterAll(() => {
	console.log(
		`[hostile-nodes] ${cases.length} cases:\n${cases.map((entry, index) => `  ${String(index + 1).padStart(2)}. ${entry.node} — ${entry.name}\n      → ${entry.answer}`).join('\n')}`,
	);
});

describe('Job Enqueue', () => {
	it('a SQL-injection queue name is rejected before SQL', async () => {
		for (const queue of INJECTIONS.slice(0, 2)) {
			await rejects(
				`queue = ${JSON.stringify(queue)}`,
				new JobEnqueue(),
				{ items: [{ a: 1 }], parameters: { queue } },
				{ field: 'queue', message: /is not a valid queue name/ },
			);
		}
	});

	it('idempotency keys of 256+ characters, with control characters, or only spaces (parameter and Idempotency-Key header)', async () => {
		await rejects(
			'idempotency key of 256 characters',
			new JobEnqueue(),
			{ items: [{ a: 1 }], parameters: { idempotencyKey: 'k'.repeat(256) } },
			{ field: 'idempotencyKey', message: /is 256 characters long; the limit is 255/ },
		);
		await rejects(
			'Idempotency-Key header of 10,000 characters',
			new JobEnqueue(),
			{ items: [webhookItem({ a: 1 }, { 'idempotency-key': 'k'.repeat(10_000) })] },
			{ field: 'idempotencyKey', message: /the limit is 255/ },
		);
		for (const [label, key] of [
			['newline', 'order-1\nSet-Cookie: x=1'],
			['tab', 'order\t1'],
			['bell', 'order\u00071'],
			['DEL', 'order\u007f1'],
			['NUL', 'order\u00001'],
		]) {
			await rejects(
				`Idempotency-Key header with a ${label}`,
				new JobEnqueue(),
				{ items: [webhookItem({ a: 1 }, { 'idempotency-key': key })] },
				{ field: 'idempotencyKey', message: /control characters/ },
			);
		}
		await rejects(
			'Idempotency-Key header of only spaces',
			new JobEnqueue(),
			{ items: [webhookItem({ a: 1 }, { 'idempotency-key': '     ' })] },
			{ field: 'idempotencyKey', message: /empty or only spaces/ },
		);
		await rejects(
			'idempotency key parameter of only spaces',
			new JobEnqueue(),
			{ items: [{ a: 1 }], parameters: { idempotencyKey: '   ' } },
			{ field: 'idempotencyKey', message: /empty or only spaces/ },
		);
	});

	it('a Custom Payload that is not JSON, an expression that returns undefined, a payload with NUL', async () => {
		await rejects(
			'Custom Payload "{"document": " (malformed JSON)',
			new JobEnqueue(),
			{ items: [{ a: 1 }], parameters: { payloadSource: 'custom', payload: '{"document": ' } },
			{ field: 'Custom Payload', message: /is not valid JSON/ },
		);
		await rejects(
			'Custom Payload "not json at all"',
			new JobEnqueue(),
			{ items: [{ a: 1 }], parameters: { payloadSource: 'custom', payload: 'not json at all' } },
			{ field: 'Custom Payload', message: /is not valid JSON/ },
		);
		await rejects(
			'Custom Payload expression returning undefined',
			new JobEnqueue(),
			{
				items: [{ a: 1 }],
				parameters: { payloadSource: 'custom', payload: '={{ $json.missing }}' },
			},
			{ field: 'payload', message: /payload: is missing/ },
		);
		await rejects(
			'payload with a NUL character',
			new JobEnqueue(),
			{ items: [webhookItem({ text: 'a\u0000b' })] },
			{ field: 'payload', message: /NUL/ },
		);
	});

	it('a payload above the size limit (default 1 MB) is a 413-class error; with the error output it carries http_status 413', async () => {
		const big = webhookItem({ document: { id: 'big', text: 'x'.repeat(1024 * 1024) } });
		const refused = await rejects(
			'payload of 1,048,611 bytes (default limit 1,048,576 bytes)',
			new JobEnqueue(),
			{ items: [big] },
			{ field: 'payload', message: /is 1048611 bytes; the limit is 1048576/ },
		);
		expect(refused.description).toContain(
			'Send a smaller payload (store large documents elsewhere and pass a reference), or raise Max Payload Size (KB) in Options (now 1024)',
		);
		// Outbox Write has no size option: its fix offers no limit to raise.
		const outboxRefused = await rejects(
			'Outbox Write payload of 1,048,602 bytes',
			new OutboxWrite(),
			{
				items: [{ text: 'x'.repeat(1024 * 1024) }],
				parameters: { eventType: 'order.paid' },
			},
			{ field: 'payload', message: /the limit is 1048576/ },
		);
		expect(outboxRefused.description).toContain(
			'Send a smaller payload (store large documents elsewhere and pass a reference)',
		);
		expect(outboxRefused.description).not.toContain('raise');
		const before = await snapshot();
		const routed = await nodes.run(new JobEnqueue(), {
			items: [big],
			onError: 'continueErrorOutput',
		});
		expect(routed.routing()).toEqual({ Success: [], Error: [0] });
		expect(routed.output('Error')[0].json).toMatchObject({
			details: { code: 'payload_too_large', http_status: 413, field: 'payload' },
		});
		expect(await snapshot()).toEqual(before);
	});

	it('expressions that return undefined for the queue; bad options (callback URL, run at, attempts, priority)', async () => {
		await rejects(
			'Queue expression returning undefined',
			new JobEnqueue(),
			{ items: [{ a: 1 }], parameters: { queue: '={{ $json.queue }}' } },
			{ field: 'queue', message: /"undefined" is not a valid queue name/ },
		);
		await rejects(
			'Callback URL javascript:',
			new JobEnqueue(),
			{ items: [{ a: 1 }], parameters: { options: { callbackUrl: 'javascript:alert(1)' } } },
			{ field: 'callbackUrl', message: /only http and https/ },
		);
		await rejects(
			'Callback URL that is not a URL',
			new JobEnqueue(),
			{ items: [{ a: 1 }], parameters: { options: { callbackUrl: `'; DROP TABLE jobs; --` } } },
			{ field: 'callbackUrl', message: /is not a URL/ },
		);
		await rejects(
			'Run At that is not a date',
			new JobEnqueue(),
			{ items: [{ a: 1 }], parameters: { options: { runAt: '={{ "tomorrow-ish" }}' } } },
			{ field: 'Run At', message: /is not a date and time/ },
		);
		await rejects(
			'Max Attempts 0',
			new JobEnqueue(),
			{ items: [{ a: 1 }], parameters: { options: { maxAttempts: 0 } } },
			{ field: 'maxAttempts', message: /whole number from 1 to 1000/ },
		);
		await rejects(
			'Priority 1e9',
			new JobEnqueue(),
			{ items: [{ a: 1 }], parameters: { options: { priority: 1e9 } } },
			{ field: 'priority', message: /whole number from -1000 to 1000/ },
		);
		await rejects(
			'Correlation ID of 256 characters',
			new JobEnqueue(),
			{ items: [{ a: 1 }], parameters: { options: { correlationId: 'c'.repeat(256) } } },
			{ field: 'correlationId', message: /the limit is 255/ },
		);
	});

	it('one bad item in a batch writes nothing for the good items before it', async () => {
		const error = await rejects(
			'batch of 3 where item 2 has a 300-character key',
			new JobEnqueue(),
			{
				items: [{ k: 'ok-1' }, { k: 'ok-2' }, { k: 'x'.repeat(300) }],
				parameters: { idempotencyKey: '={{ $json.k }}' },
			},
			{ field: 'idempotencyKey', message: /the limit is 255/ },
		);
		expect(error.context.itemIndex).toBe(2);
	});

	it('SQL-injection strings in every text parameter and in the payload are stored verbatim as data and change nothing else', async () => {
		const before = await snapshot();
		const items = INJECTIONS.map((text, n) => ({ text, n }));
		const result = await nodes.run(new JobEnqueue(), {
			items,
			parameters: {
				queue: 'injection',
				payloadSource: 'custom',
				payload: '={{ { [$json.text]: $json.text, nested: { text: $json.text } } }}',
				idempotencyKey: '={{ $json.text }}',
				options: {
					orderingKey: '={{ $json.text }}',
					correlationId: '={{ $json.text }}',
					callbackUrl:
						'={{ "https://example.com/hook?q=" + encodeURIComponent($json.text) + "#" + $json.text }}',
				},
			},
		});
		const out = result.output('main');
		expect(out).toHaveLength(INJECTIONS.length);
		const after = await snapshot();
		// Only new rows in jobs; every other table and every existing row unchanged.
		for (const table of Object.keys(before)) {
			if (table === `${schema}.jobs`) continue;
			expect(after[table], table).toEqual(before[table]);
		}
		expect(
			after[`${schema}.jobs`].filter((row) => !before[`${schema}.jobs`].includes(row)),
		).toHaveLength(INJECTIONS.length);
		expect(before[`${schema}.jobs`].every((row) => after[`${schema}.jobs`].includes(row))).toBe(
			true,
		);
		const { rows } = await pool.query(
			`SELECT payload, idempotency_key, ordering_key, correlation_id, callback_url FROM "${schema}".jobs WHERE queue = 'injection' ORDER BY seq`,
		);
		rows.forEach((row, n) => {
			const text = INJECTIONS[n];
			expect(row).toMatchObject({
				payload: { [text]: text, nested: { text } },
				idempotency_key: text,
				ordering_key: text,
				correlation_id: text,
			});
			expect(new URL(row.callback_url).searchParams.get('q')).toBe(text);
		});
		cases.push({
			node: 'Job Enqueue',
			name: `${INJECTIONS.length} SQL-injection strings in payload keys/values, idempotency key, ordering key, correlation id, callback URL`,
			answer: 'stored verbatim (read back equal); no other row or table changed',
		});
	});
});

describe('the credential: schema names, passwords, databases, migrations', () => {
	it('a SQL-injection schema name is rejected before any connection is made (the host does not even exist)', async () => {
		const port = await freePort();
		for (const bad of [
			`durable_jobs"; DROP SCHEMA public CASCADE; --`,
			`public`,
			`pg_catalog`,
			`Durable-Jobs`,
			`a`.repeat(51),
		]) {
			const credential = credentialFor(databaseUrl(), bad, { port });
			const error = (await nodes
				.run(new JobEnqueue(), { items: [{ a: 1 }], credential })
				.catch((caught: unknown) => caught)) as NodeOperationError;
			expect(error).toBeInstanceOf(NodeOperationError);
			expect(error.message).toMatch(/^schema: "/);
			expect(error.message).toMatch(/is not a valid schema name|is reserved or shared/);
			expect(error.description).toMatch(/Field: schema/);
			cases.push({
				node: 'Job Enqueue (credential)',
				name: `schema ${JSON.stringify(bad.slice(0, 60))}`,
				answer: `NodeOperationError "${error.message}" — ${error.description}`,
			});
		}
		// And against the real server: no schema of that name (or any other) appeared.
		const credential = credentialFor(databaseUrl(), `x"; CREATE SCHEMA djt_pwned; --`);
		const error = await nodes
			.run(new JobLease(), { credential, parameters: { queue: 'alpha' } })
			.catch((caught: unknown) => caught);
		expect(error).toBeInstanceOf(NodeOperationError);
		expect(
			(
				await pool.query(
					`SELECT nspname FROM pg_namespace WHERE nspname LIKE '%pwned%' OR nspname LIKE 'x"%'`,
				)
			).rows,
		).toEqual([]);
	});

	it('migrations missing with Auto-Migrate off: every node fails with the fix and creates nothing', async () => {
		const credential = credentialFor(databaseUrl(), missingSchema, { autoMigrate: false });
		for (const [nodeType, options] of everyNode()) {
			const error = (await nodes
				.run(nodeType, { ...options, credential })
				.catch((caught: unknown) => caught)) as NodeOperationError;
			expect(error, nodeName(nodeType)).toBeInstanceOf(NodeOperationError);
			expect(error.message).toContain(
				`Schema "${missingSchema}" is missing migrations: 0001_jobs.sql`,
			);
			expect(error.description).toMatch(
				/Turn on "Auto-Migrate".*node node_modules\/n8n-nodes-durable-jobs\/dist\/src\/cli\.js migrate --schema .*Field: autoMigrate/,
			);
			cases.push({
				node: nodeName(nodeType),
				name: 'migrations missing, Auto-Migrate off',
				answer: `NodeOperationError "${error.message.slice(0, 90)}…" — ${error.description?.slice(0, 80)}…`,
			});
		}
		expect(
			(await pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [missingSchema])).rows,
		).toEqual([]);
	});

	it('a database that does not exist: every node fails naming the Database field', async () => {
		const credential = credentialFor(databaseUrl(), schema, { database: 'djt_no_such_database' });
		for (const [nodeType, options] of everyNode()) {
			const error = (await nodes
				.run(nodeType, { ...options, credential })
				.catch((caught: unknown) => caught)) as NodeOperationError;
			expect(error, nodeName(nodeType)).toBeInstanceOf(NodeOperationError);
			expect(error.message).toBe('The database named in the credential does not exist');
			expect(error.description).toMatch(/Check Database in the credential/);
			cases.push({
				node: nodeName(nodeType),
				name: 'database does not exist',
				answer: `NodeOperationError "${error.message}" — ${error.description}`,
			});
		}
	});

	describe('a credential with a wrong password (embedded PostgreSQL with scram-sha-256; 127.0.0.1 on the local server trusts any password)', () => {
		let embedded: RunningPostgres;
		const wrongPassword = `Wrong-Pw-${randomBytes(12).toString('base64url')}`;

		beforeAll(async () => {
			const saved = process.env.DATABASE_URL;
			delete process.env.DATABASE_URL;
			try {
				embedded = await startPostgres();
			} finally {
				if (saved !== undefined) process.env.DATABASE_URL = saved;
			}
			expect(embedded.embedded).toBe(true);
		});

		afterAll(async () => {
			// Not closeAllPools(): the instrumented pool of the main credential must stay in the cache.
			await embedded?.stop();
		});

		it('every node fails with "rejected the user name or password", and the password is in no output, error or log', async () => {
			const credential = credentialFor(embedded.url, 'djt_wrong_pw', { password: wrongPassword });
			for (const [nodeType, options] of everyNode()) {
				const context = nodes.create(nodeType, { ...options, credential });
				const error = (await context
					.run()
					.catch((caught: unknown) => caught)) as NodeOperationError;
				expect(error, nodeName(nodeType)).toBeInstanceOf(NodeOperationError);
				expect(error.message).toBe('PostgreSQL rejected the user name or password');
				expect(error.description).toMatch(/Check User and Password/);
				const everything = JSON.stringify({
					message: error.message,
					description: error.description,
					messages: error.messages,
					context: error.context,
					stack: error.stack,
					cause: String(error.cause),
					logs: context.logs,
				});
				expect(everything).not.toContain(wrongPassword);
				// With the error output the item carries the error, also without the password.
				const routed = await nodes
					.create(nodeType, { ...options, credential, onError: 'continueErrorOutput' })
					.run();
				const errorItems = routed.output('Error');
				expect(errorItems.length).toBeGreaterThan(0);
				expect(errorItems[0].json).toMatchObject({
					details: { code: 'database_unavailable', http_status: 503 },
				});
				expect(JSON.stringify(routed.outputs)).not.toContain(wrongPassword);
				cases.push({
					node: nodeName(nodeType),
					name: 'wrong password',
					answer: `NodeOperationError "${error.message}" — ${error.description}; error output http_status 503; password in none of them`,
				});
			}
			// Control: the right password works.
			const good = credentialFor(embedded.url, 'djt_wrong_pw');
			expect(
				(
					await nodes.run(new JobStatus(), { credential: good, parameters: { operation: 'stats' } })
				).output('main'),
			).toEqual([]);
		});

		it('a credential without a password: every node says the server asks for one, not a driver message', async () => {
			const credential = credentialFor(embedded.url, 'djt_no_pw', { password: '' });
			for (const [nodeType, options] of everyNode()) {
				const error = (await nodes
					.create(nodeType, { ...options, credential })
					.run()
					.catch((caught: unknown) => caught)) as NodeOperationError;
				expect(error, nodeName(nodeType)).toBeInstanceOf(NodeOperationError);
				expect(error.message).toBe('PostgreSQL asks for a password, and the credential has none');
				expect(error.description).toMatch(/Fill in Password/);
			}
		});
	});
});

describe('Job Lease', () => {
	it('Lease: a SQL-injection queue, a bad Max Jobs or Lease Seconds', async () => {
		await rejects(
			"Lease from queue \"alpha'; UPDATE jobs SET status='done'; --\"",
			new JobLease(),
			{ parameters: { queue: `alpha'; UPDATE jobs SET status='done'; --` } },
			{ field: 'queue', message: /is not a valid queue name/ },
		);
		await rejects(
			'Lease with Max Jobs 0',
			new JobLease(),
			{ parameters: { queue: 'alpha', maxJobs: 0 } },
			{ field: 'Max Jobs', message: /^Max Jobs: must be a whole number from 1 to 10000/ },
		);
		await rejects(
			'Lease with Max Jobs "={{ \'all\' }}"',
			new JobLease(),
			{ parameters: { queue: 'alpha', maxJobs: "={{ 'all' }}" } },
			{ field: 'Max Jobs', message: /^Max Jobs: must be a whole number/ },
		);
		// A limit that reads as "no limit" would lift the cap it was set to keep.
		for (const concurrencyLimit of ["={{ 'ten' }}", -3, 2.5, '={{ true }}']) {
			await rejects(
				`Lease with Concurrency Limit ${JSON.stringify(concurrencyLimit)}`,
				new JobLease(),
				{ parameters: { queue: 'alpha', concurrencyLimit } },
				{
					field: 'Concurrency Limit',
					message: /^Concurrency Limit: must be a whole number from 0 to 100000/,
				},
			);
		}
		await rejects(
			'Lease with Lease Seconds -5',
			new JobLease(),
			{ parameters: { queue: 'alpha', leaseSeconds: -5 } },
			{ field: 'Lease Seconds', message: /must be a number of seconds from 1 to 86400/ },
		);
		await rejects(
			'Lease with Lease Seconds 172800 (two days, past the longest lease)',
			new JobLease(),
			{ parameters: { queue: 'alpha', leaseSeconds: 172800 } },
			{ field: 'Lease Seconds', message: /must be a number of seconds from 1 to 86400/ },
		);
	});

	it('Extend Lease: malformed job and attempt ids are errors; foreign ids and a job from another queue go to Lease Lost', async () => {
		const parameters = { operation: 'extendLease' };
		await rejects(
			'Extend Lease, job id "\' OR 1=1 --"',
			new JobLease(),
			{ items: [{ job_id: `' OR 1=1 --`, attempt_id: leasedAlpha.attempt_id }], parameters },
			{ field: 'jobId', message: /is not a valid id/ },
		);
		await rejects(
			'Extend Lease, attempt id "not-an-attempt"',
			new JobLease(),
			{ items: [{ job_id: leasedAlpha.job_id, attempt_id: 'not-an-attempt' }], parameters },
			{ field: 'attemptId', message: /is not a valid id/ },
		);
		await rejects(
			'Extend Lease, Lease Seconds expression giving nothing',
			new JobLease(),
			{
				items: [{ job_id: leasedAlpha.job_id, attempt_id: leasedAlpha.attempt_id }],
				parameters: { ...parameters, leaseSeconds: '={{ $json.lease_seconds }}' },
			},
			{ field: 'Lease Seconds', message: /^Lease Seconds: is empty/ },
		);
		await rejects(
			'Extend Lease, job id expression returning undefined',
			new JobLease(),
			{ items: [{ attempt_id: leasedAlpha.attempt_id }], parameters },
			{ field: 'jobId', message: /"undefined" is not a valid id/ },
		);
		await answersWithoutWriting(
			'Extend Lease, foreign (unknown) job and attempt ids',
			new JobLease(),
			{
				items: [
					{
						job_id: '0190d1a2-0000-7000-8000-000000000000',
						attempt_id: '0190d1a2-0000-7000-8000-000000000001',
					},
				],
				parameters,
			},
			'Lease Lost',
		);
		await answersWithoutWriting(
			'Extend Lease, real job with a foreign attempt id',
			new JobLease(),
			{
				items: [{ job_id: leasedAlpha.job_id, attempt_id: '0190d1a2-0000-7000-8000-000000000001' }],
				parameters,
			},
			'Lease Lost',
		);
		await answersWithoutWriting(
			'Extend Lease, job id from another queue ("beta") with this worker’s attempt id ("alpha")',
			new JobLease(),
			{ items: [{ job_id: leasedBeta.job_id, attempt_id: leasedAlpha.attempt_id }], parameters },
			'Lease Lost',
		);
		await answersWithoutWriting(
			'Extend Lease, foreign ids with a SQL-injection checkpoint',
			new JobLease(),
			{
				items: [
					{
						job_id: '0190d1a2-0000-7000-8000-000000000000',
						attempt_id: '0190d1a2-0000-7000-8000-000000000001',
					},
				],
				parameters: { ...parameters, checkpoint: INJECTIONS[0] },
			},
			'Lease Lost',
		);
		await rejects(
			'Extend Lease, checkpoint of 101 characters',
			new JobLease(),
			{ items: [leasedAlpha], parameters: { ...parameters, checkpoint: 'c'.repeat(101) } },
			{ field: 'checkpoint', message: /the limit is 100/ },
		);
		await rejects(
			'Extend Lease, checkpoint with a line break',
			new JobLease(),
			{ items: [leasedAlpha], parameters: { ...parameters, checkpoint: 'crm\r\nrequest' } },
			{ field: 'checkpoint', message: /control character/ },
		);
	});
});

describe('Job Complete', () => {
	it('malformed job and attempt ids, ids from expressions that return undefined', async () => {
		await rejects(
			'job id "\'; DROP TABLE jobs; --"',
			new JobComplete(),
			{ items: [{ job_id: `'; DROP TABLE jobs; --`, attempt_id: leasedAlpha.attempt_id }] },
			{ field: 'jobId', message: /is not a valid id/ },
		);
		await rejects(
			'attempt id "1"',
			new JobComplete(),
			{ items: [{ job_id: leasedAlpha.job_id, attempt_id: 1 }] },
			{ field: 'attemptId', message: /"1" is not a valid id/ },
		);
		await rejects(
			'job id expression returning undefined (item without job_id)',
			new JobComplete(),
			{ items: [{ result: 'x' }] },
			{ field: 'jobId', message: /"undefined" is not a valid id/ },
		);
		await rejects(
			'job id is an object',
			new JobComplete(),
			{ items: [{ job_id: { id: leasedAlpha.job_id }, attempt_id: leasedAlpha.attempt_id }] },
			{ field: 'jobId', message: /is not a valid id/ },
		);
		const error = await rejects(
			'batch: a valid completion followed by a malformed id',
			new JobComplete(),
			{ items: [leasedAlpha, { job_id: 'nope', attempt_id: 'nope' }] },
			{ field: 'jobId', message: /"nope" is not a valid id/ },
		);
		expect(error.context.itemIndex).toBe(1);
	});

	it('unknown outcome and error class values, a non-JSON custom result, a non-numeric HTTP status', async () => {
		await rejects(
			'outcome "={{ \'maybe\' }}"',
			new JobComplete(),
			{ items: [leasedAlpha], parameters: { outcome: "={{ 'maybe' }}" } },
			{ field: 'outcome', message: /"maybe" is not an outcome/ },
		);
		await rejects(
			'outcome expression returning undefined',
			new JobComplete(),
			{ items: [leasedAlpha], parameters: { outcome: '={{ $json.outcome }}' } },
			{ field: 'outcome', message: /"undefined" is not an outcome/ },
		);
		await rejects(
			'error class "bogus"',
			new JobComplete(),
			{ items: [leasedAlpha], parameters: { outcome: 'failed', errorClass: "={{ 'bogus' }}" } },
			{ field: 'errorClass', message: /"bogus" is not a class/ },
		);
		await rejects(
			'Custom Result "{broken"',
			new JobComplete(),
			{ items: [leasedAlpha], parameters: { resultSource: 'custom', result: '{broken' } },
			{ field: 'Custom Result', message: /is not valid JSON/ },
		);
		await rejects(
			'HTTP Status "={{ \'teapot\' }}"',
			new JobComplete(),
			{
				items: [leasedAlpha],
				parameters: { outcome: 'httpStatus', httpStatus: "={{ 'teapot' }}" },
			},
			{ field: 'httpStatus', message: /"teapot" is not a status code/ },
		);
		await rejects(
			'Retry After Seconds -1',
			new JobComplete(),
			{
				items: [leasedAlpha],
				parameters: { outcome: 'retry', options: { retryAfterSeconds: -1 } },
			},
			{ field: 'Retry After Seconds', message: /must be a number of seconds/ },
		);
		await rejects(
			'Backoff Base Seconds 172800 (past a day), on a Succeeded completion too',
			new JobComplete(),
			{
				items: [leasedAlpha],
				parameters: { outcome: 'succeeded', options: { backoffBaseSeconds: 172800 } },
			},
			{ field: 'Backoff Base Seconds', message: /must be a number of seconds from 0 to 86400,/ },
		);
	});

	it('foreign ids and a job id from another queue land on Lease Lost and change nothing', async () => {
		const lost = await answersWithoutWriting(
			'unknown job id (valid UUID)',
			new JobComplete(),
			{
				items: [
					{ job_id: '0190d1a2-0000-7000-8000-0000000000aa', attempt_id: leasedAlpha.attempt_id },
				],
			},
			'Lease Lost',
		);
		expect(lost.output('Lease Lost')[0].json).toMatchObject({
			lease_lost: true,
			reason: 'not_found',
		});
		const superseded = await answersWithoutWriting(
			'real job with a foreign attempt id',
			new JobComplete(),
			{
				items: [{ job_id: leasedAlpha.job_id, attempt_id: '0190d1a2-0000-7000-8000-0000000000bb' }],
			},
			'Lease Lost',
		);
		expect(superseded.output('Lease Lost')[0].json).toMatchObject({
			reason: 'attempt_superseded',
			current_status: 'running',
		});
		const crossed = await answersWithoutWriting(
			'job id from queue "beta" with the attempt id of a job in "alpha"',
			new JobComplete(),
			{
				items: [{ job_id: leasedBeta.job_id, attempt_id: leasedAlpha.attempt_id }],
				parameters: { outcome: 'failed' },
			},
			'Lease Lost',
		);
		expect(crossed.output('Lease Lost')[0].json).toMatchObject({ reason: 'attempt_superseded' });
		await answersWithoutWriting(
			'a queued (never leased) job with a made-up attempt id',
			new JobComplete(),
			{ items: [{ job_id: alpha[1].job_id, attempt_id: '0190d1a2-0000-7000-8000-0000000000cc' }] },
			'Lease Lost',
		);
	});
});

describe('Idempotency Check', () => {
	it('keys of 256+ characters, with control characters, only spaces, or from expressions that return undefined', async () => {
		await rejects(
			'Claim, key of 256 characters',
			new IdempotencyCheck(),
			{ items: [{ a: 1 }], parameters: { key: 'k'.repeat(256) } },
			{ field: 'key', message: /the limit is 255/ },
		);
		await rejects(
			'Claim, key with a carriage return',
			new IdempotencyCheck(),
			{ items: [{ id: 'evt\r1' }], parameters: { key: '={{ $json.id }}' } },
			{ field: 'key', message: /control characters/ },
		);
		await rejects(
			'Claim, key of only spaces',
			new IdempotencyCheck(),
			{ items: [{ id: '   ' }], parameters: { key: '={{ $json.id }}' } },
			{ field: 'key', message: /empty or only spaces/ },
		);
		await rejects(
			'Claim, key expression returning undefined',
			new IdempotencyCheck(),
			{ items: [{ a: 1 }], parameters: { key: '={{ $json.event_id }}' } },
			{ field: 'key', message: /the key is empty for this item/ },
		);
		await rejects(
			'Claim, key field path that does not exist',
			new IdempotencyCheck(),
			{ items: [{ a: 1 }], parameters: { keySource: 'fields', keyFields: 'body.source, body.id' } },
			{ field: 'keyFields', message: /has no value at "body.source"/ },
		);
		await rejects(
			'Claim, scope with a newline',
			new IdempotencyCheck(),
			{ items: [{ id: 'e' }], parameters: { scope: 'events\n', key: '={{ $json.id }}' } },
			{ field: 'scope', message: /control characters/ },
		);
		await rejects(
			'Claim with guard, version "1; DROP TABLE x"',
			new IdempotencyCheck(),
			{
				items: [{ id: 'e-v' }],
				parameters: {
					key: '={{ $json.id }}',
					lateEventGuard: true,
					entityKey: 'order-1',
					version: '1; DROP TABLE x',
				},
			},
			{ field: 'version', message: /is not a number/ },
		);
	});

	it('Complete / Fail with a malformed claim id is an error; with a foreign claim id it is Claim Lost and changes nothing', async () => {
		await rejects(
			'Complete, claim id "abc"',
			new IdempotencyCheck(),
			{
				items: [{ idempotency: { key: 'evt-1', claim_id: 'abc' } }],
				parameters: { operation: 'complete', scope: 'events' },
			},
			{ field: 'claimId', message: /"abc" is not a valid id/ },
		);
		await rejects(
			'Fail, key of 300 characters',
			new IdempotencyCheck(),
			{
				items: [
					{
						idempotency: { key: 'k'.repeat(300), claim_id: '0190d1a2-0000-7000-8000-0000000000dd' },
					},
				],
				parameters: { operation: 'fail', scope: 'events' },
			},
			{ field: 'key', message: /the limit is 255/ },
		);
		await answersWithoutWriting(
			'Complete with a foreign claim id',
			new IdempotencyCheck(),
			{
				items: [
					{ idempotency: { key: 'evt-1', claim_id: '0190d1a2-0000-7000-8000-0000000000dd' } },
				],
				parameters: { operation: 'complete', scope: 'events' },
			},
			'Claim Lost',
		);
		await answersWithoutWriting(
			'Fail for a key that was never claimed',
			new IdempotencyCheck(),
			{
				items: [
					{
						idempotency: { key: 'never-claimed', claim_id: '0190d1a2-0000-7000-8000-0000000000ee' },
					},
				],
				parameters: { operation: 'fail', scope: 'events' },
			},
			'Claim Lost',
		);
	});
});

describe('Outbox Write', () => {
	const companionSql = `INSERT INTO "${bizSchema}".orders (id, status) VALUES ($1, $2)`;

	it('an empty or undefined event type, bad event ids, malformed query parameters, failing companion SQL', async () => {
		await rejects(
			'Event Type expression returning undefined',
			new OutboxWrite(),
			{ items: [{ id: 1 }], parameters: { eventType: '={{ $json.type }}' } },
			{ field: 'eventType', message: /eventType: is empty/ },
		);
		await rejects(
			'Custom Event ID of 256 characters',
			new OutboxWrite(),
			{
				items: [{ id: 1 }],
				parameters: { eventType: 'order.paid', eventIdSource: 'custom', eventId: 'e'.repeat(256) },
			},
			{ field: 'eventId', message: /the limit is 255/ },
		);
		await rejects(
			'Custom Event ID of only spaces',
			new OutboxWrite(),
			{
				items: [{ id: 1 }],
				parameters: { eventType: 'order.paid', eventIdSource: 'custom', eventId: '  ' },
			},
			{ field: 'eventId', message: /empty or only spaces/ },
		);
		await rejects(
			'Outbox Queue "outbox; DROP TABLE jobs"',
			new OutboxWrite(),
			{
				items: [{ id: 1 }],
				parameters: { eventType: 'order.paid', queue: 'outbox; DROP TABLE jobs' },
			},
			{ field: 'queue', message: /is not a valid queue name/ },
		);
		await rejects(
			'Query Parameters "[1, 2" (malformed JSON array)',
			new OutboxWrite(),
			{
				items: [{ id: 1 }],
				parameters: { eventType: 'order.paid', companionSql, queryParameters: '[1, 2' },
			},
			{ field: 'Query Parameters', message: /is not valid JSON/ },
		);
		await rejects(
			'Occurred At "yesterday"',
			new OutboxWrite(),
			{
				items: [{ id: 1 }],
				parameters: { eventType: 'order.paid', envelope: { occurredAt: 'yesterday' } },
			},
			{ field: 'Occurred At', message: /is not a date and time/ },
		);
		// The companion SQL runs (it is the user's SQL), fails on the CHECK constraint, and takes the event with it.
		await rejects(
			'companion SQL violating a constraint: neither the business row nor the event is written',
			new OutboxWrite(),
			{
				items: [{ id: 'o-2' }],
				parameters: {
					eventType: 'order.paid',
					companionSql,
					queryParameters: '={{ [$json.id, "bogus-status"] }}',
				},
			},
			{ field: 'companionSql', message: /no event was written/, noSql: false },
		);
	});

	it('SQL-injection strings in query parameters and envelope fields are bound as data', async () => {
		const before = await snapshot();
		const items = INJECTIONS.map((text, n) => ({ id: `inj-${n}`, text }));
		const result = await nodes.run(new OutboxWrite(), {
			items,
			parameters: {
				eventType: '={{ "order." + $json.text }}',
				companionSql,
				queryParameters: '={{ [$json.text, "paid"] }}',
				envelope: {
					source: '={{ $json.text }}',
					tenantId: '={{ $json.text }}',
					correlationId: '={{ $json.text }}',
					destination: '={{ $json.text }}',
				},
			},
		});
		expect(result.output('main')).toHaveLength(INJECTIONS.length);
		expect(
			(await pool.query(`SELECT id FROM "${bizSchema}".orders ORDER BY id`)).rows
				.map((row) => row.id)
				.sort(),
		).toEqual([...INJECTIONS].sort());
		const { rows } = await pool.query(
			`SELECT payload FROM "${schema}".jobs WHERE queue = 'outbox' AND payload->>'source' = ANY($1)`,
			[INJECTIONS],
		);
		expect(rows).toHaveLength(INJECTIONS.length);
		for (const row of rows)
			expect([
				row.payload.tenant_id,
				row.payload.correlation_id,
				row.payload.destination,
				row.payload.event_type.slice(6),
			]).toEqual(Array(4).fill(row.payload.source));
		const after = await snapshot();
		for (const table of [
			`${schema}.job_attempts`,
			`${schema}.idempotency_keys`,
			`${schema}.entity_versions`,
			`${schema}.settings`,
			`${schema}.migrations`,
		])
			expect(after[table], table).toEqual(before[table]);
		cases.push({
			node: 'Outbox Write',
			name: `${INJECTIONS.length} SQL-injection strings in query parameters, event type, source, tenant, correlation id, destination`,
			answer: 'bound as parameters / stored verbatim; no other table changed',
		});
		await pool.query(`DELETE FROM "${bizSchema}".orders`);
	});
});

describe('Job Status', () => {
	it('Get: malformed, foreign, other-queue ids and another job’s token all answer Not Found and change nothing', async () => {
		const get = (jobId: unknown, token: unknown) => ({
			items: [{ job_id: jobId as string, status_token: token as string }],
		});
		await answersWithoutWriting(
			'Get with job id "\' OR 1=1 --"',
			new JobStatus(),
			get(`' OR 1=1 --`, alpha[0].status_token),
			'Not Found',
		);
		await answersWithoutWriting(
			'Get with an unknown job id',
			new JobStatus(),
			get('0190d1a2-0000-7000-8000-0000000000ff', alpha[0].status_token),
			'Not Found',
		);
		await answersWithoutWriting(
			'Get with the status token of another job',
			new JobStatus(),
			get(alpha[0].job_id, alpha[1].status_token),
			'Not Found',
		);
		await answersWithoutWriting(
			'Get with the token of a job in another queue',
			new JobStatus(),
			get(alpha[0].job_id, beta[0].status_token),
			'Not Found',
		);
		await answersWithoutWriting(
			'Get for an outbox event (a job in another queue, no token) with a guessed token',
			new JobStatus(),
			get(outboxJobId, ''),
			'Not Found',
		);
		await answersWithoutWriting(
			'Get with job id and token from expressions that return undefined',
			new JobStatus(),
			{ items: [{ other: 1 }] },
			'Not Found',
		);
		await answersWithoutWriting(
			'Get with arrays as job id and token',
			new JobStatus(),
			get([alpha[0].job_id], [alpha[0].status_token]),
			'Not Found',
		);
	});

	it('Cancel / Requeue: malformed ids, no ids, requeue with no filter or without confirm', async () => {
		await rejects(
			'Cancel, job id "1; DELETE FROM jobs"',
			new JobStatus(),
			{ items: [{ job_id: '1; DELETE FROM jobs' }], parameters: { operation: 'cancel' } },
			{ field: 'jobIds', message: /is not a valid id/ },
		);
		await rejects(
			'Cancel, ids from an expression returning objects',
			new JobStatus(),
			{ items: [{ a: 1 }], parameters: { operation: 'cancel', jobIds: '={{ [{ id: 1 }] }}' } },
			{ field: 'jobIds', message: /"\[object Object\]" is not a valid id/ },
		);
		await rejects(
			'Cancel, job ids expression returning undefined',
			new JobStatus(),
			{ items: [{ a: 1 }], parameters: { operation: 'cancel' } },
			{ field: 'jobIds', message: /no job IDs given/ },
		);
		// A Queue left empty in the editor: n8n itself refuses to run the workflow (a required
		// parameter); an expression that yields no queue reaches the node.
		expect(
			await nodes
				.run(new JobStatus(), {
					parameters: { operation: 'requeue', selectBy: 'filter', confirm: true },
				})
				.catch((caught: unknown) => caught),
		).toBeInstanceOf(WorkflowHasIssuesError);
		await rejects(
			'Requeue by filter with no queue (no filter at all)',
			new JobStatus(),
			{
				parameters: {
					operation: 'requeue',
					selectBy: 'filter',
					filterQueue: '={{ $json.queue }}',
					confirm: true,
				},
			},
			{ field: 'jobIds', message: /requeue needs job ids or a queue filter/ },
		);
		await rejects(
			'Requeue by filter without Confirm',
			new JobStatus(),
			{ parameters: { operation: 'requeue', selectBy: 'filter', filterQueue: 'alpha' } },
			{ field: 'confirm', message: /must be confirmed/ },
		);
		await rejects(
			'Requeue by ids with Additional Attempts 0',
			new JobStatus(),
			{
				items: [{ job_id: alpha[0].job_id }],
				parameters: { operation: 'requeue', additionalAttempts: 0 },
			},
			{ field: 'Additional Attempts', message: /^Additional Attempts: must be a whole number/ },
		);
		await rejects(
			'Requeue by filter with Limit "={{ \'all\' }}"',
			new JobStatus(),
			{
				parameters: {
					operation: 'requeue',
					selectBy: 'filter',
					filterQueue: 'alpha',
					confirm: true,
					maxJobs: "={{ 'all' }}",
				},
			},
			{ field: 'Limit', message: /^Limit: must be a whole number/ },
		);
		await rejects(
			'Requeue by ids with no ids',
			new JobStatus(),
			{ items: [{ a: 1 }], parameters: { operation: 'requeue' } },
			{ field: 'jobIds', message: /no job IDs given/ },
		);
		await rejects(
			"Requeue by filter, queue \"alpha' OR '1'='1\"",
			new JobStatus(),
			{
				parameters: {
					operation: 'requeue',
					selectBy: 'filter',
					filterQueue: `alpha' OR '1'='1`,
					confirm: true,
				},
			},
			{ field: 'queue', message: /is not a valid queue name/ },
		);
	});

	it('Purge / Stats / Unknown Outcomes: a non-terminal status, a negative retention, an injection queue', async () => {
		await rejects(
			'Purge with status "running"',
			new JobStatus(),
			{ parameters: { operation: 'purge', statuses: ['running'] } },
			{ field: 'statuses', message: /"running" is not a terminal status/ },
		);
		await rejects(
			'Purge older than -1 days',
			new JobStatus(),
			{ parameters: { operation: 'purge', olderThanDays: -1 } },
			{ field: 'Older Than (Days)', message: /must be a number of days from 0 to 3650/ },
		);
		await rejects(
			'Queue Stats for queue "x\'; DROP TABLE jobs; --"',
			new JobStatus(),
			{ parameters: { operation: 'stats', queue: `x'; DROP TABLE jobs; --` } },
			{ field: 'queue', message: /is not a valid queue name/ },
		);
		await rejects(
			'Unknown Outcomes with Limit 0',
			new JobStatus(),
			{ parameters: { operation: 'unknownOutcomes', maxJobs: 0 } },
			{ field: 'Limit', message: /^Limit: must be a whole number from 1/ },
		);
	});
});

it('at least 25 hostile cases ran', () => {
	expect(cases.length).toBeGreaterThanOrEqual(25);
});

/** One harmless run of each node (the connection fails before any of them matters). */
function everyNode(): Array<[INodeType, NodeContextOptions]> {
	return [
		[new JobEnqueue(), { items: [{ a: 1 }] }],
		[new JobLease(), { parameters: { queue: 'alpha' } }],
		[
			new JobComplete(),
			{
				items: [
					{
						job_id: '0190d1a2-0000-7000-8000-000000000001',
						attempt_id: '0190d1a2-0000-7000-8000-000000000002',
					},
				],
			},
		],
		[new IdempotencyCheck(), { items: [{ id: 'e1' }], parameters: { key: '={{ $json.id }}' } }],
		[new OutboxWrite(), { items: [{ id: 1 }], parameters: { eventType: 'order.paid' } }],
		[new JobStatus(), { parameters: { operation: 'stats' } }],
	];
}
