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
 * ratio of the medians (`ours / theirs`), never on the rounded figure the report shows (0.9995
 * rounds to 1 and 1.4997 to 1.5, which would count a missed target as met). The figure has two
 * decimals, or as many more as it takes to keep it on the same side of the target as the ratio.
 */
export function ratioTarget(
	id: string,
	description: string,
	required: number,
	ours: number | null | undefined,
	theirs: number | null | undefined,
): Target {
	const value =
		ours === null || ours === undefined || theirs === null || theirs === undefined || theirs === 0
			? null
			: ours / theirs;
	const met = value === null ? null : value >= required;
	return {
		id,
		description,
		required: `>= ${required}x`,
		actual: value === null ? null : `${shownRatio(value, met === true, required)}x`,
		met,
	};
}

/** `value` rounded to the fewest decimals, at least two, that leave it on its side of `required`. */
function shownRatio(value: number, met: boolean, required: number): number {
	for (let digits = 2; digits < 12; digits++) {
		const shown = round(value, digits);
		if (shown >= required === met) return shown;
	}
	return value;
}
