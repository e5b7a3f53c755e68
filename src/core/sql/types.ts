export interface SqlQuery {
	text: string;
	values: unknown[];
	/**
	 * Send as a named prepared statement (when the store allows it): the statement is parsed
	 * once per connection, and PostgreSQL may keep its plan. Only for statements whose best
	 * plan does not depend on the parameter values, i.e. no `$1 IS NULL OR …` filters.
	 */
	prepare?: boolean;
}

/** Columns every job-returning statement selects, so rows map the same way everywhere. */
export const JOB_COLUMNS = `id, queue, status, payload, idempotency_key, priority, run_at, attempts, max_attempts,
	attempt_id, lease_until, ordering_key, result, error_code, error_message, error_class, error_node,
	error_workflow, error_execution, callback_url, correlation_id, created_at, updated_at, started_at, finished_at`;
