import type { StoreContext } from '../context';
import { clockQuery, finishedPerMinuteQuery } from '../sql/dashboard';
import { stats as queueStats } from '../status';
import { optionalDate } from '../validate';
import { runOnIndexes } from './shared';
import type { ChartPoint, QueueOverview } from './contract';

export const CHART_MINUTES = 60;

/**
 * Counts per queue (Queue Stats, which never reads finished rows) and the jobs finished and
 * failed per minute. `chartSince` limits the chart to the minutes from then on: a page that
 * refreshes asks only for the last minutes, so a refresh costs what the last minutes finished,
 * not the whole hour.
 */
export async function queueOverview(
	ctx: StoreContext,
	options: { chartSince?: Date | string | null } = {},
): Promise<QueueOverview> {
	const since = optionalDate(options.chartSince, 'chart_since');
	const [stats, [clock]] = await Promise.all([
		queueStats(ctx, null),
		ctx.db.run<{ as_of: string; minute: string }>(clockQuery()),
	]);
	const toMinute = Number(clock.minute);
	const fromMinute = toMinute - (CHART_MINUTES - 1) * 60;
	const sinceSeconds =
		since === null ? fromMinute : Math.max(fromMinute, Math.floor(since.getTime() / 60_000) * 60);
	const rows = await runOnIndexes<{ queue: string; minute: string; done: number; failed: number }>(
		ctx,
		finishedPerMinuteQuery(ctx.s, new Date(sinceSeconds * 1000).toISOString()),
	);
	const series = new Map<string, ChartPoint[]>();
	for (const row of rows) {
		if (Number(row.minute) > toMinute) continue;
		const points = series.get(row.queue) ?? [];
		points.push({ minute: minuteIso(Number(row.minute)), done: row.done, failed: row.failed });
		series.set(row.queue, points);
	}
	const queues = stats.map((entry) => ({
		queue: entry.queue,
		queued: entry.queued,
		ready: entry.ready,
		scheduled: Math.max(0, entry.queued - entry.ready),
		retrying: entry.retrying,
		running: entry.running,
		running_expired: entry.running_expired,
		done: entry.done,
		failed: entry.failed,
		cancelled: entry.cancelled,
		oldest_ready_age_seconds: entry.oldest_ready_age_seconds,
		oldest_queued_age_seconds: entry.oldest_queued_age_seconds,
	}));
	for (const queue of series.keys())
		if (!queues.some((entry) => entry.queue === queue)) series.delete(queue);
	return {
		as_of: clock.as_of,
		queues,
		chart: {
			from_minute: minuteIso(fromMinute),
			to_minute: minuteIso(toMinute),
			since: minuteIso(sinceSeconds),
			series: [...series].map(([queue, points]) => ({ queue, points })),
		},
	};
}

function minuteIso(epochSeconds: number): string {
	return new Date(epochSeconds * 1000).toISOString();
}
