import type { StoreContext } from '../context';
import { indexPlanSettingsQuery } from '../sql/dashboard';
import type { SqlQuery } from '../sql/types';
import type { JobSummary } from './contract';

/** The columns of `jobs` a JobSummary is made of, as the list and the story read them. */
export interface JobSummaryRow {
	id: string;
	queue: string;
	status: string;
	priority: number;
	attempts: number;
	max_attempts: number;
	created_at: Date;
	updated_at: Date;
	run_at: Date;
	started_at: Date | null;
	finished_at: Date | null;
	lease_until: Date | null;
	lease_expired: boolean | null;
	idempotency_key: string | null;
	correlation_id: string | null;
}

export function jobSummary(row: JobSummaryRow): JobSummary {
	return {
		job_id: String(row.id),
		queue: String(row.queue),
		status: String(row.status),
		priority: Number(row.priority),
		attempts: Number(row.attempts),
		max_attempts: Number(row.max_attempts),
		created_at: iso(row.created_at)!,
		updated_at: iso(row.updated_at)!,
		run_at: iso(row.run_at)!,
		started_at: iso(row.started_at),
		finished_at: iso(row.finished_at),
		lease_until: iso(row.lease_until),
		lease_expired: row.status === 'running' && row.lease_expired === true,
		idempotency_key: row.idempotency_key,
		correlation_id: row.correlation_id,
	};
}

/** Timestamps are answered as ISO strings, whether pg returned a Date or JSON text. */
export function iso(value: Date | string | null | undefined): string | null {
	if (value === null || value === undefined) return null;
	return value instanceof Date ? value.toISOString() : new Date(value).toISOString();
}

/** A list or chart statement, planned to read only the indexes it was written for. */
export async function runOnIndexes<R>(ctx: StoreContext, query: SqlQuery): Promise<R[]> {
	return await ctx.db.transaction(async (tx) => {
		await tx.run(indexPlanSettingsQuery());
		return await tx.run<R>(query);
	});
}
