import type { StoreConfig } from './connect';
import { DEFAULT_SCHEMA, validateSchemaName } from './identifiers';
import { DurableJobsError, classifyDatabaseError } from './errors';
import { Executor } from './executor';
import { missingMigrations } from './migrate';
import { newPool, toPoolConfig } from './pool';
import { DEFAULT_ISOLATION_QUERY } from './sql/transaction';

export interface ConnectionTestResult {
	ok: boolean;
	/** What the user can act on: connected and ready, or what is wrong and how to fix it. */
	message: string;
}

/** How long the test waits for a connection; shorter than a node's, so the editor answers soon. */
const TEST_CONNECTION_TIMEOUT_MS = 8_000;

function failure(error: DurableJobsError): ConnectionTestResult {
	return { ok: false, message: `${error.message}. ${error.fix ?? ''}`.trim() };
}

/**
 * Opens one connection with the config and reports what a user can act on: wrong password,
 * unreachable host, missing database, invalid schema name, missing migrations. Writes nothing.
 */
export async function testConnection(config: StoreConfig): Promise<ConnectionTestResult> {
	let schema: string;
	try {
		schema = validateSchemaName(config.schema ?? DEFAULT_SCHEMA);
	} catch (error) {
		return failure(error as DurableJobsError);
	}
	const db = new Executor(
		newPool({
			...toPoolConfig(config),
			max: 1,
			connectionTimeoutMillis: TEST_CONNECTION_TIMEOUT_MS,
		}),
		false,
	);
	try {
		const [{ isolation }] = await db.run<{ isolation: string }>(DEFAULT_ISOLATION_QUERY);
		// PostgreSQL runs read uncommitted as read committed.
		if (isolation !== 'read committed' && isolation !== 'read uncommitted') {
			// Single statements (most leases and completions) run at the default level; at
			// repeatable read a lease that meets a job changed since its snapshot fails.
			return {
				ok: false,
				message: `Connected, but transactions default to "${isolation}" for this user or database; Durable Jobs needs "read committed" (PostgreSQL's default). Run ALTER ROLE <user> SET default_transaction_isolation = 'read committed' (or ALTER DATABASE …), then reconnect.`,
			};
		}
		const missing = await missingMigrations(db, schema);
		if (missing.length === 0)
			return { ok: true, message: `Connected; schema "${schema}" is up to date` };
		if (config.autoMigrate === false) {
			return {
				ok: false,
				message: `Connected, but schema "${schema}" is missing migrations (${missing.map((m) => m.name).join(', ')}) and Auto-Migrate is off. Apply them with "npx n8n-nodes-durable-jobs migrate" or turn Auto-Migrate on.`,
			};
		}
		return {
			ok: true,
			message: `Connected; schema "${schema}" will be created or upgraded on first use`,
		};
	} catch (error) {
		return failure(classifyDatabaseError(error));
	} finally {
		await db.close();
	}
}
