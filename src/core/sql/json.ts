/**
 * The JSON parameter of a batch statement (read with `jsonb_to_recordset`): one object per row.
 *
 * - Top-level keys whose value is null or undefined are left out: `jsonb_to_recordset` reads a
 *   missing key as NULL, and most optional fields are unset.
 * - Keys listed in `raw` hold JSON that is already serialised (a payload or a result, which the
 *   store serialised to check its size); they are spliced in as they are instead of being
 *   serialised again as an escaped string. A raw JSON `null` reads as SQL NULL, like a missing key.
 */
export function jsonRows<T extends object>(
	rows: readonly T[],
	raw: ReadonlyArray<keyof T & string> = [],
): string {
	const parts = new Array<string>(rows.length);
	for (let index = 0; index < rows.length; index++) {
		const row = rows[index] as Record<string, unknown>;
		const plain: Record<string, unknown> = {};
		for (const key of Object.keys(row)) {
			const value = row[key];
			if (value !== null && value !== undefined && !(raw as readonly string[]).includes(key))
				plain[key] = value;
		}
		let json = JSON.stringify(plain);
		for (const key of raw) {
			const value = row[key];
			if (typeof value !== 'string') continue;
			json = `${json.slice(0, -1)}${json.length > 2 ? ',' : ''}${JSON.stringify(key)}:${value}}`;
		}
		parts[index] = json;
	}
	return `[${parts.join(',')}]`;
}
