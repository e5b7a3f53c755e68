#!/usr/bin/env node
import pg from 'pg';

import {
	DEFAULT_SCHEMA,
	DurableJobsError,
	migrate,
	migrationScript,
	validateSchemaName,
} from './core';

const USAGE = `Usage: n8n-nodes-durable-jobs <command> [--schema NAME]

Commands:
  migrate   apply the package's migrations to the database in DATABASE_URL
            (or the PGHOST/PGPORT/PGDATABASE/PGUSER/PGPASSWORD variables)
  sql       print all migrations as one SQL script, for applying by hand

Options:
  --schema NAME   schema for the job tables (default ${DEFAULT_SCHEMA})
`;

async function main(argv: string[]): Promise<number> {
	const command = argv[0];
	const schemaIndex = argv.indexOf('--schema');
	const schema = validateSchemaName(
		schemaIndex >= 0 ? (argv[schemaIndex + 1] ?? '') : DEFAULT_SCHEMA,
	);
	if (command === 'sql') {
		process.stdout.write(migrationScript(schema));
		return 0;
	}
	if (command === 'migrate') {
		const pool = new pg.Pool(
			process.env.DATABASE_URL
				? { connectionString: process.env.DATABASE_URL, max: 1 }
				: { max: 1 },
		);
		pool.on('error', () => undefined);
		try {
			const result = await migrate(pool, schema);
			process.stdout.write(
				result.applied.length > 0
					? `Applied to schema "${schema}": ${result.applied.join(', ')}\n`
					: `Schema "${schema}" is up to date\n`,
			);
			return 0;
		} finally {
			await pool.end();
		}
	}
	process.stderr.write(USAGE);
	return command === undefined || command === '--help' || command === 'help' ? 0 : 2;
}

main(process.argv.slice(2)).then(
	(code) => process.exit(code),
	(error: unknown) => {
		const message =
			error instanceof DurableJobsError
				? `${error.message}${error.fix ? `\n${error.fix}` : ''}`
				: String((error as Error)?.message ?? error);
		process.stderr.write(`${message}\n`);
		process.exit(1);
	},
);
