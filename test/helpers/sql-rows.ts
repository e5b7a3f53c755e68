import type { CompleteRow } from '../../src/core/sql/complete';

/** A completion item for completeQuery, with nothing but its outcome. */
export function completeRow(
	ord: number,
	job: { id: string; attempt_id: string },
	outcome: CompleteRow['outcome'],
): CompleteRow {
	return {
		ord,
		job_id: job.id,
		attempt_id: job.attempt_id,
		outcome,
		result: null,
		error_code: null,
		error_message: null,
		error_class: null,
		error_node: null,
		error_workflow: null,
		error_execution: null,
		delay_ms: null,
		backoff_base_ms: null,
		backoff_max_ms: null,
		jitter: null,
	};
}
