/**
 * What the wake-up notices cost the enqueue and complete paths (printed as JSON, never asserted).
 *
 * NOTIFY is queued by a statement trigger and sent at commit; to keep notices in commit order,
 * PostgreSQL serialises the commits of all notifying transactions of the server behind one
 * lock. This measures it on the real statements (JobStore.enqueue of one
 * job, JobStore.complete of one job), in alternating rounds on three schemas that differ only
 * in their trigger functions:
 *
 *   shipped       as migrated: enqueue, retry, release and requeue notify; completion does not
 *   no_notify     the same triggers without any pg_notify (what the trigger node must not need)
 *   finish_notify shipped + a notice for every job that finishes (done / failed / cancelled)
 *
 * The variants differ in the triggers' notices inside each transaction. All three also send
 * JobStore.complete's finish notice, a statement of its own at most every 200 ms
 * (finishNotices.ts), so it is outside what they compare; bench/compare.ts measures it.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/notify-cost.ts [--rounds 3] [--seconds 3] [--clients 1,8]
 */
import { cpus, loadavg } from 'node:os';
import pg from 'pg';

import { JobStore, migrate, notifyChannel, quoteIdentifier } from '../src/core';
import { startPostgres } from '../scripts/lib/postgres';
import { log, median, now, round, runMain } from './lib/util';

const VARIANTS = ['shipped', 'no_notify', 'finish_notify'] as const;
type Variant = (typeof VARIANTS)[number];
const QUEUE = 'bench';

function arg(name: string, fallback: string): string {
	const index = process.argv.indexOf(`--${name}`);
	return index >= 0 ? process.argv[index + 1] : fallback;
}

/** The 0004 trigger functions, with the notices switched per variant. */
function triggerFunctions(schema: string, variant: Variant): string {
	const s = quoteIdentifier(schema);
	const channel = notifyChannel(schema);
	const insertNotify =
		variant === 'no_notify'
			? ''
			: `PERFORM pg_notify('${channel}', q.queue) FROM (SELECT DISTINCT queue FROM new_rows) q;`;
	const updateNotify =
		variant === 'no_notify'
			? ''
			: variant === 'shipped'
				? `PERFORM pg_notify('${channel}', q.queue) FROM (SELECT DISTINCT n.queue FROM new_rows n WHERE n.status = 'queued') q;`
				: `PERFORM pg_notify('${channel}', q.queue) FROM (SELECT DISTINCT n.queue FROM new_rows n WHERE n.status IN ('queued', 'done', 'failed', 'cancelled')) q;`;
	return `
CREATE OR REPLACE FUNCTION ${s}.jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO ${s}.job_counts AS c (queue, status, slot, n)
	SELECT n.queue, n.status, (pg_backend_pid() % 16)::smallint, count(*)
	FROM new_rows n WHERE n.status IN ('done', 'failed', 'cancelled')
	GROUP BY n.queue, n.status
	ON CONFLICT (queue, status, slot) DO UPDATE SET n = c.n + EXCLUDED.n;
	${insertNotify}
	RETURN NULL;
END;
$$;
CREATE OR REPLACE FUNCTION ${s}.jobs_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO ${s}.job_counts AS c (queue, status, slot, n)
	SELECT d.queue, d.status, (pg_backend_pid() % 16)::smallint, sum(d.delta)
	FROM (
		SELECT n.queue, n.status, 1 AS delta FROM new_rows n WHERE n.status IN ('done', 'failed', 'cancelled')
		UNION ALL
		SELECT o.queue, o.status, -1 FROM old_rows o WHERE o.status IN ('done', 'failed', 'cancelled')
	) d
	GROUP BY d.queue, d.status
	HAVING sum(d.delta) <> 0
	ON CONFLICT (queue, status, slot) DO UPDATE SET n = c.n + EXCLUDED.n;
	${updateNotify}
	RETURN NULL;
END;
$$;`;
}

async function timed(clients: number, seconds: number, work: () => Promise<boolean>) {
	let done = 0;
	const deadline = now() + seconds * 1000;
	const started = now();
	await Promise.all(
		Array.from({ length: clients }, async () => {
			while (now() < deadline) {
				if (!(await work())) return;
				done++;
			}
		}),
	);
	return (done / (now() - started)) * 1000;
}

