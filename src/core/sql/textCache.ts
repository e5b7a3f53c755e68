const texts = new Map<string, string>();

/** Far more than the texts a process builds: a few per schema and size class. */
const MAX_TEXTS = 500;

/**
 * The text of a frequent statement, built once per `key` (everything the text depends on).
 * Reusing the same string also makes the lookup of its prepared-statement name cheap: a
 * freshly built text of a few kilobytes had to be hashed and compared again on every call.
 */
export function cachedText(key: string, build: () => string): string {
	let text = texts.get(key);
	if (text === undefined) {
		text = build();
		if (texts.size >= MAX_TEXTS) texts.clear();
		texts.set(key, text);
	}
	return text;
}
