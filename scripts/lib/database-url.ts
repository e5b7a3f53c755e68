/**
 * One reading of a PostgreSQL connection URL for the scripts and the tests, and one answer to
 * "this URL does not work": `parseDatabaseUrl` splits `postgres://user:password@host:port/db`
 * into its parts (with the defaults every caller used before: database `postgres`, user
 * `$USER` or `postgres`, port 5432), and `checkDatabaseUrl` connects once, checks that the role
 * may create what the caller will create, and turns any failure into a `DatabaseUrlError` whose
 * one-line message says what is wrong, that it came from DATABASE_URL, and what to do.
 */
import pg from 'pg';

import { isMissingPasswordError } from '../../src/core/errors';

export interface DatabaseUrlParts {
	host: string;
	port: number;
	database: string;
	user: string;
	password: string;
	/** `sslmode` from the query string (`require`, `verify-full`, …), or null. */
	sslmode: string | null;
	/** True for the sslmodes that demand TLS. */
	ssl: boolean;
}

/** A connection URL that cannot be used; `message` is one line meant for the person running. */
export class DatabaseUrlError extends Error {
	constructor(message: string) {
		super(message);
		this.name = 'DatabaseUrlError';
		// The message is the whole story: printers of `stack` (bench, test runners) show one line.
		this.stack = message;
	}
}

const EXAMPLE = 'postgres://user:password@127.0.0.1:5432/database';

/** The URL with its password replaced by `***`, safe to print. */
export function maskDatabaseUrl(url: string): string {
	try {
		const parsed = new URL(url);
		if (parsed.password) parsed.password = '***';
		return parsed.toString();
	} catch {
		// Unparseable: show only what comes before a possible password.
		return url.replace(/\/\/([^:/@]*):[^@]*@/, '//$1:***@');
	}
}

function decode(part: string, what: string, source: string): string {
	try {
		return decodeURIComponent(part);
	} catch {
		throw new DatabaseUrlError(
			`${source}: the ${what} is not valid percent-encoding; encode special characters (e.g. @ as %40).`,
		);
	}
}

/**
 * Splits a `postgres://` (or `postgresql://`) URL into its parts. Throws a `DatabaseUrlError`
 * naming `source` (default `DATABASE_URL`) when it is not such a URL.
 */
export function parseDatabaseUrl(url: string, source = 'DATABASE_URL'): DatabaseUrlParts {
	let parsed: URL;
	try {
		parsed = new URL(url);
	} catch {
		throw new DatabaseUrlError(
			`${source} is not a valid URL (${JSON.stringify(maskDatabaseUrl(url))}); expected ${EXAMPLE}.`,
		);
	}
	if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
		throw new DatabaseUrlError(
			`${source} starts with "${parsed.protocol}//", not "postgres://"; expected ${EXAMPLE}.`,
		);
	}
	const sslmode = parsed.searchParams.get('sslmode');
	return {
		host: parsed.hostname.replace(/^\[(.*)\]$/, '$1') || 'localhost',
		port: parsed.port ? Number(parsed.port) : 5432,
		database: decode(parsed.pathname.slice(1), 'database name', source) || 'postgres',
		user: decode(parsed.username, 'user name', source) || process.env.USER || 'postgres',
		password: decode(parsed.password, 'password', source),
		sslmode,
		ssl: sslmode !== null && ['require', 'verify-ca', 'verify-full'].includes(sslmode),
	};
}

/** The same URL pointing at another database on the same server. */
export function withDatabase(url: string, database: string): string {
	const parsed = new URL(url);
	parsed.pathname = `/${encodeURIComponent(database)}`;
	return parsed.toString();
}

const FIX = 'Fix DATABASE_URL, or unset it to use an embedded PostgreSQL.';

/**
 * What went wrong connecting with a URL, in one line: the cause in plain words, where the URL
 * came from, and the fix. `error` is what `pg` (or `parseDatabaseUrl`) threw.
 */
export function describeDatabaseUrlError(
	error: unknown,
	url: string,
	source = 'DATABASE_URL',
): string {
	if (error instanceof DatabaseUrlError) return `${error.message} ${FIX}`;
	const err = error as NodeJS.ErrnoException & { code?: string; message?: string };
	let parts: DatabaseUrlParts | undefined;
	try {
		parts = parseDatabaseUrl(url, source);
	} catch (parseError) {
		return `${(parseError as Error).message} ${FIX}`;
	}
	const where = `${parts.host}:${parts.port}`;
	const message = String(err?.message ?? error).split('\n')[0];
	const noPassword = `${where} asks for a password for user "${parts.user}", and the URL has none`;
	let cause: string;
	switch (err?.code) {
		case 'ECONNREFUSED':
			cause = `nothing accepts connections at ${where} (connection refused: no PostgreSQL running there)`;
			break;
		case 'ENOTFOUND':
		case 'EAI_AGAIN':
			cause = `the host "${parts.host}" is not known`;
			break;
		case 'ETIMEDOUT':
		case 'EHOSTUNREACH':
		case 'ENETUNREACH':
			cause = `${where} cannot be reached (${err.code})`;
			break;
		case 'ECONNRESET':
			cause = `${where} closed the connection at once (${err.code}: not a PostgreSQL server)`;
			break;
		case '28P01':
			// A server that checks md5 or plain passwords answers an empty one so.
			cause = parts.password ? `the password for user "${parts.user}" was rejected` : noPassword;
			break;
		case '28000':
			cause = /role .* does not exist/.test(message)
				? `the user (role) "${parts.user}" does not exist on ${where}`
				: `${where} refused user "${parts.user}": ${message}`;
			break;
		case '3D000':
			cause = `the database "${parts.database}" does not exist on ${where}`;
			break;
		case '53300':
			cause = `${where} has no free connection slots (${message})`;
			break;
		default:
			if (isMissingPasswordError(error)) {
				cause = noPassword;
				break;
			}
			cause = /timeout/i.test(message)
				? `${where} did not answer in time (${message})`
				: `connecting to ${where} failed: ${message}`;
	}
	return `${source} (${maskDatabaseUrl(url)}): ${cause}. ${FIX}`;
}

