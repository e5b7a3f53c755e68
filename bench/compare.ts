/**
 * Before/after comparison of our engine on a noisy machine: the core of a git ref (default
 * HEAD) against the working tree, on the same PostgreSQL, in alternating runs (A B, B A, …),
 * so load from other work hits both sides alike. Prints one JSON document on stdout (every
 * run, medians and after/before ratios); progress goes to stderr.
 *
 *   npx tsx bench/compare.ts [--ref HEAD] [--rounds 5] [--scenarios enqueue,single,work,batch,stats]
 *                            [--stats-rows 100000]
 *
 * The ref's src/ and migrations/ are exported with `git archive` into a temporary directory
 * (node_modules linked), and each side gets its own schema (bench_cmp_before, bench_cmp_after).
 * Sizes are those of `npm run bench -- --quick`. Database: DATABASE_URL, else an embedded
 * PostgreSQL.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

import { startPostgres } from '../scripts/lib/postgres';
import { exportRef } from './lib/ref';
import {
	checkpoint,
	log,
	median,
	now,
	quoteIdent,
	round,
	runMain,
	sleep,
	summarize,
	vacuumAnalyzeSchema,
} from './lib/util';

type Core = typeof import('../src/core');
type Side = 'before' | 'after';
const SCENARIOS = ['enqueue', 'single', 'work', 'batch', 'stats'] as const;
type Scenario = (typeof SCENARIOS)[number];
const QUEUE = 'bench';

interface Options {
	ref: string;
	rounds: number;
	scenarios: Scenario[];
	statsRows: number;
}

function parse(argv: string[]): Options {
	const options: Options = {
		ref: 'HEAD',
		rounds: 5,
		scenarios: [...SCENARIOS],
		statsRows: 100_000,
	};
	for (let i = 0; i < argv.length; i += 2) {
		const [flag, value] = [argv[i], argv[i + 1]];
		if (value === undefined) throw new Error(`${flag} needs a value`);
		if (flag === '--ref') options.ref = value;
		else if (flag === '--rounds') options.rounds = Number(value);
		else if (flag === '--scenarios') options.scenarios = value.split(',') as Scenario[];
		else if (flag === '--stats-rows') options.statsRows = Number(value);
		else throw new Error(`unknown option ${flag}`);
	}
	for (const scenario of options.scenarios)
		if (!SCENARIOS.includes(scenario)) throw new Error(`unknown scenario ${scenario}`);
	return options;
}

class Subject {
	readonly pool: pg.Pool;
	store!: InstanceType<Core['JobStore']>;

	constructor(
		readonly side: Side,
		readonly core: Core,
		url: string,
	) {
		this.pool = new pg.Pool({ connectionString: url, max: 12 });
		this.pool.on('error', () => undefined);
	}

	get schema(): string {
		return `bench_cmp_${this.side}`;
	}

	async reset(): Promise<void> {
		await this.pool.query(`DROP SCHEMA IF EXISTS ${quoteIdent(this.schema)} CASCADE`);
		await this.core.migrate(this.pool, this.schema);
		this.store = new this.core.JobStore(this.pool, { schema: this.schema });
	}

	async enqueueBatch(start: number, size: number): Promise<void> {
		const results = await this.store.enqueue(
			Array.from({ length: size }, (_, i) => ({ queue: QUEUE, payload: { n: start + i } })),
		);
		for (const result of results) if (result instanceof Error) throw result;
	}

	async drain(workers: number, limit: number, workMs = 0): Promise<number> {
		let processed = 0;
		await Promise.all(
			Array.from({ length: workers }, async () => {
				for (;;) {
					const jobs = await this.store.lease({ queue: QUEUE, limit, includeMetadata: false });
					if (jobs.length === 0) return;
					if (workMs > 0) await sleep(workMs);
					const results = await this.store.complete(
						jobs.map((job) => ({
							jobId: job.id,
							attemptId: job.attempt_id,
							outcome: 'succeeded' as const,
						})),
					);
					for (const result of results)
						if (result instanceof Error || !result.applied) throw new Error('complete not applied');
					processed += jobs.length;
				}
			}),
		);
		return processed;
	}
}

async function measure(
	subject: Subject,
	admin: pg.Pool,
	scenario: string,
	statsRows: number,
): Promise<number> {
	await subject.reset();
	const prefill = async (count: number) => {
		for (let start = 0; start < count; start += 1000)
			await subject.enqueueBatch(start, Math.min(1000, count - start));
		await vacuumAnalyzeSchema(admin, subject.schema);
		await checkpoint(admin);
	};
	const drain = async (jobs: number, workers: number, limit: number, workMs = 0) => {
		await prefill(jobs);
		const started = now();
		const processed = await subject.drain(workers, limit, workMs);
		if (processed !== jobs) throw new Error(`${subject.side}: drained ${processed} of ${jobs}`);
		return jobs / ((now() - started) / 1000);
	};
	switch (scenario) {
		case 'enqueue_single': {
			for (let i = 0; i < 20; i++) await subject.enqueueBatch(-i - 1, 1);
			await checkpoint(admin);
			const started = now();
			for (let i = 0; i < 500; i++) await subject.enqueueBatch(i, 1);
			return 500 / ((now() - started) / 1000);
		}
		case 'enqueue_batch': {
			await subject.enqueueBatch(-1000, 1000);
			await checkpoint(admin);
			const started = now();
			for (let b = 0; b < 10; b++) await subject.enqueueBatch(b * 1000, 1000);
			return 10_000 / ((now() - started) / 1000);
		}
		case 'single_w1':
			return await drain(1000, 1, 1);
		case 'single_w8':
			return await drain(1000, 8, 1);
		case 'single_w32':
			return await drain(1000, 32, 1);
		case 'single_w8_work1ms':
			return await drain(1000, 8, 1, 1);
		case 'batch100_w2':
			return await drain(10_000, 2, 100);
		case 'stats_p95_ms': {
			const s = quoteIdent(subject.schema);
			for (let from = 1; from <= statsRows; from += 250_000) {
				const to = Math.min(statsRows, from + 249_999);
				await subject.pool.query(
					`INSERT INTO ${s}.jobs (id, queue, payload, attempts, attempt_id, started_at)
					 SELECT gen_random_uuid(), $1, jsonb_build_object('n', g), 1, gen_random_uuid(), now() FROM generate_series($2::int, $3::int) g`,
					[QUEUE, from, to],
				);
				await subject.pool.query(
					`UPDATE ${s}.jobs SET status = 'done', finished_at = now() WHERE queue = $1 AND status = 'queued'`,
					[QUEUE],
				);
			}
			await prefill(4500);
			const leased = await subject.store.lease({ queue: QUEUE, limit: 1500, leaseMs: 3_600_000 });
			await subject.store.complete(
				leased
					.slice(0, 500)
					.map((job) => ({ jobId: job.id, attemptId: job.attempt_id, outcome: 'failed' as const })),
			);
			await vacuumAnalyzeSchema(admin, subject.schema);
			for (let i = 0; i < 5; i++) await subject.store.stats(QUEUE);
			const samples: number[] = [];
			for (let i = 0; i < 100; i++) {
				const started = now();
				await subject.store.stats(QUEUE);
				samples.push(now() - started);
			}
			return summarize(samples).p95;
		}
		default:
			throw new Error(`unknown scenario ${scenario}`);
	}
}

async function main(): Promise<void> {
	const options = parse(process.argv.slice(2));
	const exported = exportRef(options.ref);
	const postgres = await startPostgres(() => undefined);
	const admin = new pg.Pool({ connectionString: postgres.url, max: 2 });
	admin.on('error', () => undefined);
	const subjects: Record<Side, Subject> = {
		before: new Subject(
			'before',
			(await import(join(exported.dir, 'src', 'core'))) as Core,
			postgres.url,
		),
		after: new Subject('after', (await import('../src/core')) as Core, postgres.url),
	};
	const scenarios = [
		...(options.scenarios.includes('enqueue') ? ['enqueue_single', 'enqueue_batch'] : []),
		...(options.scenarios.includes('single') ? ['single_w1', 'single_w8', 'single_w32'] : []),
		...(options.scenarios.includes('work') ? ['single_w8_work1ms'] : []),
		...(options.scenarios.includes('batch') ? ['batch100_w2'] : []),
		...(options.scenarios.includes('stats') ? ['stats_p95_ms'] : []),
	];
	const runs: Record<string, Record<Side, number[]>> = {};
	try {
		for (let r = 0; r < options.rounds; r++) {
			const order: Side[] = r % 2 === 0 ? ['before', 'after'] : ['after', 'before'];
			for (const scenario of scenarios) {
				for (const side of order) {
					const value = await measure(subjects[side], admin, scenario, options.statsRows);
					(runs[scenario] ??= { before: [], after: [] })[side].push(
						round(value, scenario.endsWith('_ms') ? 3 : 0),
					);
				}
				log(
					`round ${r + 1}/${options.rounds} ${scenario}: before ${runs[scenario].before.at(-1)}, after ${runs[scenario].after.at(-1)}`,
				);
			}
		}
		const summary = Object.fromEntries(
			Object.entries(runs).map(([scenario, bySide]) => {
				const before = median(bySide.before);
				const after = median(bySide.after);
				// Throughput: after / before. Latency (…_ms): before / after. Above 1 = faster.
				const speedup = scenario.endsWith('_ms') ? before / after : after / before;
				return [scenario, { before, after, speedup: round(speedup, 2), runs: bySide }];
			}),
		);
		const report = {
			benchmark:
				'n8n-nodes-durable-jobs: core at a git ref (before) vs the working tree (after), alternating runs',
			ref: options.ref,
			refCommit: exported.commit,
			rounds: options.rounds,
			statsRows: options.statsRows,
			units: 'jobs/s, except stats_p95_ms (milliseconds, p95 of 100 calls)',
			summary,
		};
		process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
		for (const [scenario, result] of Object.entries(summary))
			log(
				`${scenario.padEnd(16)} before ${result.before}  after ${result.after}  speed-up ${result.speedup}×`,
			);
	} finally {
		for (const subject of Object.values(subjects)) {
			await subject.pool
				.query(`DROP SCHEMA IF EXISTS ${quoteIdent(subject.schema)} CASCADE`)
				.catch(() => undefined);
			await subject.pool.end().catch(() => undefined);
		}
		await admin.end().catch(() => undefined);
		await postgres.stop();
		rmSync(exported.dir, { recursive: true, force: true });
	}
}

runMain(main);
