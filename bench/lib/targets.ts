import { round } from './util';

/** One target of the report: what it asks, what the run measured, and whether that meets it. */
export interface Target {
	id: string;
	description: string;
	required: string;
	actual: string | null;
	met: boolean | null;
	note?: string;
}

/**
 * A target that ours' throughput be at least `required` times another library's: met on the
 * exact ratio of the medians (`ours / theirs`), never on the rounded figure the report shows
 * (0.9995 rounds to 1 and 1.4997 to 1.5, which would count a missed target as met). The figure
 * has two decimals, or four where two would put it on the other side of the target.
 */
export function ratioTarget(
	id: string,
	description: string,
	required: number,
	ours: number | null | undefined,
	theirs: number | null | undefined,
): Target {
	const value = ours && theirs ? ours / theirs : null;
	const met = value === null ? null : value >= required;
	const shown = value === null ? null : round(value, round(value, 2) >= required === met ? 2 : 4);
	return {
		id,
		description,
		required: `>= ${required}x`,
		actual: shown === null ? null : `${shown}x`,
		met,
	};
}
