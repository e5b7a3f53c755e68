/**
 * What the guards on the write path of `jobs` cost, and what a lone enqueue spends outside
 * PostgreSQL. Prints JSON on stdout; nothing is asserted.
 *
 *   npx tsx bench/write-costs.ts [--rounds 5] [--calls 20000] [--rows 20000] [--enqueues 3000]
 *
 * Guards, measured inside the server (plpgsql loops over kept plans: no network, no commit),
 * on copies of the migrated `jobs` table with its columns, defaults and indexes, that differ
 * only in them:
 *   none            no condition on a column, no trigger
 *   checks          the six CHECK constraints jobs had up to migration 0014
 *   shipped         the guards of jobs since 0015: four of the conditions as domains, status
 *                   compared with an array constant and the key's length as CHECK constraints
 *   merged_check    the six conditions as one CHECK
 *   function_check  the six in one IMMUTABLE plpgsql function, called by one CHECK
 *   domains         the six as domains of their columns
 *   trigger         the update trigger of jobs (statement level, transition tables), no condition
 *   trigger_when    the same trigger with the counted-mark comparison as its WHEN clause
 *   written_indexes the shipped guards, but only the two indexes a queued job has entries in
 *                   (primary key, claim): what the seven other partial indexes cost a statement
 * - per statement: an UPDATE of one row that moves it between queued and running and sets the
 *   counted mark in its RETURNING list, as the lease and the completion do (`--calls` calls),
 *   and an INSERT of one row, as an enqueue of one job does (`--calls` calls);
 * - per row: an UPDATE of `--rows` rows, on copies without indexes (none, checks, shipped,
 *   function_check, domains), the cost a batch pays for each of its jobs.
 *
 * A lone enqueue (`--enqueues` calls of each, alternating in a new random order every time, one
 * at a time, all on one connection, commits waiting for the WAL flush as they ship):
 * JobStore.enqueue of one job with call coalescing (the default), the same without it, and its
 * statement sent straight through the pool; and, to split the call's time, a prepared
 * `SELECT 1` (the round trip), an INSERT of one row into a table of one column (a commit with
 * next to nothing in it), and the statement with synchronous_commit turned off inside it (its
 * commit does not wait for the WAL flush; for measuring only, never how the package runs).
 */
import pg from 'pg';

import { JobStore, migrate, quoteIdentifier } from '../src/core';
import { statementName } from '../src/core/executor';
import { newJobId } from '../src/core/ids';
import { enqueueWithoutKeysQuery, type EnqueueRow } from '../src/core/sql/enqueue';
import { DOMAIN_COLUMN_TYPES } from '../src/core/sql/types';
import { startPostgres } from '../scripts/lib/postgres';
import { log, median, readFlags, round, runMain } from './lib/util';

const SCHEMA = 'bench_write_costs';
const s = quoteIdentifier(SCHEMA);

/** The conditions of the six CHECK constraints of jobs (migrations 0001 and 0006). */
const CONDITIONS = [
	`status IN ('queued', 'running', 'done', 'failed', 'cancelled')`,
	'char_length(idempotency_key) <= 255',
	'attempts >= 0',
	'max_attempts >= 1',
	`error_class IN ('retryable', 'needs_mapping', 'needs_manual_review', 'discarded')`,
	'char_length(attempt_checkpoint) <= 100',
];

/**
 * The same conditions as domains of the six columns, checked only where a value is given to the
 * column. Migration 0015 made four of them domains; this is all six.
 */
const DOMAINS: Array<[string, string, string]> = [
	['status', 'text', CONDITIONS[0].replace('status', 'VALUE')],
	['idempotency_key', 'text', CONDITIONS[1].replace('idempotency_key', 'VALUE')],
	['attempts', 'integer', CONDITIONS[2].replace('attempts', 'VALUE')],
	['max_attempts', 'integer', CONDITIONS[3].replace('max_attempts', 'VALUE')],
	['error_class', 'text', CONDITIONS[4].replace('error_class', 'VALUE')],
	['attempt_checkpoint', 'text', CONDITIONS[5].replace('attempt_checkpoint', 'VALUE')],
];
const DOMAIN_COLUMNS = DOMAINS.map(([column]) => [column, `d_${column}`] as const);

const STATEMENT_VARIANTS = [
	'none',
	'checks',
	'shipped',
	'merged_check',
	'function_check',
	'domains',
	'trigger',
	'trigger_when',
	'written_indexes',
] as const;
const ROW_VARIANTS = ['none', 'checks', 'shipped', 'function_check', 'domains'] as const;
const ENQUEUE_VARIANTS = [
	'store',
	'store_without_coalescing',
	'statement',
	'statement_without_flush_wait',
	'one_row_commit',
	'round_trip',
] as const;

