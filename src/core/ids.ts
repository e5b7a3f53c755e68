import { randomFillSync } from 'node:crypto';

/**
 * Job ids: UUIDv7 laid out exactly as `uuid`'s v7 lays them out (48-bit Unix milliseconds, then
 * a 32-bit counter drawn at random each new millisecond and incremented within one, then 42
 * random bits), so ids of one process sort by creation. The random bytes come from a pool 16
 * times larger than `uuid`'s, and the text from a lookup table: a batch of 1,000 jobs spent
 * about a fifth of its client time in `uuid` refilling its 256-byte pool and copying slices.
 */

const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let poolOffset = POOL_BYTES;
let lastMs = -Infinity;
let counter = 0;

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));

export function newJobId(): string {
	if (poolOffset > POOL_BYTES - 16) {
		randomFillSync(pool);
		poolOffset = 0;
	}
	const r = poolOffset;
	poolOffset += 16;
	const now = Date.now();
	if (now > lastMs) {
		counter = (pool[r + 6] << 23) | (pool[r + 7] << 16) | (pool[r + 8] << 8) | pool[r + 9];
		lastMs = now;
	} else {
		// Same millisecond, or the clock went back: keep counting from the last id.
		counter = (counter + 1) | 0;
		if (counter === 0) lastMs++;
	}
	const ms = lastMs;
	return (
		HEX[(ms / 0x10000000000) & 0xff] +
		HEX[(ms / 0x100000000) & 0xff] +
		HEX[(ms / 0x1000000) & 0xff] +
		HEX[(ms / 0x10000) & 0xff] +
		'-' +
		HEX[(ms / 0x100) & 0xff] +
		HEX[ms & 0xff] +
		'-' +
		HEX[0x70 | ((counter >>> 28) & 0x0f)] +
		HEX[(counter >>> 20) & 0xff] +
		'-' +
		HEX[0x80 | ((counter >>> 14) & 0x3f)] +
		HEX[(counter >>> 6) & 0xff] +
		'-' +
		HEX[((counter << 2) & 0xff) | (pool[r + 10] & 0x03)] +
		HEX[pool[r + 11]] +
		HEX[pool[r + 12]] +
		HEX[pool[r + 13]] +
		HEX[pool[r + 14]] +
		HEX[pool[r + 15]]
	);
}
