import {
	DurableJobsError,
	MigrationWaitsError,
	MigrationsMissingError,
	classifyDatabaseError,
	isMigrationWaitError,
	isSetupFault,
	sqlState,
} from '../../src/core/errors';

/** A driver error as node-postgres gives it: an Error with the server's SQLSTATE in `code`. */
function pgError(code: string, message: string): Error {
	return Object.assign(new Error(message), { code });
}

const waiting = () =>
	new MigrationWaitsError('durable_jobs', { id: 16, name: '0016_one_running_per_key' }, 'waits', {
		applied: [],
	});

describe('sqlState', () => {
	it('reads the SQLSTATE of a driver error, or of the driver error another error wraps', () => {
		expect(sqlState(pgError('42501', 'permission denied'))).toBe('42501');
		expect(sqlState(classifyDatabaseError(pgError('42501', 'permission denied')))).toBe('42501');
		expect(sqlState(new Error('no code'))).toBeUndefined();
		expect(sqlState(Object.assign(new Error('numeric'), { code: 5 }))).toBeUndefined();
		expect(sqlState(null)).toBeUndefined();
		expect(sqlState('text')).toBeUndefined();
	});
});

describe('isMigrationWaitError', () => {
	it('is true for a migration that waits, in every form the store and the runner give it', () => {
		expect(isMigrationWaitError(waiting())).toBe(true);
		expect(
			isMigrationWaitError(new MigrationsMissingError('s', ['0016'], { cause: waiting() })),
		).toBe(true);
		// The driver's own error, before the runner made a MigrationWaitsError of it.
		expect(isMigrationWaitError(pgError('DJ016', 'Migration 0016 waits'))).toBe(true);
		expect(
			isMigrationWaitError(
				new MigrationsMissingError('s', ['0016'], {
					cause: pgError('DJ016', 'Migration 0016 waits'),
				}),
			),
		).toBe(true);
	});

	it('is false for migrations that are missing for any other reason, and for other errors', () => {
		expect(isMigrationWaitError(new MigrationsMissingError('s', ['0001']))).toBe(false);
		expect(
			isMigrationWaitError(
				new MigrationsMissingError('s', ['0001'], {
					cause: pgError('42501', 'must be owner of table jobs'),
				}),
			),
		).toBe(false);
		expect(isMigrationWaitError(pgError('55P03', 'lock not available'))).toBe(false);
		expect(isMigrationWaitError(new Error('DJ016'))).toBe(false);
		expect(isMigrationWaitError(undefined)).toBe(false);
	});
});

describe('isSetupFault', () => {
	it('missing migrations are a setup fault unless one of them waits', () => {
		expect(isSetupFault(new MigrationsMissingError('s', ['0001']))).toBe(true);
		expect(isSetupFault(new MigrationsMissingError('s', ['0016'], { cause: waiting() }))).toBe(
			false,
		);
		expect(
			isSetupFault(
				new MigrationsMissingError('s', ['0016'], {
					cause: pgError('DJ016', 'Migration 0016 waits'),
				}),
			),
		).toBe(false);
	});

	it('a refused login is a setup fault, an unreachable server is not', () => {
		expect(isSetupFault(classifyDatabaseError(pgError('28P01', 'password failed')))).toBe(true);
		expect(isSetupFault(classifyDatabaseError(pgError('ECONNREFUSED', 'connect')))).toBe(false);
		expect(isSetupFault(new DurableJobsError('database_error', 'internal error'))).toBe(false);
	});
});