type Variant = (typeof STATEMENT_VARIANTS)[number];

/**
 * A copy of jobs with the guards of `variant`; `indexes`: with the indexes of jobs.
 * `shippedChecks`: the definitions of the CHECK constraints of the migrated jobs.
 */
function copySql(
	table: string,
	variant: Variant,
	indexes: boolean,
	shippedChecks: string[],
): string {
	const allIndexes = indexes && variant !== 'written_indexes';
	const like = `LIKE ${s}.jobs INCLUDING DEFAULTS INCLUDING IDENTITY${allIndexes ? ' INCLUDING INDEXES' : ''}`;
	const statements = [`CREATE TABLE ${s}.${table} (${like}) WITH (fillfactor = 80)`];
	// Only the two indexes a queued job has entries in: the other seven are partial indexes that
	// a statement still opens and whose predicates it prepares and tests.
	if (indexes && variant === 'written_indexes')
		statements.push(
			`ALTER TABLE ${s}.${table} ADD PRIMARY KEY (id)`,
			`CREATE INDEX ON ${s}.${table} (queue, priority DESC, run_at, seq) WHERE status = 'queued'`,
		);
	// LIKE copies the columns' types, and so the domains of jobs: every variant but the ones with
	// the shipped guards starts from the plain types.
	if (variant === 'shipped' || variant === 'written_indexes')
		for (const definition of shippedChecks)
			statements.push(`ALTER TABLE ${s}.${table} ADD ${definition}`);
	else
		for (const [column, base] of Object.entries(DOMAIN_COLUMN_TYPES))
			statements.push(`ALTER TABLE ${s}.${table} ALTER COLUMN ${column} TYPE ${base}`);
	// A CHECK passes unless its condition is false, so the conjunction of the six passes and
	// fails on exactly the rows the six do (NULL AND true is NULL, which passes).
	if (variant === 'checks')
		for (const condition of CONDITIONS)
			statements.push(`ALTER TABLE ${s}.${table} ADD CHECK (${condition})`);
	if (variant === 'merged_check')
		statements.push(`ALTER TABLE ${s}.${table} ADD CHECK (${CONDITIONS.join(' AND ')})`);
	if (variant === 'function_check')
		statements.push(
			`ALTER TABLE ${s}.${table} ADD CHECK (${s}.row_is_valid(status, idempotency_key, attempts, max_attempts, error_class, attempt_checkpoint))`,
		);
	if (variant === 'domains')
		for (const [column, domain] of DOMAIN_COLUMNS)
			statements.push(`ALTER TABLE ${s}.${table} ALTER COLUMN ${column} TYPE ${s}.${domain}`);
	const trigger = (when: string) =>
		`CREATE TRIGGER after_update AFTER UPDATE ON ${s}.${table}
		REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT ${when}
		EXECUTE FUNCTION ${s}.jobs_after_update()`;
	if (variant === 'trigger') statements.push(trigger(''));
	if (variant === 'trigger_when')
		statements.push(
			trigger(
				`WHEN (current_setting('durable_jobs.counted_update', true) IS DISTINCT FROM '${SCHEMA}:' || pg_trigger_depth() || ':' || statement_timestamp())`,
			),
		);
	return statements.join(';\n');
}

/** A function timing `calls` one-row UPDATEs of `table`, in µs per call. */
function oneRowTimerSql(table: string): string {
	return `CREATE FUNCTION ${s}.time_${table}(calls int) RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE ids uuid[]; started timestamptz; mark text;
BEGIN
	SELECT array_agg(id) INTO ids FROM (SELECT id FROM ${s}.${table} LIMIT 1000) picked;
	started := clock_timestamp();
	FOR i IN 1..calls LOOP
		UPDATE ${s}.${table}
		SET status = CASE WHEN status = 'queued' THEN 'running' ELSE 'queued' END,
			attempts = attempts + 1, updated_at = now()
		WHERE id = ids[1 + i % 1000]
		RETURNING (SELECT set_config('durable_jobs.counted_update', '${SCHEMA}:' || pg_trigger_depth() || ':' || statement_timestamp(), true))
		INTO mark;
	END LOOP;
	RETURN extract(epoch FROM clock_timestamp() - started) * 1e6 / calls;
END $$`;
}

