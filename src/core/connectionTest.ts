import type { StoreConfig } from './connect';
import { migrateCommandLine } from './defaults';
import { DEFAULT_SCHEMA, validateSchemaName } from './identifiers';
import { DurableJobsError, classifyDatabaseError } from './errors';
import { Executor } from './executor';
import { DEFERRABLE_MIGRATION_IDS, migrationRights, missingMigrations, someOf } from './migrate';
import { newPool, toPoolConfig, type ConnectionConfig } from './pool';
import { DEFAULT_ISOLATION_QUERY } from './sql/transaction';

export interface ConnectionTestResult {
	ok: boolean;
	/** What the user can act on: connected and ready, or what is wrong and how to fix it. */
	message: string;
}

/** How long the test waits for a connection; shorter than a node's, so the editor answers soon. */
const TEST_CONNECTION_TIMEOUT_MS = 8_000;

/**
 * Percent-encodes a part of a URL so that the URL needs no quoting in a shell either. (pg reads
 * the database name with decodeURI, so a name with one of `;/?:@&=+$,#` cannot be written.)
 */
function urlPart(text: string): string {
	return encodeURIComponent(text).replace(
		/[!'()*]/g,
		(char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`,
	);
}

/**
 * The command that applies the migrations by hand to the config's server, database and schema,
 * as a role that may create the tables (USER and PASSWORD to fill in: the credential's role is
 * often one that may not). It runs the installed version's own command, not `npx
 * n8n-nodes-durable-jobs`: installed from n8n's UI (n8n 2.x), the folder has no link to the
 * command, and npx answers "not found"; nor can it fetch the latest version from npm. The SSL
 * mode maps the credential's: Require encrypts without checking the certificate (`no-verify`).
 */
export function migrateCommand(config: ConnectionConfig, schema: string): string {
	// An IPv6 address goes in brackets; a socket folder (starting with "/") is encoded.
	const ipv6 = config.host.includes(':') && !/^[/[]/.test(config.host);
	const host = ipv6 ? `[${config.host}]` : urlPart(config.host);
	const sslMode =
		config.ssl === 'require'
			? '?sslmode=no-verify'
			: config.ssl === 'verify'
				? '?sslmode=verify-full'
				: '';
	const customCa = config.ssl === 'verify' && Boolean(config.caCertificate);
	const url = `postgres://USER:PASSWORD@${host}:${config.port}/${urlPart(config.database)}${sslMode}`;
	const command = migrateCommandLine(schema, url, customCa ? 'NODE_EXTRA_CA_CERTS=ca.pem ' : '');
	return customCa
		? `${command} (ca.pem: the credential's CA Certificate saved to a file)`
		: command;
}

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
		const names = missing.map((m) => m.name).join(', ');
		const onlyDeferrable = missing.every((m) => DEFERRABLE_MIGRATION_IDS.has(m.id));
		const where = `where n8n runs (in its container, if any), with the installed version's command in the folder the package is installed in (~/.n8n/nodes by default): ${migrateCommand(config, schema)}`;
		if (config.autoMigrate === false) {
			if (onlyDeferrable)
				return {
					ok: true,
					message: `Connected; schema "${schema}" lacks migrations the nodes work without (${names}), and Auto-Migrate is off. Turn Auto-Migrate on, or apply them as a role that may create the tables, ${where}`,
				};
			return {
				ok: false,
				message: `Connected, but schema "${schema}" is missing migrations (${names}) and Auto-Migrate is off. Turn Auto-Migrate on, or apply them as a role that may create the tables, ${where}`,
			};
		}
		const rights = await migrationRights(db, schema);
		if (rights.mayCreate && rights.notOwned.length === 0)
			return {
				ok: true,
				message: `Connected; schema "${schema}" will be created or upgraded on first use`,
			};
		const lacks = rights.schemaMissing
			? 'no CREATE privilege on the database'
			: [
					rights.mayCreate ? undefined : 'no CREATE privilege on the schema',
					rights.notOwned.length > 0
						? `it does not own ${someOf(rights.notOwned)} (nor is it a member of the owner)`
						: undefined,
				]
					.filter(Boolean)
					.join(', and ');
		const asOwner = `as a role that may (${rights.schemaMissing ? 'one with CREATE on the database' : "the owner of the schema's tables"}), ${where}`;
		if (onlyDeferrable)
			return {
				ok: true,
				message: `Connected; schema "${schema}" lacks migrations the nodes work without (${names}), and this user may not apply them (${lacks}). Apply them ${asOwner}; then turn off Auto-Migrate, or it tries again at each start of n8n`,
			};
		return {
			ok: false,
			message: rights.schemaMissing
				? `Connected, but schema "${schema}" does not exist and this user may not create it (${lacks}). Create it and its tables ${asOwner}; then grant this user the privileges listed in the README (section "Database privileges")`
				: `Connected, but schema "${schema}" is missing migrations (${names}) and this user may not apply them (${lacks}). Apply them ${asOwner}`,
		};
	} catch (error) {
		return failure(classifyDatabaseError(error));
	} finally {
		await db.close();
	}
}
