/**
 * Auto-Migrate (on by default) with a runtime role that has exactly the README's privileges
 * ("Database privileges"): it may not apply migrations. When all it lacks are migrations the
 * package works without, the store opens with a warning; when one it needs is missing, the
 * error says to migrate as the schema's owner.
 */
import {
	MigrationsMissingError,
	loadMigrations,
	migrate,
	openStore,
	resetMigrationCache,
	testConnection,
	type StoreConfig,
} from '../../src/core';
import {
	connectionConfig,
	databaseUrl,
	dropSchema,
	newPool,
	ok,
	schemaAtMigration,
	useTestSchema,
} from '../helpers/db';

const runtime = `djt_rt_priv_${process.pid}`;
const { schema, pool } = useTestSchema(__filename, {
	closeCachedPools: true,
	cleanUp: async (admin) => {
		for (const suffix of ['_old', '_test14', '_test15', '_absent'])
			await dropSchema(admin, `${schema}${suffix}`);
		const { rows } = await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [runtime]);
		if (rows.length > 0) {
			await admin.query(`DROP OWNED BY "${runtime}" CASCADE`);
			await admin.query(`DROP ROLE "${runtime}"`);
		}
	},
});

/** README, "Database privileges", run by the schema's owner. */
async function grantRuntimePrivileges(target: string): Promise<void> {
	await pool.query(`GRANT USAGE ON SCHEMA "${target}" TO "${runtime}"`);
	await pool.query(
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${target}" TO "${runtime}"`,
	);
}

function runtimeConfig(target: string): StoreConfig {
	return {
		...connectionConfig(databaseUrl(), { user: runtime, maxConnections: 4 }),
		schema: target,
	};
}

async function appliedIds(target: string): Promise<number> {
	return (await pool.query(`SELECT max(id)::int AS id FROM "${target}".migrations`)).rows[0].id;
}

beforeAll(async () => {
	await pool.query(`DROP ROLE IF EXISTS "${runtime}"`);
	const password = connectionConfig().password;
	await pool.query(
		`CREATE ROLE "${runtime}" LOGIN${password ? ` PASSWORD '${password.replace(/'/g, "''")}'` : ''}`,
	);
});

describe('Auto-Migrate with a runtime role that may not migrate', () => {
	it('opens the store, with a warning naming the migrate command, when it lacks only migrations the package works without', async () => {
		await schemaAtMigration(pool, schema, 15);
		await grantRuntimePrivileges(schema);
		resetMigrationCache();
		const told: string[] = [];
		const events = { onMigrationsPending: (message: string) => told.push(message) };

		const store = await openStore(runtimeConfig(schema), {}, events);
		await openStore(runtimeConfig(schema), {}, events);

		expect(told).toHaveLength(1);
		for (const part of [
			`schema "${schema}" lacks migrations`,
			'0016_ordering_key_runs_alone.sql (without it,',
			'0017_running_by_lease_end.sql (without it,',
			'0018_running_by_attempt_lease_end.sql (without it,',
			"the credential's role may not apply them",
			'must be owner of',
			`node node_modules/n8n-nodes-durable-jobs/dist/src/cli.js migrate --schema ${schema}`,
			'turn off "Auto-Migrate"',
		])
			expect(told[0]).toContain(part);
		expect(await appliedIds(schema)).toBe(15);

		const [enqueued] = (await store.enqueue([{ queue: 'privileges', payload: { n: 1 } }])).map(ok);
		const leased = await store.lease({ queue: 'privileges', limit: 1 });
		expect(leased.map((job) => job.id)).toEqual([enqueued.jobId]);
	});

	it('fails, naming the migration and the fix (migrate as the schema owner), when it lacks one the package needs', async () => {
		const old = `${schema}_old`;
		await dropSchema(pool, old);
		await schemaAtMigration(pool, old, 14);
		await grantRuntimePrivileges(old);
		resetMigrationCache();

		const error = await openStore(runtimeConfig(old)).catch((caught: unknown) => caught);

		expect(error).toBeInstanceOf(MigrationsMissingError);
		const { code, message, fix } = error as MigrationsMissingError;
		expect(code).toBe('migrations_missing');
		expect(message).toContain(`Schema "${old}" is missing migrations 0015_column_domains.sql`);
		expect(message).toContain('the role it connects as may not apply them');
		expect(fix).toContain(`owner of schema "${old}"`);
		expect(fix).toContain(
			`node node_modules/n8n-nodes-durable-jobs/dist/src/cli.js migrate --schema ${old}`,
		);
		expect(fix).not.toContain('Grant the runtime role');
		expect(await appliedIds(old)).toBe(14);

		// The schema's owner migrates; the runtime role's next use works.
		const owner = newPool(1);
		try {
			expect((await migrate(owner, old)).applied).toHaveLength(loadMigrations().length - 14);
		} finally {
			await owner.end();
		}
		await grantRuntimePrivileges(old);
		await expect(openStore(runtimeConfig(old))).resolves.toBeDefined();
	});
});