/** A function timing `calls` one-row INSERTs into `table`, in µs per call. */
function oneRowInsertTimerSql(table: string): string {
	return `CREATE FUNCTION ${s}.time_insert_${table}(calls int) RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE started timestamptz;
BEGIN
	started := clock_timestamp();
	FOR i IN 1..calls LOOP
		INSERT INTO ${s}.${table} (id, queue, payload, priority, max_attempts)
		VALUES (gen_random_uuid(), 'bench', '{}', 0, 5);
	END LOOP;
	RETURN extract(epoch FROM clock_timestamp() - started) * 1e6 / calls;
END $$`;
}

function lonelyRow(n: number): EnqueueRow {
	return {
		ord: 0,
		id: newJobId(),
		queue: 'bench',
		payload: JSON.stringify({ n }),
		idempotency_key: null,
		payload_fingerprint: null,
		priority: 0,
		run_at: null,
		delay_ms: null,
		max_attempts: 5,
		ordering_key: null,
		callback_url: null,
		correlation_id: null,
		status_token_hash: null,
	};
}

function mediansOf(samples: Record<string, number[]>): Record<string, number> {
	return Object.fromEntries(
		Object.entries(samples).map(([name, values]) => [name, round(median(values), 4)]),
	);
}

function summary(samples: Record<string, number[]>, baseline: string) {
	const medians = mediansOf(samples);
	const overBaseline = Object.fromEntries(
		Object.entries(medians).map(([name, value]) => [name, round(value - medians[baseline], 4)]),
	);
	return { medians, overBaseline, samples };
}

