/**
 * Test data in n8n's shapes, without n8n-core: a credential, a Webhook node's output item, and
 * the input items an output item names. test/helpers/n8n-context.ts re-exports them.
 */
import type {
	ICredentialDataDecryptedObject,
	IDataObject,
	INodeExecutionData,
	IPairedItemData,
} from 'n8n-workflow';

import { serverOf } from './db';

/** Credential data of the Durable Jobs Postgres credential, from a postgres:// URL and a schema. */
export function credentialFor(
	url: string,
	schema: string,
	overrides: ICredentialDataDecryptedObject = {},
): ICredentialDataDecryptedObject {
	return {
		...serverOf(url),
		ssl: 'disable',
		schema,
		maxConnections: 20,
		autoMigrate: true,
		...overrides,
	};
}

/** A Webhook node's output item for a JSON POST, as n8n 2.x produces it. */
export function webhookItem(
	body: IDataObject,
	headers: Record<string, string> = {},
	extra: { query?: IDataObject; webhookUrl?: string } = {},
): IDataObject {
	return {
		headers: {
			host: 'localhost:5678',
			'user-agent': 'curl/8.5.0',
			'content-type': 'application/json',
			accept: '*/*',
			...headers,
		},
		params: {},
		query: extra.query ?? {},
		body,
		webhookUrl: extra.webhookUrl ?? 'http://localhost:5678/webhook/jobs',
		executionMode: 'production',
	};
}

export function pairedIndexes(item: INodeExecutionData): number[] {
	const paired = item.pairedItem;
	if (paired === undefined || paired === null) return [];
	if (typeof paired === 'number') return [paired];
	return (Array.isArray(paired) ? paired : [paired]).map((entry: IPairedItemData) => entry.item);
}