async function main(): Promise<void> {
	const rounds = Number(arg('rounds', '3'));
	const seconds = Number(arg('seconds', '3'));
	const clientCounts = arg('clients', '1,8').split(',').map(Number);
	const postgres = await startPostgres();
	const pool = new pg.Pool({ connectionString: postgres.url, max: 12 });
	pool.on('error', () => undefined);
	// Something listens, as the trigger node would; a notice nobody listens to costs the same.
	const listener = new pg.Client({ connectionString: postgres.url });
	await listener.connect();
	let heard = 0;
	listener.on('notification', () => heard++);
	const stores = new Map<Variant, JobStore>();
	try {
		for (const variant of VARIANTS) {
			const schema = `bench_notify_${variant}`;
			await pool.query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(schema)} CASCADE`);
			await migrate(pool, schema);
			await pool.query(triggerFunctions(schema, variant));
			await listener.query(`LISTEN ${quoteIdentifier(notifyChannel(schema))}`);
			stores.set(variant, new JobStore(pool, { schema }));
		}
		const samples: Record<string, Record<Variant, number[]>> = {};
		const sample = (key: string, variant: Variant, value: number) => {
			samples[key] ??= { shipped: [], no_notify: [], finish_notify: [] };
			samples[key][variant].push(value);
		};
		for (let round_ = 0; round_ < rounds; round_++) {
			// Alternate the order every round, so load from other work hits every variant alike.
			const order = round_ % 2 === 0 ? [...VARIANTS] : [...VARIANTS].reverse();
			for (const clients of clientCounts) {
				for (const variant of order) {
					const store = stores.get(variant)!;
					const perSecond = await timed(clients, seconds, async () => {
						await store.enqueue([{ queue: QUEUE, payload: { n: 1 } }]);
						return true;
					});
					sample(`enqueue_single_c${clients}`, variant, perSecond);
					log(`round ${round_ + 1} enqueue c${clients} ${variant}: ${round(perSecond)}/s`);
				}
				for (const variant of order) {
					const store = stores.get(variant)!;
					const leased: Array<{ id: string; attempt_id: string }> = [];
					for (;;) {
						const jobs = await store.lease({ queue: QUEUE, limit: 1000, leaseMs: 3_600_000 });
						leased.push(...jobs);
						if (jobs.length < 1000) break;
					}
					const perSecond = await timed(clients, seconds, async () => {
						const job = leased.pop();
						if (!job) return false;
						await store.complete([
							{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' },
						]);
						return true;
					});
					sample(`complete_single_c${clients}`, variant, perSecond);
					log(
						`round ${round_ + 1} complete c${clients} ${variant}: ${round(perSecond)}/s (${leased.length} leased jobs left)`,
					);
					await pool.query(
						`DELETE FROM ${quoteIdentifier(`bench_notify_${variant}`)}.jobs WHERE status <> 'done'`,
					);
				}
			}
		}
		const medians = Object.fromEntries(
			Object.entries(samples).map(([key, byVariant]) => {
				const m = Object.fromEntries(
					VARIANTS.map((variant) => [variant, round(median(byVariant[variant]))]),
				) as Record<Variant, number>;
				return [
					key,
					{
						per_second: m,
						shipped_vs_no_notify: round(m.shipped / m.no_notify, 3),
						finish_notify_vs_shipped: round(m.finish_notify / m.shipped, 3),
					},
				];
			}),
		);
		const report = {
			environment: {
				node: process.version,
				cores: cpus().length,
				load_average_at_end: loadavg().map((value) => round(value, 2)),
				...(
					await pool.query<{ server_version: string; synchronous_commit: string }>(
						`SELECT current_setting('server_version') AS server_version,
							current_setting('synchronous_commit') AS synchronous_commit`,
					)
				).rows[0],
			},
			rounds,
			seconds_per_run: seconds,
			notices_heard: heard,
			medians,
			samples,
		};
		process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
	} finally {
		for (const variant of VARIANTS)
			await pool
				.query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(`bench_notify_${variant}`)} CASCADE`)
				.catch(() => undefined);
		await listener.end();
		await pool.end();
		await postgres.stop();
	}
}

runMain(main);