async function main(): Promise<void> {
	const { int } = readFlags(process.argv.slice(2), ['rounds', 'calls', 'rows', 'enqueues']);
	const rounds = int('rounds', 5, 1);
	const calls = int('calls', 20000, 1000);
	const rows = int('rows', 20000, 1);
	const enqueues = int('enqueues', 3000, 1);
	const postgres = await startPostgres(log);
	const pool = new pg.Pool({ connectionString: postgres.url, max: 4 });
	pool.on('error', () => undefined);
	try {
		await pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
		await migrate(pool, SCHEMA);
		await pool.query(`CREATE FUNCTION ${s}.row_is_valid(status text, idempotency_key text,
			attempts integer, max_attempts integer, error_class text, attempt_checkpoint text)
			RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
			BEGIN RETURN ${CONDITIONS.join(' AND ')}; END $$`);
		for (const [column, base, condition] of DOMAINS)
			await pool.query(`CREATE DOMAIN ${s}.d_${column} AS ${base} CHECK (${condition})`);
		const { rows: shipped } = await pool.query<{ definition: string }>(
			`SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint
			WHERE conrelid = $1::regclass AND contype = 'c'`,
			[`${SCHEMA}.jobs`],
		);
		const shippedChecks = shipped.map((row) => row.definition);
		for (const variant of STATEMENT_VARIANTS) {
			await pool.query(copySql(`one_${variant}`, variant, true, shippedChecks));
			await pool.query(
				`INSERT INTO ${s}.one_${variant} (id, queue, payload) SELECT gen_random_uuid(), 'bench', '{}' FROM generate_series(1, 1000)`,
			);
			await pool.query(oneRowTimerSql(`one_${variant}`));
			await pool.query(oneRowInsertTimerSql(`one_${variant}`));
		}
		for (const variant of ROW_VARIANTS) {
			await pool.query(copySql(`many_${variant}`, variant, false, shippedChecks));
			await pool.query(
				`INSERT INTO ${s}.many_${variant} (id, queue, payload) SELECT gen_random_uuid(), 'bench', '{}' FROM generate_series(1, $1)`,
				[rows],
			);
		}
		await pool.query(`VACUUM ANALYZE ${s}.jobs`);
		for (const variant of [
			...STATEMENT_VARIANTS.map((v) => `one_${v}`),
			...ROW_VARIANTS.map((v) => `many_${v}`),
		])
			await pool.query(`VACUUM ANALYZE ${s}.${variant}`);

		const perStatement: Record<string, number[]> = {};
		const perInsert: Record<string, number[]> = {};
		const perRow: Record<string, number[]> = {};
		for (let r = 0; r < rounds; r++) {
			// Reverse the order every other round, so a drift of the machine hits all alike.
			const order = r % 2 === 0 ? [...STATEMENT_VARIANTS] : [...STATEMENT_VARIANTS].reverse();
			for (const variant of order) {
				const { rows: timed } = await pool.query<{ us: number }>(
					`SELECT ${s}.time_one_${variant}($1) AS us`,
					[calls],
				);
				(perStatement[variant] ??= []).push(round(timed[0].us, 3));
				const { rows: inserted } = await pool.query<{ us: number }>(
					`SELECT ${s}.time_insert_one_${variant}($1) AS us`,
					[calls],
				);
				(perInsert[variant] ??= []).push(round(inserted[0].us, 3));
			}
			for (const variant of r % 2 === 0 ? [...ROW_VARIANTS] : [...ROW_VARIANTS].reverse()) {
				const started = performance.now();
				await pool.query(`UPDATE ${s}.many_${variant} SET attempts = attempts + 1`);
				(perRow[variant] ??= []).push(round(((performance.now() - started) * 1000) / rows, 3));
			}
			log(`round ${r + 1}/${rounds}: per statement ${JSON.stringify(perStatement)}`);
		}

		// One connection for every variant, as a library's sequential enqueues use one: calls that
		// alternate between backends find each of them cold, and a round trip then takes about
		// twice as long as on a connection in use.
		const lone = new pg.Pool({ connectionString: postgres.url, max: 1 });
		lone.on('error', () => undefined);
		await lone.query(
			`CREATE TABLE ${s}.one_row_commits (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY)`,
		);
		const store = new JobStore(lone, { schema: SCHEMA });
		const storeWithoutCoalescing = new JobStore(lone, { schema: SCHEMA, coalesceCalls: false });
		const sendStatement = async (n: number, withoutFlushWait: boolean) => {
			const query = enqueueWithoutKeysQuery(SCHEMA, s, [lonelyRow(n)]);
			// synchronous_commit is read when the transaction commits, so setting it inside the
			// statement makes this one commit return before its WAL flush (for measuring only).
			const text = withoutFlushWait
				? `${query.text}, (SELECT set_config('synchronous_commit', 'off', true)) AS without_flush_wait`
				: query.text;
			await lone.query({ name: statementName(text), text, values: query.values });
		};
		const send: Record<(typeof ENQUEUE_VARIANTS)[number], (n: number) => Promise<unknown>> = {
			store: (n) => store.enqueue([{ queue: 'bench', payload: { n } }]),
			store_without_coalescing: (n) =>
				storeWithoutCoalescing.enqueue([{ queue: 'bench', payload: { n } }]),
			statement: (n) => sendStatement(n, false),
			statement_without_flush_wait: (n) => sendStatement(n, true),
			one_row_commit: () =>
				lone.query({
					name: 'write_costs_one_row_commit',
					text: `INSERT INTO ${s}.one_row_commits DEFAULT VALUES`,
				}),
			round_trip: () => lone.query({ name: 'write_costs_round_trip', text: 'SELECT 1' }),
		};
		const enqueueMs: Record<string, number[]> = {};
		for (let n = -200; n < enqueues; n++) {
			const order = [...ENQUEUE_VARIANTS].sort(() => Math.random() - 0.5);
			for (const variant of order) {
				const started = performance.now();
				const result = await send[variant](n);
				if (Array.isArray(result) && result[0] instanceof Error) throw result[0];
				if (n >= 0) (enqueueMs[variant] ??= []).push(performance.now() - started);
			}
		}
		await lone.end();
		const lonely = mediansOf(enqueueMs);
		const part = (value: number) => round(value, 4);
		const report = {
			postgres: (await pool.query<{ v: string }>('SELECT version() AS v')).rows[0].v,
			node: process.version,
			rounds,
			callsPerRound: calls,
			rowsPerUpdate: rows,
			usPerOneRowUpdate: summary(perStatement, 'none'),
			usPerOneRowInsert: summary(perInsert, 'none'),
			usPerRowOfBulkUpdate: summary(perRow, 'none'),
			msPerLoneEnqueue: {
				calls: enqueues,
				medians: lonely,
				split: {
					roundTrip: lonely.round_trip,
					statementInServer: part(lonely.statement_without_flush_wait - lonely.round_trip),
					walFlushWait: part(lonely.statement - lonely.statement_without_flush_wait),
					storeInNode: part(lonely.store - lonely.statement),
					coalescer: part(lonely.store - lonely.store_without_coalescing),
					statementOverOneRowCommit: part(lonely.statement - lonely.one_row_commit),
				},
				means: Object.fromEntries(
					Object.entries(enqueueMs).map(([name, values]) => [
						name,
						round(values.reduce((sum, value) => sum + value, 0) / values.length, 4),
					]),
				),
			},
		};
		process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
	} finally {
		await pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`).catch(() => undefined);
		await pool.end();
		await postgres.stop();
	}
}

runMain(main);
