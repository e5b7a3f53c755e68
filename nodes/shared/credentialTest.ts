import type {
	ICredentialsDecrypted,
	ICredentialTestFunctions,
	INodeCredentialTestResult,
} from 'n8n-workflow';

import { testConnection } from '../../src/core';
import { credentialToConfig } from './connection';

/**
 * The credential's "Test" button: one connection with the credential, and a message a user can
 * act on (wrong password, unreachable host, missing database, invalid schema name, missing
 * migrations).
 */
export async function testDurableJobsConnection(
	this: ICredentialTestFunctions,
	credential: ICredentialsDecrypted,
): Promise<INodeCredentialTestResult> {
	const result = await testConnection(credentialToConfig(credential.data ?? {}));
	return { status: result.ok ? 'OK' : 'Error', message: result.message };
}