/** What a caller will create on the server of a URL; `checkDatabaseUrl` checks the rights first. */
export interface DatabaseNeeds {
	/** CREATE DATABASE (n8n's own database): the role needs CREATEDB (or SUPERUSER). */
	createDatabase?: boolean;
	/** CREATE SCHEMA in the URL's database: CREATE on that database (or SUPERUSER, or owning it). */
	createSchema?: boolean;
	/** Roles of every kind, superusers among them (some tests): SUPERUSER. */
	superuser?: boolean;
	/** What the caller creates with them, for the message ("which it needs for …"). */
	purpose?: string;
}

interface RoleRights {
	role: string;
	database: string;
	superuser: boolean;
	createdb: boolean;
	create_schema: boolean;
}

function quoteIdentifier(name: string): string {
	return `"${name.replace(/"/g, '""')}"`;
}

/**
 * What `rights` lack of `needs`, as one line in the style of `describeDatabaseUrlError` (the
 * cause, where the URL came from, the grant that fixes it or the embedded PostgreSQL), or
 * undefined when nothing is missing.
 */
export function describeMissingRights(
	rights: RoleRights,
	needs: DatabaseNeeds,
	url: string,
	source = 'DATABASE_URL',
): string | undefined {
	if (rights.superuser) return undefined;
	const role = quoteIdentifier(rights.role);
	const missing: Array<{ cause: string; grant: string }> = [];
	if (needs.superuser) {
		missing.push({ cause: 'is not a superuser', grant: `ALTER ROLE ${role} SUPERUSER` });
	} else {
		if (needs.createDatabase && !rights.createdb)
			missing.push({
				cause: 'may not create databases (it has neither CREATEDB nor SUPERUSER)',
				grant: `ALTER ROLE ${role} CREATEDB`,
			});
		if (needs.createSchema && !rights.create_schema)
			missing.push({
				cause: `may not create schemas in the database "${rights.database}" (no CREATE privilege on it)`,
				grant: `GRANT CREATE ON DATABASE ${quoteIdentifier(rights.database)} TO ${role}`,
			});
	}
	if (missing.length === 0) return undefined;
	return (
		`${source} (${maskDatabaseUrl(url)}): the role "${rights.role}" connects but ` +
		`${missing.map((m) => m.cause).join(' and ')}${needs.purpose ? `, which it needs for ${needs.purpose}` : ''}. ` +
		`Grant it (as a superuser: ${missing.map((m) => m.grant).join('; ')}), or unset ${source} to use an embedded PostgreSQL.`
	);
}

/**
 * Connects once with `url` and runs `SELECT 1`, then checks that its role may do what `needs`
 * says; throws a `DatabaseUrlError` with a one-line message when either fails (see
 * `describeDatabaseUrlError`, `describeMissingRights`). For entry points and test set-up that
 * take DATABASE_URL, before they start anything.
 */
export async function checkDatabaseUrl(
	url: string,
	options: { source?: string; timeoutMs?: number; needs?: DatabaseNeeds } = {},
): Promise<void> {
	const source = options.source ?? 'DATABASE_URL';
	try {
		parseDatabaseUrl(url, source);
	} catch (error) {
		throw new DatabaseUrlError(describeDatabaseUrlError(error, url, source));
	}
	const client = new pg.Client({
		connectionString: url,
		connectionTimeoutMillis: options.timeoutMs ?? 10_000,
	});
	client.on('error', () => undefined);
	let rights: RoleRights;
	try {
		await client.connect();
		await client.query('SELECT 1');
		rights = (
			await client.query<RoleRights>(
				`SELECT current_user AS role, current_database() AS database,
				        r.rolsuper AS superuser, r.rolcreatedb AS createdb,
				        has_database_privilege(current_database(), 'CREATE') AS create_schema
				   FROM pg_roles r
				  WHERE r.rolname = current_user`,
			)
		).rows[0];
	} catch (error) {
		throw new DatabaseUrlError(describeDatabaseUrlError(error, url, source));
	} finally {
		await client.end().catch(() => undefined);
	}
	const missing = options.needs && describeMissingRights(rights, options.needs, url, source);
	if (missing) throw new DatabaseUrlError(missing);
}
