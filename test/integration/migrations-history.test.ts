/**
 * The schema's migrations table must be this package's: another application's (n8n's own
 * TypeORM table in n8n's schema) or a history that names a shipped id otherwise is an error
 * naming the schema; a schema migrated by a newer version is a warning, and the store works.
 */
import {
	MigrationHistoryError,
	assertMigrated,
	migrate,
	openStore,
	resetMigrationCache,
	type StoreConfig,
} from '../../src/core';
import { connectionConfig, dropSchema, ok, testSchema, useTestSchema } from '../helpers/db';

const { schema, pool } = useTestSchema(__filename, {
	closeCachedPools: true,
	otherSchemas: ['n8n', 'edited', 'newer'].map((suffix) => `${testSchema(__filename)}_${suffix}`),
});
const n8nSchema = `${schema}_n8n`;
const editedSchema = `${schema}_edited`;
const newerSchema = `${schema}_newer`;

function config(target: string, autoMigrate: boolean): StoreConfig {
	return { ...connectionConfig(), schema: target, autoMigrate };
}

async function relationsOf(target: string): Promise<string[]> {
	const { rows } = await pool.query<{ relname: string }>(
		`SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'r' ORDER BY relname`,
		[target],
	);
	return rows.map((row) => row.relname);
}

describe("a schema whose migrations table is not this package's", () => {
	beforeAll(async () => {
		await dropSchema(pool, n8nSchema);
		// What n8n's TypeORM creates in the schema of its own database.
		await pool.query(`CREATE SCHEMA "${n8nSchema}"`);
		await pool.query(
			`CREATE TABLE "${n8nSchema}".migrations (id serial PRIMARY KEY, "timestamp" bigint NOT NULL, name varchar NOT NULL)`,
		);
		await pool.query(
			`INSERT INTO "${n8nSchema}".migrations ("timestamp", name)
			SELECT 1587669153312 + i, 'Migration' || (1587669153312 + i) FROM generate_series(1, 42) AS i`,
		);
	});

	it('migrate() fails naming the schema and the fix, and creates nothing', async () => {
		const error = await migrate(pool, n8nSchema).catch((caught: unknown) => caught);
		expect(error).toBeInstanceOf(MigrationHistoryError);
		const { code, message, fix } = error as MigrationHistoryError;
		expect(code).toBe('migration_history_mismatch');
		expect(message).toContain(`Schema "${n8nSchema}" is not a Durable Jobs schema`);
		expect(message).toContain('id integer, timestamp bigint, name character varying');
		expect(fix).toContain('Choose another Schema in the Durable Jobs Postgres credential');
		expect(await relationsOf(n8nSchema)).toEqual(['migrations']);
	});

	it('opening a store fails the same way, with Auto-Migrate on or off', async () => {
		for (const autoMigrate of [true, false]) {
			resetMigrationCache();
			const error = await openStore(config(n8nSchema, autoMigrate)).catch(
				(caught: unknown) => caught,
			);
			expect(error, `autoMigrate ${autoMigrate}`).toBeInstanceOf(MigrationHistoryError);
		}
		expect(await relationsOf(n8nSchema)).toEqual(['migrations']);
	});

	it("a table of this package's shape that names a shipped id otherwise (an edited history) fails naming the id", async () => {
		await dropSchema(pool, editedSchema);
		await migrate(pool, editedSchema);
		await pool.query(
			`UPDATE "${editedSchema}".migrations SET name = '0003_something_else.sql' WHERE id = 3`,
		);
		const error = await assertMigrated(pool, editedSchema).catch((caught: unknown) => caught);
		expect(error).toBeInstanceOf(MigrationHistoryError);
		expect((error as Error).message).toContain(
			`Schema "${editedSchema}" is not a Durable Jobs schema: its migrations table records migration 3 as "0003_something_else.sql", where this package's is "0003_status_token_secret.sql"`,
		);
		await expect(migrate(pool, editedSchema)).rejects.toBeInstanceOf(MigrationHistoryError);
	});
});

describe('a schema migrated by a newer version of the package', () => {
	beforeAll(async () => {
		await dropSchema(pool, newerSchema);
		await migrate(pool, newerSchema);
		await pool.query(
			`INSERT INTO "${newerSchema}".migrations (id, name) VALUES (19, '0019_from_the_future.sql')`,
		);
	});

	it('opens with a warning naming the newer migration, with Auto-Migrate on or off, once per process', async () => {
		for (const autoMigrate of [true, false]) {
			resetMigrationCache();
			const told: string[] = [];
			const events = { onMigrationsPending: (message: string) => told.push(message) };
			const store = await openStore(config(newerSchema, autoMigrate), {}, events);
			await openStore(config(newerSchema, autoMigrate), {}, events);
			expect(told, `autoMigrate ${autoMigrate}`).toHaveLength(1);
			expect(told[0]).toContain(
				`schema "${newerSchema}" was migrated by a newer version of n8n-nodes-durable-jobs: it has migration "0019_from_the_future.sql", which this version does not ship`,
			);
			ok((await store.enqueue([{ queue: 'newer', payload: { autoMigrate } }]))[0]);
		}
	});

	it('migrate() applies nothing and says so', async () => {
		const told: string[] = [];
		const result = await migrate(pool, newerSchema, {
			onNewerSchema: (message) => told.push(message),
		});
		expect(result.applied).toEqual([]);
		expect(told).toHaveLength(1);
		expect(told[0]).toContain('0019_from_the_future.sql');
	});
});
