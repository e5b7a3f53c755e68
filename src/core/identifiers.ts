import { ValidationError } from './errors';

const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,49}$/;
const QUEUE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$/;

export const DEFAULT_SCHEMA = 'durable_jobs';

/** Schema names end up in SQL text, so only plain lower-case identifiers are accepted. */
export function validateSchemaName(schema: string): string {
	if (typeof schema !== 'string' || !SCHEMA_PATTERN.test(schema)) {
		throw new ValidationError(
			'schema',
			`"${String(schema).slice(0, 80)}" is not a valid schema name`,
			'Use 1-50 characters: lower-case letters, digits and underscores, not starting with a digit (e.g. durable_jobs)',
		);
	}
	if (schema.startsWith('pg_') || schema === 'information_schema' || schema === 'public') {
		throw new ValidationError(
			'schema',
			`"${schema}" is reserved or shared`,
			'Choose a dedicated schema name such as durable_jobs',
		);
	}
	return schema;
}

export function quoteIdentifier(name: string): string {
	return `"${name.replace(/"/g, '""')}"`;
}

export function validateQueueName(queue: unknown, field = 'queue'): string {
	if (typeof queue !== 'string' || !QUEUE_PATTERN.test(queue)) {
		throw new ValidationError(
			field,
			`"${String(queue).slice(0, 80)}" is not a valid queue name`,
			'Use 1-100 characters: letters, digits and _ . : - (starting with a letter or digit), e.g. documents',
		);
	}
	return queue;
}

/** The LISTEN/NOTIFY channel for a schema: one channel, the payload is the queue name. */
export function notifyChannel(schema: string): string {
	return `durable_jobs_${schema}`;
}
