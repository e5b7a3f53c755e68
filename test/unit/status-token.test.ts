import { createHmac, randomBytes } from 'node:crypto';

import { hashToken, statusToken, statusTokenSigner, tokenMatches } from '../../src/core/tokens';

describe('statusToken', () => {
	it.each([0, 1, 16, 32, 63, 64, 65, 200])(
		'is HMAC-SHA256 (base64url) of the job id under a %i-byte secret',
		(length) => {
			const secret = randomBytes(length);
			for (let index = 0; index < 200; index++) {
				const jobId = index % 7 === 0 ? `ü-${index}-€` : randomBytes(16).toString('hex');
				expect(statusToken(secret, jobId)).toBe(
					createHmac('sha256', secret).update(jobId).digest('base64url'),
				);
			}
		},
	);

	it('keeps secrets apart and answers the same token again', () => {
		const first = randomBytes(32);
		const second = randomBytes(32);
		const jobId = '01a23b26-bf35-723e-889b-1e664226c894';
		expect(statusToken(first, jobId)).toBe(statusToken(first, jobId));
		expect(statusToken(first, jobId)).not.toBe(statusToken(second, jobId));
	});
});

describe('statusTokenSigner', () => {
	it('is statusToken for one secret, for ids of any length, and is made once per secret', () => {
		const secret = randomBytes(32);
		const sign = statusTokenSigner(secret);
		expect(statusTokenSigner(secret)).toBe(sign);
		for (const jobId of [
			'',
			'a',
			'€'.repeat(64),
			'x'.repeat(64),
			'x'.repeat(65),
			'é'.repeat(500),
		]) {
			expect(sign(jobId)).toBe(createHmac('sha256', secret).update(jobId).digest('base64url'));
		}
		// The signer reuses its buffers: a short id after a longer one hashes only its own bytes.
		const long = '01a23b26-bf35-723e-889b-1e664226c894';
		sign(long);
		expect(sign('abc')).toBe(createHmac('sha256', secret).update('abc').digest('base64url'));
	});
});

describe('tokenMatches', () => {
	it('matches only a stored hash of the token; a job without one, or with a hash of another length, matches nothing', () => {
		const token = 'a-token';
		expect(tokenMatches(hashToken(token), token)).toBe(true);
		expect(tokenMatches(hashToken(token), 'another')).toBe(false);
		// The compare runs against a fixed hash when the stored one is missing or malformed;
		// the token that hash is made from must not pass.
		for (const stored of [null, undefined, Buffer.alloc(5), Buffer.alloc(0)]) {
			expect(tokenMatches(stored, 'durable-jobs-no-such-job')).toBe(false);
			expect(tokenMatches(stored, token)).toBe(false);
		}
	});
});
