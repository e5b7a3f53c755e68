import { performance } from 'node:perf_hooks';
import type pg from 'pg';

/** Progress goes to stderr so that stdout carries only the JSON document. */
export function log(message: string): void {
	process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

export function now(): number {
	return performance.now();
}

export interface Summary {
	count: number;
	mean: number;
	p50: number;
	p95: number;
	p99: number;
	max: number;
	min: number;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: number[], p: number): number {
	if (sorted.length === 0) return Number.NaN;
	const rank = Math.ceil((p / 100) * sorted.length);
	return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

export function summarize(samples: number[]): Summary {
	const sorted = [...samples].sort((a, b) => a - b);
	const sum = sorted.reduce((total, value) => total + value, 0);
	return {
		count: sorted.length,
		mean: round(sum / Math.max(1, sorted.length), 3),
		p50: round(percentile(sorted, 50), 3),
		p95: round(percentile(sorted, 95), 3),
		p99: round(percentile(sorted, 99), 3),
		max: round(sorted[sorted.length - 1] ?? Number.NaN, 3),
		min: round(sorted[0] ?? Number.NaN, 3),
	};
}

export function median(values: number[]): number {
	const sorted = [...values].sort((a, b) => a - b);
	if (sorted.length === 0) return Number.NaN;
	const mid = Math.floor(sorted.length / 2);
	return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function round(value: number, digits = 1): number {
	if (!Number.isFinite(value)) return value;
	const factor = 10 ** digits;
	return Math.round(value * factor) / factor;
}

/** ours / theirs for throughputs; null when either side is missing. */
export function ratio(
	ours: number | null | undefined,
	theirs: number | null | undefined,
): number | null {
	if (
		ours === null ||
		ours === undefined ||
		theirs === null ||
		theirs === undefined ||
		theirs === 0
	)
		return null;
	return round(ours / theirs, 2);
}

export function quoteIdent(name: string): string {
	return `"${name.replace(/"/g, '""')}"`;
}

export async function dropSchema(pool: pg.Pool, schema: string): Promise<void> {
	await pool.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`);
}

/** VACUUM ANALYZE every table of one schema (never the whole database, which others may share). */
export async function vacuumAnalyzeSchema(pool: pg.Pool, schema: string): Promise<void> {
	const { rows } = await pool.query<{ name: string }>(
		`SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition`,
		[schema],
	);
	for (const row of rows) {
		await pool.query(`VACUUM ANALYZE ${quoteIdent(schema)}.${quoteIdent(row.name)}`);
	}
}

/** Flushes dirty buffers before a measured phase so a timed checkpoint does not land in one engine's run. */
export async function checkpoint(pool: pg.Pool): Promise<void> {
	await pool.query('CHECKPOINT').catch(() => undefined);
}

export function sleep(ms: number): Promise<void> {
	return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * `--name value` / `--name=value` flags of a benchmark script, checked against the known
 * names, with readers for whole numbers (`min` and up, else the fallback when absent) and for
 * `on` / `off`.
 */
export function readFlags(
	argv: string[],
	known: readonly string[],
): {
	flags: Map<string, string>;
	int: (name: string, fallback: number, min?: number) => number;
	onOff: (name: string, fallback: boolean) => boolean;
} {
	const flags = new Map<string, string>();
	for (let i = 0; i < argv.length; i++) {
		const arg = argv[i];
		if (!arg.startsWith('--')) throw new Error(`Unexpected argument ${arg}`);
		const [name, inline] = arg.slice(2).split('=', 2);
		const value = inline ?? argv[++i];
		if (value === undefined) throw new Error(`--${name} needs a value`);
		flags.set(name, value);
	}
	for (const name of flags.keys())
		if (!known.includes(name))
			throw new Error(`Unknown option --${name} (known: ${known.join(', ')})`);
	const int = (name: string, fallback: number, min = 0) => {
		const value = flags.has(name) ? Number(flags.get(name)) : fallback;
		if (!Number.isInteger(value) || value < min)
			throw new Error(`--${name} must be a whole number ≥ ${min}`);
		return value;
	};
	const onOff = (name: string, fallback: boolean) => {
		const value = flags.get(name);
		if (value === undefined) return fallback;
		if (value !== 'on' && value !== 'off') throw new Error(`--${name} must be on or off`);
		return value === 'on';
	};
	return { flags, int, onOff };
}

/** Runs a benchmark's `main`; an error is printed with its stack and the process exits with 1. */
export function runMain(main: () => Promise<void>): void {
	main().catch((error: unknown) => {
		process.stderr.write(
			`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
		);
		process.exit(1);
	});
}
