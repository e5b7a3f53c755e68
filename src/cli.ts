#!/usr/bin/env node
import pg from 'pg';

import {
	DEFAULT_SCHEMA,
	DurableJobsError,
	MigrationHistoryError,
	MigrationNotPermittedError,
	MigrationWaitsError,
	ValidationError,
	connectionProblem,
	migrationScript,
	unreachableDetail,
	validateSchemaName,
	type ConnectionProblem,
} from './core';
import { DEFERRABLE_MIGRATION_IDS, migrate } from './core/migrate';

/** Exit status of a migration that waits: nothing of it was applied, try again later. */
export const EXIT_MIGRATION_WAITS = 75; // EX_TEMPFAIL
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

export const USAGE = `Usage: n8n-nodes-durable-jobs <command> [--schema NAME]

Commands:
  migrate   apply the package's missing migrations to the database in DATABASE_URL
            (or the PGHOST, PGPORT, PGDATABASE, PGUSER and PGPASSWORD variables), as
            the owner of the schema (for a new schema, a role with CREATE on the database)
  sql       print a SQL script for applying them by hand: on a schema at any earlier
            version it applies exactly the missing migrations, in order, each in its own
            transaction; run it with psql -v ON_ERROR_STOP=1 -f FILE (or any client that
            runs a script, not in one transaction), as migrate's role

Options:
  --schema NAME, --schema=NAME   schema of the job tables (default ${DEFAULT_SCHEMA})
  -h, --help                     print this help

Exit status:
  0    done (migrate: the schema is up to date)
  1    failed; the message says why and what to do
  2    wrong command line
  ${EXIT_MIGRATION_WAITS}   a migration waits (for running jobs, or for a lock another transaction
       holds): nothing of it was applied; run migrate again once that is over
`;

export type Invocation =
	| { kind: 'help' }
	| { kind: 'run'; command: 'migrate' | 'sql'; schema: string }
	| { kind: 'wrong'; problem: string };

const SCHEMA_OPTION = '--schema';

/** Reads the command line (without node and the script). */
export function parseArguments(argv: readonly string[]): Invocation {
	if (argv.some((argument) => argument === '--help' || argument === '-h')) return { kind: 'help' };
	const wrong = (problem: string): Invocation => ({ kind: 'wrong', problem });
	let command: string | undefined;
	let schema: string | undefined;
	for (let index = 0; index < argv.length; index++) {
		const argument = argv[index];
		if (argument === SCHEMA_OPTION || argument.startsWith(`${SCHEMA_OPTION}=`)) {
			if (schema !== undefined) return wrong(`${SCHEMA_OPTION} is given twice`);
			const value =
				argument === SCHEMA_OPTION ? argv[++index] : argument.slice(SCHEMA_OPTION.length + 1);
			if (value === undefined || value === '' || value.startsWith('-'))
				return wrong(`${SCHEMA_OPTION} needs a schema name`);
			schema = value;
		} else if (argument.startsWith('-')) {
			return wrong(`unknown option ${argument}`);
		} else if (command === undefined) {
			command = argument;
		} else {
			return wrong(`unexpected argument ${argument}`);
		}
	}
	if (command === 'help') return { kind: 'help' };
	if (command === undefined) return wrong('no command given');
	if (command !== 'migrate' && command !== 'sql') return wrong(`unknown command ${command}`);
	try {
		return { kind: 'run', command, schema: validateSchemaName(schema ?? DEFAULT_SCHEMA) };
	} catch (error) {
		if (!(error instanceof ValidationError)) throw error;
		return wrong(`${error.message.replace(/^schema: /, `${SCHEMA_OPTION}: `)}. ${error.fix ?? ''}`);
	}
}

/** Each connection problem in the words of this command, whose settings come from the environment. */
const ENVIRONMENT_PROBLEMS: Readonly<Record<ConnectionProblem, { message: string; fix: string }>> =
	{
		password_missing: {
			message: 'PostgreSQL asks for a password, and none was given',
			fix: 'Put it in DATABASE_URL (postgres://USER:PASSWORD@HOST:PORT/DATABASE) or in PGPASSWORD',
		},
		login_rejected: {
			message: 'PostgreSQL rejected the user name or password',
			fix: 'Check the user and password in DATABASE_URL (or PGUSER and PGPASSWORD)',
		},
		database_missing: {
			message: 'The database does not exist',
			fix: 'Check the database name in DATABASE_URL (or PGDATABASE), or create it (CREATE DATABASE …)',
		},
		host_unknown: {
			message: 'The database host name could not be resolved',
			fix: 'Check the host in DATABASE_URL (or PGHOST)',
		},
		unreachable: {
			message: 'PostgreSQL is unreachable',
			fix: 'Check that PostgreSQL is running and the host and port in DATABASE_URL (or PGHOST and PGPORT)',
		},
	};

