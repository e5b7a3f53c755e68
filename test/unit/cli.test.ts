import {
	DatabaseUnavailableError,
	MigrationHistoryError,
	MigrationNotPermittedError,
	MigrationWaitsError,
	classifyDatabaseError,
} from '../../src/core/errors';
import {
	EXIT_FAILED,
	EXIT_MIGRATION_WAITS,
	USAGE,
	describeFailure,
	parseArguments,
} from '../../src/cli';

describe('the command line', () => {
	it.each([
		[['migrate'], 'migrate', 'durable_jobs'],
		[['migrate', '--schema', 'my_jobs'], 'migrate', 'my_jobs'],
		[['migrate', '--schema=my_jobs'], 'migrate', 'my_jobs'],
		[['--schema=my_jobs', 'sql'], 'sql', 'my_jobs'],
	])('%j runs %s on schema %s', (argv, command, schema) => {
		expect(parseArguments(argv)).toEqual({ kind: 'run', command, schema });
	});

	it.each([
		[['migrate', '-s', 'x'], 'unknown option -s'],
		[['migrate', '--shcema', 'x'], 'unknown option --shcema'],
		[['migrate', '--schema'], '--schema needs a schema name'],
		[['migrate', '--schema', '--help-me'], '--schema needs a schema name'],
		[['migrate', 'extra'], 'unexpected argument extra'],
		[['migrate', '--schema', 'a', '--schema=b'], '--schema is given twice'],
		[['migrate', '--schema', 'Bad'], '--schema: "Bad" is not a valid schema name'],
		[['push'], 'unknown command push'],
		[[], 'no command given'],
	])('%j is refused: %s', (argv, problem) => {
		const invocation = parseArguments(argv);
		expect(invocation.kind).toBe('wrong');
		expect((invocation as { problem: string }).problem).toContain(problem);
	});

	it.each([[['--help']], [['-h']], [['migrate', '--shcema', 'x', '--help']], [['help']]])(
		'%j asks for help, whatever else it says',
		(argv) => {
			expect(parseArguments(argv)).toEqual({ kind: 'help' });
		},
	);

	it('documents the exit status of a migration that waits', () => {
		expect(USAGE).toContain(`${EXIT_MIGRATION_WAITS}   a migration waits`);
		expect(USAGE).toContain('--schema NAME, --schema=NAME');
		expect(USAGE).toContain('psql -v ON_ERROR_STOP=1 -f FILE');
	});
});

describe('what the command line says about a failure', () => {
	it.each([
		[
			{ code: '28P01', message: 'password authentication failed' },
			'DATABASE_URL (or PGUSER and PGPASSWORD)',
		],
		[{ code: '3D000', message: 'database "x" does not exist' }, 'DATABASE_URL (or PGDATABASE)'],
		[{ code: 'ENOTFOUND', message: 'getaddrinfo ENOTFOUND db' }, 'DATABASE_URL (or PGHOST)'],
		[
			{ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED' },
			'DATABASE_URL (or PGHOST and PGPORT)',
		],
		[
			new Error('SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string'),
			'DATABASE_URL (postgres://USER:PASSWORD@HOST:PORT/DATABASE) or in PGPASSWORD',
		],
	])('a connection error %j names %s, not the credential', (driverError, fix) => {
		const error = classifyDatabaseError(driverError);
		expect(error).toBeInstanceOf(DatabaseUnavailableError);
		expect(error.fix).toContain('credential');
		const said = describeFailure(error, 'durable_jobs');
		expect(said.exitCode).toBe(EXIT_FAILED);
		expect(said.stderr).toContain(fix);
		expect(said.stderr).not.toContain('credential');
	});

	it('a role that may not migrate is told to run it as the schema owner', () => {
		const refused = classifyDatabaseError({
			code: '42501',
			message: 'must be owner of table jobs',
		});
		for (const error of [
			refused,
			new MigrationNotPermittedError(
				'durable_jobs',
				['0016_x.sql'],
				'must be owner of table jobs',
				refused,
			),
		]) {
			const said = describeFailure(error, 'durable_jobs');
			expect(said.stderr).toContain('Run it as the owner of schema "durable_jobs"');
			expect(said.stderr).not.toContain('Grant the runtime role');
		}
	});

	it("another application's schema is refused, naming --schema", () => {
		const said = describeFailure(new MigrationHistoryError('n8napp', 'its table …'), 'n8napp');
		expect(said.stderr).toContain('Schema "n8napp" is not a Durable Jobs schema');
		expect(said.stderr).toContain('--schema');
	});

	it('a migration that waits exits with 75, after what was applied, saying what to do', () => {
		const said = describeFailure(
			new MigrationWaitsError(
				'durable_jobs',
				{ id: 16, name: '0016_ordering_key_runs_alone.sql' },
				'Migration 0016 waits: 2 jobs of queue "q" with ordering key "k" are running at once',
				{ applied: ['0015_column_domains.sql'] },
			),
			'durable_jobs',
		);
		expect(said.exitCode).toBe(EXIT_MIGRATION_WAITS);
		expect(said.stdout).toBe('Applied to schema "durable_jobs": 0015_column_domains.sql\n');
		expect(said.stderr).toContain(
			'Migration 0016 waits: 2 jobs of queue "q" with ordering key "k" are running at once (schema "durable_jobs").',
		);
		expect(said.stderr).toContain('Run this command again once that is over');
	});
});
