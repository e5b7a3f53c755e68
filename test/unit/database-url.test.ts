import {
	DatabaseUrlError,
	describeDatabaseUrlError,
	maskDatabaseUrl,
	parseDatabaseUrl,
	withDatabase,
} from '../../scripts/lib/database-url';

const FIX = 'Fix DATABASE_URL, or unset it to use an embedded PostgreSQL.';

function pgError(code: string, message: string): Error {
	return Object.assign(new Error(message), { code });
}

describe('parseDatabaseUrl', () => {
	it('splits a full URL, decoding percent-encoded parts', () => {
		expect(
			parseDatabaseUrl('postgres://app%40x:p%40ss%3Aw@db.example:6543/my%20db?sslmode=require'),
		).toEqual({
			host: 'db.example',
			port: 6543,
			database: 'my db',
			user: 'app@x',
			password: 'p@ss:w',
			sslmode: 'require',
			ssl: true,
		});
	});

	it('fills the defaults every caller used: port 5432, database postgres, no password, no TLS', () => {
		const parts = parseDatabaseUrl('postgresql://postgres@127.0.0.1');
		expect(parts).toMatchObject({
			host: '127.0.0.1',
			port: 5432,
			database: 'postgres',
			user: 'postgres',
			password: '',
			sslmode: null,
			ssl: false,
		});
	});

	it('takes an IPv6 host without its brackets', () => {
		expect(parseDatabaseUrl('postgres://u@[::1]:5433/d').host).toBe('::1');
	});

	it('rejects what is not a postgres URL with a one-line error naming the source and the expected form', () => {
		for (const [url, pattern] of [
			['not a url', /^DATABASE_URL is not a valid URL \("not a url"\); expected postgres:\/\//],
			['mysql://u@h/d', /^DATABASE_URL starts with "mysql:\/\/", not "postgres:\/\/"/],
			['postgres://u:%zz@h/d', /^DATABASE_URL: the password is not valid percent-encoding/],
		] as const) {
			let caught: unknown;
			try {
				parseDatabaseUrl(url);
			} catch (error) {
				caught = error;
			}
			expect(caught).toBeInstanceOf(DatabaseUrlError);
			expect((caught as Error).message).toMatch(pattern);
			expect((caught as Error).message).not.toContain('\n');
			// Printers of `stack` show the message alone.
			expect((caught as Error).stack).toBe((caught as Error).message);
		}
		expect(() => parseDatabaseUrl('http://h/d', 'the job database URL')).toThrow(
			/^the job database URL starts with "http:\/\/"/,
		);
	});
});

describe('maskDatabaseUrl and withDatabase', () => {
	it('hides the password, also in a URL that does not parse', () => {
		expect(maskDatabaseUrl('postgres://u:secret@h:1/d')).toBe('postgres://u:***@h:1/d');
		expect(maskDatabaseUrl('postgres://u:sec ret@h:1/d')).not.toContain('sec');
		expect(maskDatabaseUrl('postgres://u@h/d')).toBe('postgres://u@h/d');
	});

	it('points a URL at another database on the same server', () => {
		expect(withDatabase('postgres://u:p@h:1/postgres?sslmode=disable', 'n8n_e2e_1')).toBe(
			'postgres://u:p@h:1/n8n_e2e_1?sslmode=disable',
		);
	});
});

describe('describeDatabaseUrlError', () => {
	const url = 'postgres://nobody:secret@127.0.0.1:5999/jobs';
	const cases: Array<[string, unknown, RegExp]> = [
		[
			'connection refused',
			pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5999'),
			/nothing accepts connections at 127\.0\.0\.1:5999 \(connection refused/,
		],
		[
			'unknown role',
			pgError('28000', 'role "nobody" does not exist'),
			/the user \(role\) "nobody" does not exist on 127\.0\.0\.1:5999/,
		],
		[
			'wrong password',
			pgError('28P01', 'password authentication failed for user "nobody"'),
			/the password for user "nobody" was rejected/,
		],
		[
			'no password where the server asks for one',
			new Error('SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string'),
			/127\.0\.0\.1:5999 asks for a password for user "nobody", and the URL has none/,
		],
		[
			'unknown database',
			pgError('3D000', 'database "jobs" does not exist'),
			/the database "jobs" does not exist on 127\.0\.0\.1:5999/,
		],
		[
			'unknown host',
			pgError('ENOTFOUND', 'getaddrinfo ENOTFOUND'),
			/the host "127\.0\.0\.1" is not known/,
		],
		[
			'timeout',
			new Error('Connection terminated due to connection timeout'),
			/did not answer in time/,
		],
		['anything else', new Error('boom'), /connecting to 127\.0\.0\.1:5999 failed: boom/],
	];
	for (const [name, error, pattern] of cases) {
		it(`${name}: one line with the cause, the masked URL from DATABASE_URL, and the fix`, () => {
			const text = describeDatabaseUrlError(error, url);
			expect(text).toMatch(pattern);
			expect(text.startsWith('DATABASE_URL (postgres://nobody:***@127.0.0.1:5999/jobs): ')).toBe(
				true,
			);
			expect(text.endsWith(FIX)).toBe(true);
			expect(text).not.toContain('secret');
			expect(text).not.toContain('\n');
		});
	}

	it('a URL without a password that an md5 or plain-password server rejects: the server asks for one', () => {
		expect(
			describeDatabaseUrlError(
				pgError('28P01', 'password authentication failed for user "nobody"'),
				'postgres://nobody@127.0.0.1:5999/jobs',
			),
		).toBe(
			`DATABASE_URL (postgres://nobody@127.0.0.1:5999/jobs): 127.0.0.1:5999 asks for a password for user "nobody", and the URL has none. ${FIX}`,
		);
	});

	it('an unparseable URL: the parser message and the fix', () => {
		expect(describeDatabaseUrlError(new TypeError('Invalid URL'), 'nope')).toBe(
			`DATABASE_URL is not a valid URL ("nope"); expected postgres://user:password@127.0.0.1:5432/database. ${FIX}`,
		);
	});
});
