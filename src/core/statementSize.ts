/**
 * The most characters one statement's rows carry. A batch with more goes as several statements
 * in one transaction: a statement's rows are sent as one parameter, built as one string, and V8
 * refuses strings past about 512 Mi characters (600 payloads of 1 MB each failed with
 * "RangeError: Invalid string length"); PostgreSQL refuses messages past 1 GB. A statement of
 * this size costs tens of milliseconds, so the extra round trips of a split batch cost next to
 * nothing.
 */
export const MAX_CHARS_PER_STATEMENT = 16 * 1024 * 1024;

/**
 * What a row is counted for besides its large values (RowStatement.charsOf): its ids, keys,
 * URLs and JSON framing. Rows of small payloads then split too, past about 32,000 of them.
 */
export const ROW_FRAME_CHARS = 512;

/** The characters of `rows`: their large values, as `charsOf` counts them, and their frames. */
export function totalChars<Row>(
	rows: readonly Row[],
	charsOf: (row: Row) => number,
	frameChars = ROW_FRAME_CHARS,
): number {
	let total = 0;
	for (const row of rows) total += frameChars + charsOf(row);
	return total;
}

/**
 * The rows in input order, cut into runs of at most `limit` characters each (see totalChars);
 * a row larger than `limit` on its own is a run of its own. One run when everything fits.
 */
export function inChunks<Row>(
	rows: readonly Row[],
	charsOf: (row: Row) => number,
	limit = MAX_CHARS_PER_STATEMENT,
	frameChars = ROW_FRAME_CHARS,
): Row[][] {
	const chunks: Row[][] = [];
	let current: Row[] = [];
	let chars = 0;
	for (const row of rows) {
		const size = frameChars + charsOf(row);
		if (current.length > 0 && chars + size > limit) {
			chunks.push(current);
			current = [];
			chars = 0;
		}
		current.push(row);
		chars += size;
	}
	if (current.length > 0 || chunks.length === 0) chunks.push(current);
	return chunks;
}
