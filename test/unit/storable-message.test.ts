import { ValidationError } from '../../src/core';
import { ERROR_MESSAGE_MAX_LENGTH, storableMessage } from '../../src/core/validate';

describe('storableMessage (the error message stored with a failure)', () => {
	it('keeps text within the limit as it is, and gives null for nothing', () => {
		expect(storableMessage('Not a PDF', 'errorMessage')).toBe('Not a PDF');
		expect(storableMessage(502, 'errorMessage')).toBe('502');
		const atLimit = 'x'.repeat(ERROR_MESSAGE_MAX_LENGTH);
		expect(storableMessage(atLimit, 'errorMessage')).toBe(atLimit);
		for (const nothing of [undefined, null, '']) expect(storableMessage(nothing, 'm')).toBeNull();
	});

	it('cuts text past the limit to the limit, keeping its start and saying how long it was', () => {
		const text = 'abcdefghij'.repeat(500);
		const stored = storableMessage(text, 'errorMessage')!;
		expect(stored).toHaveLength(ERROR_MESSAGE_MAX_LENGTH);
		expect(stored.endsWith(' … [cut from 5000 characters]')).toBe(true);
		expect(text.startsWith(stored.slice(0, stored.indexOf(' … [cut')))).toBe(true);
	});

	it('never cuts between the two halves of a surrogate pair', () => {
		const note = ' … [cut from 5000 characters]';
		const end = ERROR_MESSAGE_MAX_LENGTH - note.length;
		// An emoji (two UTF-16 units) straddles the cut.
		const text = 'a'.repeat(end - 1) + '😀' + 'b'.repeat(5000 - end - 1);
		expect(text).toHaveLength(5000);
		const stored = storableMessage(text, 'errorMessage')!;
		expect(stored).toBe('a'.repeat(end - 1) + note);
		expect(stored).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
	});

	it('replaces NUL characters, which PostgreSQL cannot store, and refuses what is not text', () => {
		expect(storableMessage('a\u0000b\u0000', 'errorMessage')).toBe('a\uFFFDb\uFFFD');
		expect(() => storableMessage({ message: 'x' }, 'errorMessage')).toThrow(ValidationError);
	});
});
