import { MAX_CHARS_PER_STATEMENT, inChunks, totalChars } from '../../src/core/statementSize';

const length = (text: string) => text.length;

describe('inChunks', () => {
	it('keeps rows that fit in one chunk, as they came', () => {
		const rows = ['a', 'bb', 'ccc'];
		expect(inChunks(rows, length, 6)).toEqual([rows]);
	});

	it('starts a new chunk where the next row would pass the limit, keeping the order', () => {
		expect(inChunks(['aaa', 'bb', 'c', 'dddd', 'e'], length, 5)).toEqual([
			['aaa', 'bb'],
			['c', 'dddd'],
			['e'],
		]);
	});

	it('gives a row larger than the limit a chunk of its own', () => {
		expect(inChunks(['a', 'bbbbbbb', 'c'], length, 3)).toEqual([['a'], ['bbbbbbb'], ['c']]);
	});

	it('no rows are one empty chunk', () => {
		expect(inChunks([], length, 3)).toEqual([[]]);
	});

	it('rows without large values never split', () => {
		const rows = Array.from({ length: 10_000 }, (_, index) => String(index));
		expect(inChunks(rows, () => 0)).toEqual([rows]);
	});

	it('the default limit is the one the executor and the coalescer use', () => {
		const half = 'x'.repeat(MAX_CHARS_PER_STATEMENT / 2);
		expect(inChunks([half, half], length)).toHaveLength(1);
		expect(inChunks([half, half, 'y'], length)).toHaveLength(2);
		expect(totalChars([half, half, 'y'], length)).toBe(MAX_CHARS_PER_STATEMENT + 1);
	});
});
