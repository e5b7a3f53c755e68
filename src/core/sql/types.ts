export interface SqlQuery {
	text: string;
	values: unknown[];
	/**
	 * Send as a named prepared statement (when the store allows it): the statement is parsed
	 * once per connection, and PostgreSQL may keep its plan. Only for statements whose best
	 * plan does not depend on the parameter values, i.e. no `$1 IS NULL OR …` filters.
	 */
	prepare?: boolean;
	/**
	 * Send with the extended protocol even without parameters: the server then runs exactly one
	 * statement (text with several fails), as it does for every statement with parameters. For
	 * SQL the user wrote, which must not end the transaction it runs in.
	 */
	oneStatement?: boolean;
}

/**
 * Columns of jobs whose type is a domain (migration 0015), with the domain's base type. A
 * prepared statement returns them cast to that type (`resultColumns`): one whose result
 * types change fails with "cached plan must not change result type" until its connection
 * closes, and domains made again (a schema dropped and migrated under the same name, or this
 * migration) are new types.
 */
export const DOMAIN_COLUMN_TYPES: Readonly<Record<string, string>> = {
	attempts: 'integer',
	max_attempts: 'integer',
	error_class: 'text',
	attempt_checkpoint: 'text',
};

/** `columns` of the row alias `alias` (none: unqualified) for a result list, domains cast. */
export function resultColumns(columns: readonly string[], alias?: string): string {
	return columns
		.map((column) => {
			const source = alias ? `${alias}.${column}` : column;
			const base = DOMAIN_COLUMN_TYPES[column];
			return base ? `${source}::${base} AS ${column}` : source;
		})
		.join(', ');
}

/** Columns every job-returning statement selects, so rows map the same way everywhere. */
export const JOB_COLUMN_NAMES = [
	'id',
	'queue',
	'status',
	'payload',
	'idempotency_key',
	'priority',
	'run_at',
	'attempts',
	'max_attempts',
	'attempt_id',
	'lease_until',
	'ordering_key',
	'result',
	'error_code',
	'error_message',
	'error_class',
	'error_node',
	'error_workflow',
	'error_execution',
	'callback_url',
	'correlation_id',
	'created_at',
	'updated_at',
	'started_at',
	'finished_at',
] as const;

/** JOB_COLUMN_NAMES as a result list of an unaliased jobs. */
export const JOB_COLUMNS = resultColumns(JOB_COLUMN_NAMES);