/** What to print for an error, and the exit status. */
export function describeFailure(
	error: unknown,
	schema: string,
): { stdout: string; stderr: string; exitCode: number } {
	const owner = `Run it as the owner of schema "${schema}" and its tables (or, for a new schema, a role with CREATE on the database) in DATABASE_URL`;
	if (error instanceof MigrationWaitsError) {
		const meanwhile = DEFERRABLE_MIGRATION_IDS.has(error.migrationId)
			? 'The nodes work without it meanwhile (with Auto-Migrate on, n8n also applies it on a later use).'
			: 'The nodes need it: until it is applied they fail with migrations_missing.';
		return {
			stdout: appliedLine(schema, error.applied),
			stderr: `${error.message}.\nNothing of ${error.migration} was applied, nor any migration after it. ${meanwhile} Run this command again once that is over.\n`,
			exitCode: EXIT_MIGRATION_WAITS,
		};
	}
	const failed = (message: string, fix: string) => ({
		stdout: '',
		stderr: `${message}\n${fix}\n`,
		exitCode: EXIT_FAILED,
	});
	const problem = connectionProblem(error);
	if (problem) {
		const texts = ENVIRONMENT_PROBLEMS[problem];
		return failed(
			problem === 'unreachable' ? `${texts.message} (${unreachableDetail(error)})` : texts.message,
			texts.fix,
		);
	}
	if (error instanceof MigrationNotPermittedError) return failed(error.message, owner);
	if (error instanceof MigrationHistoryError)
		return failed(
			error.message,
			`Choose another schema with ${SCHEMA_OPTION} (and the same in the credential's Schema): this one belongs to another application, or its migration history was edited`,
		);
	if (error instanceof DurableJobsError)
		return failed(error.message, error.code === 'permission_denied' ? owner : (error.fix ?? ''));
	return failed(String((error as Error | null)?.message ?? error), '');
}

function appliedLine(schema: string, applied: readonly string[]): string {
	return applied.length > 0 ? `Applied to schema "${schema}": ${applied.join(', ')}\n` : '';
}

function databaseConfig(): pg.PoolConfig {
	return process.env.DATABASE_URL
		? { connectionString: process.env.DATABASE_URL, max: 1 }
		: { max: 1 };
}

async function runMigrate(schema: string): Promise<number> {
	const pool = new pg.Pool(databaseConfig());
	pool.on('error', () => undefined);
	try {
		const result = await migrate(pool, schema, {
			onNewerSchema: (message) => process.stderr.write(`${message}\n`),
		});
		process.stdout.write(
			appliedLine(schema, result.applied) || `Schema "${schema}" is up to date\n`,
		);
		return 0;
	} catch (error) {
		const failure = describeFailure(error, schema);
		process.stdout.write(failure.stdout);
		process.stderr.write(failure.stderr);
		return failure.exitCode;
	} finally {
		await pool.end();
	}
}

export async function main(argv: readonly string[]): Promise<number> {
	const invocation = parseArguments(argv);
	if (invocation.kind === 'help') {
		process.stdout.write(USAGE);
		return 0;
	}
	if (invocation.kind === 'wrong') {
		process.stderr.write(`n8n-nodes-durable-jobs: ${invocation.problem}\n\n${USAGE}`);
		return EXIT_USAGE;
	}
	if (invocation.command === 'sql') {
		process.stdout.write(migrationScript(invocation.schema));
		return 0;
	}
	return await runMigrate(invocation.schema);
}

if (require.main === module) {
	main(process.argv.slice(2)).then(
		(code) => process.exit(code),
		(error: unknown) => {
			process.stderr.write(`${String((error as Error | null)?.message ?? error)}\n`);
			process.exit(EXIT_FAILED);
		},
	);
}
