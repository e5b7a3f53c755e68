/**
 * The state an n8n instance keeps outside its folder: its own database on the server of the
 * caller's URL, and in queue mode its Bull and cache keys in Redis.
 */
import { randomBytes } from 'node:crypto';
import { createConnection } from 'node:net';

import pg from 'pg';

import { parseDatabaseUrl, withDatabase } from '../database-url';

export interface InstanceDatabase {
	name: string;
	/** URL of the instance database (same server and user as the admin URL). */
	url: string;
	/** n8n's DB_POSTGRESDB_* variables for it. */
	env: Record<string, string>;
}

/** A new, unique database name and n8n's settings for it (created by `createDatabase`). */
export function instanceDatabase(adminUrl: string): InstanceDatabase {
	const name = `n8n_e2e_${randomBytes(5).toString('hex')}`;
	const parts = parseDatabaseUrl(adminUrl);
	return {
		name,
		url: withDatabase(adminUrl, name),
		env: {
			DB_TYPE: 'postgresdb',
			DB_POSTGRESDB_HOST: parts.host,
			DB_POSTGRESDB_PORT: String(parts.port),
			DB_POSTGRESDB_DATABASE: name,
			DB_POSTGRESDB_USER: parts.user,
			DB_POSTGRESDB_PASSWORD: parts.password,
			...(parts.ssl
				? { DB_POSTGRESDB_SSL_ENABLED: 'true', DB_POSTGRESDB_SSL_REJECT_UNAUTHORIZED: 'false' }
				: {}),
		},
	};
}

export async function adminQuery(databaseUrl: string, sql: string): Promise<void> {
	const client = new pg.Client({ connectionString: databaseUrl });
	client.on('error', () => undefined);
	await client.connect();
	try {
		await client.query(sql);
	} finally {
		await client.end();
	}
}

export async function createDatabase(adminUrl: string, name: string): Promise<void> {
	await adminQuery(adminUrl, `CREATE DATABASE "${name}"`);
}

export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
	await adminQuery(adminUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}

/** Deletes this instance's Bull keys (best effort; a tiny RESP client instead of a dependency). */
export async function redisDeleteByPrefix(
	host: string,
	port: number,
	prefix: string,
): Promise<void> {
	const script =
		"local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) n = n + 1 end return n";
	const args = ['EVAL', script, '0', `${prefix}:*`];
	const payload =
		`*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('');
	await new Promise<void>((resolveDone) => {
		const socket = createConnection({ host, port }, () => socket.write(payload));
		const done = () => {
			socket.destroy();
			resolveDone();
		};
		socket.setTimeout(5_000, done);
		socket.once('data', done);
		socket.once('error', done);
	});
}
