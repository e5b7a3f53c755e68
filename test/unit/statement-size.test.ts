import {
	MAX_CHARS_PER_STATEMENT,
	ROW_FRAME_CHARS,
	inChunks,
	totalChars,
} from '../../src/core/statementSize';

const length = (text: string) => text.length;

describe('inChunks', () => {
	it('keeps rows that fit in one chunk, as they came', () => {
		const rows = ['a', 'bb', 'ccc'];
		expect(inChunks(rows, length, 6, 0)).toEqual([rows]);
	});

	it('starts a new chunk where the next row would pass the limit, keeping the order', () => {
		expect(inChunks(['aaa', 'bb', 'c', 'dddd', 'e'], length, 5, 0)).toEqual([
			['aaa', 'bb'],
			['c', 'dddd'],
			['e'],
		]);
	});

	it('gives a row larger than the limit a chunk of its own', () => {
		expect(inChunks(['a', 'bbbbbbb', 'c'], length, 3, 0)).toEqual([['a'], ['bbbbbbb'], ['c']]);
	});

	it('no rows are one empty chunk', () => {
		expect(inChunks([], length, 3, 0)).toEqual([[]]);
	});

	it('counts every row for its frame too', () => {
		expect(inChunks(['a', 'b', 'c'], length, 4, 1)).toEqual([['a', 'b'], ['c']]);
		expect(totalChars(['a', 'b', 'c'], length, 1)).toBe(6);
	});

	it('rows of small values split only past tens of thousands', () => {
		const limitInRows = Math.floor(MAX_CHARS_PER_STATEMENT / ROW_FRAME_CHARS);
		expect(limitInRows).toBeGreaterThanOrEqual(30_000);
		const rows = Array.from({ length: limitInRows + 1 }, () => '');
		const chunks = inChunks(rows, length);
		expect(chunks.map((chunk) => chunk.length)).toEqual([limitInRows, 1]);
	});

	it('the default limit is the one the executor and the coalescer use', () => {
		const half = 'x'.repeat(MAX_CHARS_PER_STATEMENT / 2 - ROW_FRAME_CHARS);
		expect(inChunks([half, half], length)).toHaveLength(1);
		expect(inChunks([half, half, 'y'], length)).toHaveLength(2);
		expect(totalChars([half, half], length)).toBe(MAX_CHARS_PER_STATEMENT);
	});
});
