import type {
	ICredentialDataDecryptedObject,
	IExecuteFunctions,
	ITriggerFunctions,
} from 'n8n-workflow';

import { openStore, type JobStore, type SslMode, type StoreConfig } from '../../src/core';

export const CREDENTIAL_TYPE = 'durableJobsPostgresApi';

/** Pure mapping from the credential's fields to the core's connection config. */
export function credentialToConfig(credential: ICredentialDataDecryptedObject): StoreConfig {
	const ssl = String(credential.ssl ?? 'disable');
	return {
		host: String(credential.host ?? 'localhost'),
		port: Number(credential.port ?? 5432),
		database: String(credential.database ?? 'postgres'),
		user: String(credential.user ?? 'postgres'),
		password: credential.password ? String(credential.password) : undefined,
		ssl: (['disable', 'require', 'verify'].includes(ssl) ? ssl : 'disable') as SslMode,
		caCertificate: credential.caCertificate ? String(credential.caCertificate) : undefined,
		maxConnections: Number(credential.maxConnections ?? 10) || 10,
		schema: String(credential.schema || 'durable_jobs'),
		autoMigrate: credential.autoMigrate !== false,
		preparedStatements: credential.preparedStatements !== false,
		durableLeases: credential.durableLeases === true,
		connectionTimeoutMs: 10_000,
	};
}

/**
 * A node's store options. The size limit is raised by the node's own option, named in the
 * too-large fix (payloadLimitSetting); a node without one gives a fix without raising.
 */
export interface NodeStoreOptions {
	maxPayloadBytes?: number;
	payloadLimitSetting?: string;
	callbackQueue?: string;
}

export async function storeFor(
	context: IExecuteFunctions | ITriggerFunctions,
	options: NodeStoreOptions = {},
): Promise<JobStore> {
	const credential = await context.getCredentials(CREDENTIAL_TYPE);
	return await openStore(
		credentialToConfig(credential),
		{ ...options, payloadLimitSetting: options.payloadLimitSetting ?? null },
		{
			onPoolError: (error) =>
				context.logger.warn(
					`Durable Jobs: an idle database connection failed and was discarded (${error.message})`,
				),
			onMigrationsPending: (message) => context.logger.warn(message),
		},
	);
}

/**
 * Opens the store on first use, so that a database that is down surfaces inside the per-item
 * error handling (error output, HTTP 503 in a receiver) instead of failing the node outright.
 */
export function lazyStore(
	context: IExecuteFunctions | ITriggerFunctions,
	options: NodeStoreOptions = {},
): () => Promise<JobStore> {
	let opened: Promise<JobStore> | undefined;
	return async () => {
		opened ??= storeFor(context, options);
		return await opened;
	};
}
