/**
 * The reconciliation report through the bundled workflow (GET /webhook/jobs/unknown-outcomes),
 * and its own arithmetic.
 */
import { OPERATOR_KEY, type Environment } from '../environment';
import { EXTERNAL_CALL_MAY_HAVE_HAPPENED, EXTERNAL_CALL_NOT_MADE, QUEUE } from './constants';

export interface ReportRow {
	job_id: string;
	stable_key: string;
	attempt_id: string;
	outcome: string;
	checkpoint: string | null;
	checkpoint_at: string | null;
	/** "may have happened" with a checkpoint, "not made" without. */
	external_call: string;
}

export interface ReconciliationReport {
	count: number;
	jobs: number;
	unknown_outcomes: ReportRow[];
	/** Rows with a checkpoint: look these keys up in the CRM. */
	check_external_system: { count: number; jobs: number; stable_keys: string[] };
	/** Rows without one: the CRM call was never made. */
	no_external_call: { count: number; jobs: number };
}

/**
 * The reconciliation report, through the bundled workflow (GET /webhook/jobs/unknown-outcomes),
 * with the operator key its Webhook requires.
 */
export async function fetchReconciliationReport(env: Environment): Promise<ReconciliationReport> {
	const answer = await env.request(`jobs/unknown-outcomes?queue=${QUEUE}&limit=10000`, {
		headers: { [OPERATOR_KEY.header]: OPERATOR_KEY.value },
	});
	if (answer.status !== 200)
		throw new Error(`unknown-outcomes answered ${answer.status}: ${answer.text.slice(0, 300)}`);
	const report = answer.body as Partial<ReconciliationReport>;
	if (
		!Array.isArray(report.unknown_outcomes) ||
		!report.check_external_system ||
		!report.no_external_call
	) {
		throw new Error(
			`unknown-outcomes answered without unknown_outcomes / check_external_system / no_external_call: ${answer.text.slice(0, 300)}`,
		);
	}
	return report as ReconciliationReport;
}

export async function fetchUnknownOutcomes(env: Environment): Promise<ReportRow[]> {
	return (await fetchReconciliationReport(env)).unknown_outcomes;
}

/** The report's own arithmetic: totals and the two lists agree with its rows. */
export function reportConsistency(report: ReconciliationReport): string[] {
	const problems: string[] = [];
	const rows = report.unknown_outcomes;
	const distinctKeys = (list: ReportRow[]) => new Set(list.map((row) => row.stable_key));
	const checked = rows.filter((row) => row.checkpoint !== null);
	const unchecked = rows.filter((row) => row.checkpoint === null);
	if (report.count !== rows.length)
		problems.push(`report count ${report.count} for ${rows.length} rows`);
	if (report.jobs !== distinctKeys(rows).size)
		problems.push(`report jobs ${report.jobs} for ${distinctKeys(rows).size} distinct stable keys`);
	if (report.check_external_system.count !== checked.length)
		problems.push(
			`check_external_system.count ${report.check_external_system.count} for ${checked.length} rows with a checkpoint`,
		);
	if (report.check_external_system.jobs !== distinctKeys(checked).size)
		problems.push(
			`check_external_system.jobs ${report.check_external_system.jobs} for ${distinctKeys(checked).size} jobs with a checkpoint row`,
		);
	const listed = new Set(report.check_external_system.stable_keys);
	const expected = distinctKeys(checked);
	if (listed.size !== report.check_external_system.stable_keys.length)
		problems.push('check_external_system.stable_keys repeats a key');
	if (listed.size !== expected.size || [...expected].some((key) => !listed.has(key)))
		problems.push(
			'check_external_system.stable_keys are not the stable keys of the rows with a checkpoint',
		);
	if (report.no_external_call.count !== unchecked.length)
		problems.push(
			`no_external_call.count ${report.no_external_call.count} for ${unchecked.length} rows without a checkpoint`,
		);
	if (report.no_external_call.jobs !== distinctKeys(unchecked).size)
		problems.push(
			`no_external_call.jobs ${report.no_external_call.jobs} for ${distinctKeys(unchecked).size} jobs with a row without checkpoint`,
		);
	for (const row of rows) {
		const expectedCall =
			row.checkpoint !== null ? EXTERNAL_CALL_MAY_HAVE_HAPPENED : EXTERNAL_CALL_NOT_MADE;
		if (row.external_call !== expectedCall)
			problems.push(
				`report row of attempt ${row.attempt_id} (checkpoint ${row.checkpoint}) says external_call "${row.external_call}"`,
			);
		if ((row.checkpoint === null) !== (row.checkpoint_at === null))
			problems.push(
				`report row of attempt ${row.attempt_id}: checkpoint ${row.checkpoint} with checkpoint_at ${row.checkpoint_at}`,
			);
	}
	return problems;
}