describe("the credential's test with a role that may not migrate (Auto-Migrate on)", () => {
	const command = (target: string) =>
		`node node_modules/n8n-nodes-durable-jobs/dist/src/cli.js migrate --schema ${target}`;

	it('is OK, naming the migrations the nodes work without and how to apply them', async () => {
		const target = `${schema}_test15`;
		await dropSchema(pool, target);
		await schemaAtMigration(pool, target, 15);
		await grantRuntimePrivileges(target);

		const result = await testConnection(runtimeConfig(target));

		expect(result.ok).toBe(true);
		for (const part of [
			`schema "${target}" lacks migrations the nodes work without`,
			'0016_ordering_key_runs_alone.sql, 0017_running_by_lease_end.sql, 0018_running_by_attempt_lease_end.sql',
			'this user may not apply them',
			"the owner of the schema's tables",
			command(target),
			'turn off Auto-Migrate',
		])
			expect(result.message).toContain(part);
		expect(await appliedIds(target)).toBe(15);
	});

	it("objects of other roles in the schema do not matter: only the package's own, and CREATE on the schema", async () => {
		const target = `${schema}_test15`;
		const other = `${runtime}_other`;
		const { rows } = await pool.query('SELECT current_user AS owner');
		const owner = String(rows[0].owner);
		await pool.query(`DROP ROLE IF EXISTS "${other}"`);
		await pool.query(`CREATE ROLE "${other}"`);
		// The runtime role may do what the owner of the package's objects may (not as a
		// superuser: that is not inherited), and create in the schema; another application's
		// view beside them belongs to a role it is no member of.
		await pool.query(`GRANT "${owner}" TO "${runtime}"`);
		await pool.query(`GRANT CREATE ON SCHEMA "${target}" TO "${runtime}"`);
		try {
			await pool.query(`CREATE VIEW "${target}".someone_elses AS SELECT 1 AS one`);
			await pool.query(`ALTER VIEW "${target}".someone_elses OWNER TO "${other}"`);
			expect(await testConnection(runtimeConfig(target))).toEqual({
				ok: true,
				message: `Connected; schema "${target}" will be created or upgraded on first use`,
			});
		} finally {
			await pool.query(`DROP VIEW IF EXISTS "${target}".someone_elses`);
			await pool.query(`REVOKE CREATE ON SCHEMA "${target}" FROM "${runtime}"`);
			await pool.query(`REVOKE "${owner}" FROM "${runtime}"`);
			await pool.query(`DROP ROLE IF EXISTS "${other}"`);
		}
	});

	it('names a missing CREATE privilege on the schema, and with Auto-Migrate off is OK while only migrations the nodes work without are missing', async () => {
		const target = `${schema}_test15`;
		const result = await testConnection(runtimeConfig(target));
		expect(result.message).toContain('no CREATE privilege on the schema, and it does not own');
		expect(await testConnection({ ...runtimeConfig(target), autoMigrate: false })).toEqual({
			ok: true,
			message: expect.stringContaining(
				`Connected; schema "${target}" lacks migrations the nodes work without (0016_ordering_key_runs_alone.sql, 0017_running_by_lease_end.sql, 0018_running_by_attempt_lease_end.sql), and Auto-Migrate is off. Turn Auto-Migrate on, or apply them`,
			),
		});
	});

	it('fails when a migration the nodes need is missing, naming the owner and the command', async () => {
		const target = `${schema}_test14`;
		await dropSchema(pool, target);
		await schemaAtMigration(pool, target, 14);
		await grantRuntimePrivileges(target);

		const result = await testConnection(runtimeConfig(target));

		expect(result.ok).toBe(false);
		expect(result.message).toContain(
			`schema "${target}" is missing migrations (0015_column_domains.sql, 0016_`,
		);
		expect(result.message).toMatch(
			/this user may not apply them \(no CREATE privilege on the schema, and it does not own "entity_versions", "idempotency_keys", "job_attempt_records", "job_attempts", "job_counts" and \d+ more \(nor is it a member of the owner\)\)/,
		);
		expect(result.message).toContain(command(target));
		expect(await appliedIds(target)).toBe(14);

		// Once the role inherits the owner's rights, the test expects the upgrade to work.
		const { rows } = await pool.query('SELECT current_user AS owner');
		await pool.query(`GRANT "${rows[0].owner}" TO "${runtime}"`);
		try {
			expect(await testConnection(runtimeConfig(target))).toEqual({
				ok: true,
				message: `Connected; schema "${target}" will be created or upgraded on first use`,
			});
		} finally {
			await pool.query(`REVOKE "${rows[0].owner}" FROM "${runtime}"`);
		}
	});

	it('fails when the schema does not exist and the role may not create it, and creates nothing', async () => {
		const target = `${schema}_absent`;
		await dropSchema(pool, target);

		const result = await testConnection(runtimeConfig(target));

		expect(result.ok).toBe(false);
		expect(result.message).toContain(
			`schema "${target}" does not exist and this user may not create it (no CREATE privilege on the database)`,
		);
		expect(result.message).toContain('one with CREATE on the database');
		expect(result.message).toContain(command(target));
		const { rows } = await pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [target]);
		expect(rows).toEqual([]);
	});
});
