/**
 * Small statistics for timing comparisons (security tests): quantiles and the two-sided
 * Mann-Whitney U test with the normal approximation and tie correction. No dependencies.
 */

export function quantile(values: number[], q: number): number {
	if (values.length === 0) return Number.NaN;
	const sorted = [...values].sort((a, b) => a - b);
	const position = (sorted.length - 1) * q;
	const lower = Math.floor(position);
	const upper = Math.ceil(position);
	return sorted[lower] + (sorted[upper] - sorted[lower]) * (position - lower);
}

export interface Summary {
	n: number;
	median: number;
	p95: number;
	mean: number;
	min: number;
	max: number;
}

export function summarize(values: number[]): Summary {
	return {
		n: values.length,
		median: quantile(values, 0.5),
		p95: quantile(values, 0.95),
		mean: values.reduce((sum, value) => sum + value, 0) / values.length,
		min: Math.min(...values),
		max: Math.max(...values),
	};
}

export interface MannWhitney {
	/** U of the first sample. */
	u: number;
	/** Standardised U (normal approximation, tie-corrected, with continuity correction). */
	z: number;
	/** Two-sided p-value. */
	p: number;
	/**
	 * Common-language effect size: P(a random value of A > a random value of B) + ½·P(tie).
	 * 0.5 means the two samples are indistinguishable.
	 */
	effect: number;
}

export function mannWhitneyU(a: number[], b: number[]): MannWhitney {
	const n1 = a.length;
	const n2 = b.length;
	const all = [
		...a.map((value) => ({ value, group: 0 })),
		...b.map((value) => ({ value, group: 1 })),
	].sort((x, y) => x.value - y.value);
	const ranks = new Array<number>(all.length);
	let tieTerm = 0;
	for (let i = 0; i < all.length; ) {
		let j = i;
		while (j + 1 < all.length && all[j + 1].value === all[i].value) j++;
		const rank = (i + j + 2) / 2;
		for (let k = i; k <= j; k++) ranks[k] = rank;
		const t = j - i + 1;
		tieTerm += t * t * t - t;
		i = j + 1;
	}
	let rankSumA = 0;
	all.forEach((entry, index) => {
		if (entry.group === 0) rankSumA += ranks[index];
	});
	const u = rankSumA - (n1 * (n1 + 1)) / 2;
	const n = n1 + n2;
	const meanU = (n1 * n2) / 2;
	const sigma = Math.sqrt(((n1 * n2) / 12) * (n + 1 - tieTerm / (n * (n - 1))));
	const z = sigma === 0 ? 0 : (u - meanU - Math.sign(u - meanU) * 0.5) / sigma;
	return { u, z, p: 2 * (1 - normalCdf(Math.abs(z))), effect: u / (n1 * n2) };
}

/** Standard normal CDF (Abramowitz-Stegun 7.1.26 via erf; error < 1.5e-7). */
export function normalCdf(x: number): number {
	const t = 1 / (1 + 0.3275911 * (Math.abs(x) / Math.SQRT2));
	const y =
		1 -
		((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) *
			t *
			Math.exp(-(x * x) / 2);
	return x >= 0 ? (1 + y) / 2 : (1 - y) / 2;
}

export function formatMs(value: number): string {
	return value < 1 ? `${(value * 1000).toFixed(0)} µs` : `${value.toFixed(2)} ms`;
}
