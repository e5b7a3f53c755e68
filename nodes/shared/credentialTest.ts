import pg from 'pg';
import type {
	ICredentialsDecrypted,
	ICredentialTestFunctions,
	INodeCredentialTestResult,
} from 'n8n-workflow';

import {
	appliedMigrationIds,
	classifyDatabaseError,
	DurableJobsError,
	loadMigrations,
	toPoolConfig,
	validateSchemaName,
} from '../../src/core';
import { credentialToConfig } from './connection';

/**
 * Opens one connection with the credential and reports what a user can act on: wrong
 * password, unreachable host, missing database, invalid schema name, missing migrations.
 */
export async function testDurableJobsConnection(
	this: ICredentialTestFunctions,
	credential: ICredentialsDecrypted,
): Promise<INodeCredentialTestResult> {
	const config = credentialToConfig(credential.data ?? {});
	try {
		validateSchemaName(config.schema ?? 'durable_jobs');
	} catch (error) {
		return {
			status: 'Error',
			message:
				`${(error as DurableJobsError).message}. ${(error as DurableJobsError).fix ?? ''}`.trim(),
		};
	}
	const client = new pg.Client({ ...toPoolConfig(config), connectionTimeoutMillis: 8_000 });
	client.on('error', () => undefined);
	try {
		await client.connect();
		const applied = new Set((await appliedMigrationIds(client, config.schema!)) ?? []);
		const missing = loadMigrations().filter((migration) => !applied.has(migration.id));
		if (missing.length === 0)
			return { status: 'OK', message: `Connected; schema "${config.schema}" is up to date` };
		if (config.autoMigrate === false) {
			return {
				status: 'Error',
				message: `Connected, but schema "${config.schema}" is missing migrations (${missing.map((m) => m.name).join(', ')}) and Auto-Migrate is off. Apply them with "npx n8n-nodes-durable-jobs migrate" or turn Auto-Migrate on.`,
			};
		}
		return {
			status: 'OK',
			message: `Connected; schema "${config.schema}" will be created or upgraded on first use`,
		};
	} catch (error) {
		const classified = classifyDatabaseError(error);
		return { status: 'Error', message: `${classified.message}. ${classified.fix ?? ''}`.trim() };
	} finally {
		await client.end().catch(() => undefined);
	}
}
