/** The rehearsal's figures as Markdown sections of docs/RELIABILITY.md. */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';

import { CRM_CHECKPOINT, REHEARSAL_BACKSTOP_SECONDS } from './constants';
import { CAUSES, LATE_CAUSES, type KillRehearsalResult, type OrphanCause } from './kill-types';
import type { OutageResult } from './outage';
import type { SlowCaseResult, SlowWorkerResult } from './slow-worker';
import { WINDOW_LABELS, WINDOWS } from './windows';

export interface RunInfo {
	command: string;
	date: Date;
	n8nVersion: string;
	postgres: string;
	totalMs: number;
	/** What the packed package was built from (commit, uncommitted changes). */
	source?: string;
}

export function machineDescription(): string {
	const list = cpus();
	return `${list.length} × ${list[0]?.model?.trim() ?? 'CPU'}, ${Math.round(totalmem() / 2 ** 30)} GB RAM, Node ${process.version} (harness), ${process.platform}`;
}

export const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
function median(values: number[]): number {
	if (values.length === 0) return 0;
	const sorted = [...values].sort((a, b) => a - b);
	return sorted[Math.floor(sorted.length / 2)];
}

export function renderKillSection(result: KillRehearsalResult, info: RunInfo): string {
	const { config } = result;
	const restart = result.kills.map((kill) => kill.restartMs);
	const windowsPerKill = result.kills.map(
		(kill) => WINDOWS.filter((w) => kill.windows[w] > 0).length,
	);
	const aimed = result.kills.filter((kill) => kill.aimed).length;
	const causes = (counts: Record<OrphanCause, number>) =>
		CAUSES.filter((cause) => counts[cause] > 0)
			.map((cause) => `${cause}: ${counts[cause]}`)
			.join(', ') || 'none';
	const { report } = result;
	const gapWindows = Object.entries(report.checkedKilledBeforeRequestByWindow)
		.map(([w, n]) => `${w}: ${n}`)
		.join(', ');
	const lines = [
		`### ${config.honourKeys ? 'CRM honours Idempotency-Key' : 'CRM ignores Idempotency-Key'} — ${result.kills.length} kills`,
		'',
		`- Command: \`${info.command}\``,
		`- Date: ${info.date.toISOString()}; rehearsal ${seconds(result.durationMs)} (drain after the last kill ${seconds(result.drainMs)}), whole command so far ${seconds(info.totalMs)}`,
		`- Environment: ${machineDescription()}; n8n ${info.n8nVersion} (regular mode, one main process) with the package packed from ${info.source ?? 'this checkout'}; ${info.postgres}; machine shared with other test runs`,
		`- Settings: lease ${config.leaseSeconds} s for the Dispatcher's Job Trigger and the Worker's checkpoint (bundled: 180 s), backstop ${REHEARSAL_BACKSTOP_SECONDS} s (bundled: 30 s); ${config.inFlight} jobs kept in flight; AI answers after ${config.aiLatencyMs} ms, CRM after ${config.crmDelayMs} ms; n8n up ${seconds(config.minUpMs)}–${seconds(config.maxUpMs)} before each kill is aimed; seed ${config.seed}`,
		`- Restart after SIGKILL until every workflow is published and the webhooks answer: median ${seconds(median(restart))}, max ${seconds(Math.max(0, ...restart))}`,
		'',
		'| window | meaning | (kill, job) pairs | distinct jobs | kills that caught it | killed attempts n8n ran again at boot (kept the lease / superseded / of those stopped at the checkpoint) | killed attempts with a CRM request |',
		'|---|---|---:|---:|---:|---:|---:|',
		...WINDOWS.map((w) => {
			const f = result.windows[w];
			return `| ${w} | ${WINDOW_LABELS[w]} | ${f.pairs} | ${f.jobs} | ${f.kills} of ${result.kills.length} | ${w === 'T0' ? '—' : `${f.rerunHeld} / ${f.rerunSuperseded} / ${f.rerunStoppedAtCheckpoint}`} | ${w === 'T0' ? '—' : f.withCrmRequest} |`;
		}),
		'',
		`Kills were aimed in turn at ${config.targets.join(', ')} (at a random moment inside the window once it was seen; ${aimed} of ${result.kills.length} saw their target) and caught whatever else was in flight: on average ${(windowsPerKill.reduce((a, b) => a + b, 0) / Math.max(1, windowsPerKill.length)).toFixed(1)} windows per kill, ${windowsPerKill.filter((n) => n >= 3).length} kills caught three or more. ` +
			`T1 attempts by the state of their execution at the kill: ${result.t1Workers.new ?? 0} queued in n8n (\`new\`: n8n runs these again at boot), ${result.t1Workers.running ?? 0} started, ${result.t1Workers.none ?? 0} not created yet (n8n died between the Job Trigger's lease and the execution's start).`,
		'',
		'| outcome | figure |',
		'|---|---:|',
		`| jobs submitted through the receiver / answered 202 / stored | ${result.jobs.submitted} / ${result.jobs.accepted} / ${result.jobs.inDb} |`,
		`| receiver requests cut off by a kill or refused while n8n restarted (retried with the same key) | ${result.submissions.unansweredTries} |`,
		`| … requests whose job had committed before the kill: the retry got the same job (\`deduplicated: true\`) | ${result.submissions.lostAnswersRecovered} |`,
		`| receiver requests answered by n8n itself while booting: HTTP 200 "n8n is starting up. Please wait" (no job; retried) | ${result.submissions.startingUp} |`,
		`| jobs done / failed | ${result.jobs.done} / ${result.jobs.failed}${
			result.jobs.failed > 0
				? ` (${Object.entries(result.jobs.failedByCode)
						.map(([code, n]) => `${code}: ${n}`)
						.join(', ')})`
				: ''
		} |`,
		`| **lost jobs** (202 without a stored job, or never answered) | **${result.lost}** |`,
		`| **stuck jobs** (not done or failed when the run got quiet) | **${result.stuck}** |`,
		`| jobs killed in flight more than once | ${result.jobs.killedMoreThanOnce} (most attempts used by one job: ${result.jobs.maxAttempts}) |`,
		`| attempts: total / killed in flight / run again by n8n at boot / outlived their lease while alive | ${result.attempts.total} / ${result.attempts.killed} / ${result.attempts.rerunAtBoot} / ${result.attempts.slow} |`,
		`| **results applied from an attempt that did not hold the lease** | **${result.attempts.staleApplied}** |`,
		`| CRM requests / records created / answered as replay | ${result.crm.requests} / ${result.crm.created} / ${result.crm.replayed} |`,
		`| attempts that reached the CRM but whose result the job does not hold, by cause | ${causes(result.crm.orphans)} |`,
		config.honourKeys
			? `| **job ids with more than one CRM record** | **${result.crm.jobsWithMoreThanOneRecord}** (the CRM answered ${result.crm.replayed} repeats as replays — ${causes(result.crm.replaysByCause)}) |`
			: `| job ids with more than one CRM record (extra records) | ${result.crm.jobsWithMoreThanOneRecord} (${result.crm.extraRecords}) — extra records by cause: ${causes(result.crm.duplicatesByCause)} |`,
		...LATE_CAUSES.map(
			(cause) =>
				`| ${cause === 'slow' ? 'attempts that outlived their lease while alive' : 'attempts n8n ran again at boot after their job was leased anew'}: stopped at the checkpoint (Lease Lost in the Worker execution, no CRM request) / reached the CRM (passed the checkpoint in time) / neither (no finished execution reached the checkpoint) | ${result.lateAttempts.stoppedAtCheckpoint[cause]} / ${result.lateAttempts.withCrmRequest[cause]} / ${result.lateAttempts.noCrmRequestNotAtCheckpoint[cause]} |`,
		),
		`| unknown-outcomes report: attempts / jobs listed | ${report.rows} / ${report.jobs} (${report.exact ? `exactly the ${report.leaseExpiredAttempts} attempts that ended \`lease_expired\`` : 'MISMATCH'}) |`,
		`| … with checkpoint \`${CRM_CHECKPOINT}\`: "check the CRM" (\`check_external_system\`) — attempts / jobs to check | ${report.withCheckpoint} / ${report.jobsToCheck} (${report.checkpointRowsExact ? 'exactly the `lease_expired` attempts that recorded it' : 'MISMATCH with the recorded checkpoints'}) |`,
		`| … without checkpoint: no CRM call made (\`no_external_call\`) — attempts / jobs | ${report.withoutCheckpoint} / ${report.jobsWithoutCheckpoint} |`,
		`| attempts to check: the CRM got their request / checkpoint recorded, killed before the CRM request arrived | ${report.checkedWithCrmRequest} / ${report.checkedKilledBeforeRequest}${gapWindows ? ` (window at the kill: ${gapWindows})` : ''} |`,
		`| "check the CRM" list = the attempts that reached the CRM without their result being kept | ${report.checkListMatchesCrmRequests ? `yes: the ${report.leaseExpiredWithCrmRequest} \`lease_expired\` attempts the CRM journal holds a request from${report.checkedKilledBeforeRequest > 0 ? `, plus ${report.checkedKilledBeforeRequest} killed between checkpoint and request` : ''}; no row without checkpoint reached the CRM` : '**NO**'} |`,
		`| every attempt with a CRM request but no kept result is listed with checkpoint \`${CRM_CHECKPOINT}\` | ${report.coversEveryOrphan ? 'yes' : '**NO**'} |`,
		`| CRM records their job does not hold / created by an attempt under \`check_external_system\` | ${report.unheldRecords} / ${report.unheldRecordsListed} |`,
		`| longest a dead attempt's job stayed \`running\` past its lease, seen at a kill (n8n was down meanwhile) | ${seconds(result.maxExpiredLeaseAgeMs)} |`,
		`| **violations of the checks** | **${result.violations.length}** |`,
		'',
	];
	if (result.violations.length > 0)
		lines.push('Violations:', '', ...result.violations.slice(0, 40).map((v) => `- ${v}`), '');
	return lines.join('\n');
}

export function renderOutageSection(result: OutageResult, info: RunInfo): string {
	const restart = result.kind !== 'cut';
	const shutdown =
		result.kind === 'crash'
			? 'crashed (immediate shutdown: no checkpoint, WAL not yet flushed lost, crash recovery at the start'
			: 'shut down (fast shutdown: open sessions terminated';
	const outage = restart
		? `the job database's own PostgreSQL was ${shutdown}; ${seconds(result.shutdownMs ?? 0)}), kept down ${seconds(result.cutMs)} and started again on the same data and port (${seconds(result.startupMs ?? 0)} until it accepted connections); the job credential goes through a TCP proxy that stayed up, so n8n's new connections were accepted and dropped at once instead of refused; n8n's own database is on another server and stayed up.`
		: `the TCP proxy in front of the job database dropped every connection and refused new ones for ${seconds(result.cutMs)} (the job database shares its server with n8n's own database, which stayed up).`;
	return [
		restart
			? `### Job database ${result.kind === 'crash' ? 'crashed' : 'restarted'} mid-run (${seconds(result.downMs)} down)`
			: `### Job database unreachable for ${seconds(result.cutMs)} mid-run (TCP proxy cut)`,
		'',
		`- Command: \`${info.command}\`; date ${info.date.toISOString()}`,
		`- ${result.jobs} jobs in flight (AI 1.5 s, CRM 1.5 s, CRM honours keys); ${outage}`,
		`- Receiver while down: ${result.receiverAnswers.length} requests, answers ${[...new Set(result.receiverAnswers.map((answer) => answer.status))].join(', ')}; detail: "${result.receiverAnswers[0]?.detail ?? '—'}"`,
		`- n8n executions that failed while down: ${
			Object.entries(result.failedExecutions)
				.map(([id, n]) => `${id} × ${n}`)
				.join(', ') || 'none'
		}`,
		`- Node errors recorded by n8n: ${result.errorMessages.join('; ') || 'none'}`,
		`- n8n not restarted (pid ${result.pidBefore} before and ${result.pidAfter} after); the receiver took jobs again ${result.recoveryMs >= 0 ? seconds(result.recoveryMs) : '—'} after ${restart ? 'PostgreSQL accepted connections again' : 'the proxy was restored'}.`,
		`- End state: ${result.done} done, ${result.failed} failed, ${result.jobs - result.done - result.failed} other; ${result.reLeasedJobs} jobs were re-leased after a worker's Job Complete failed during the outage; CRM records per done job: ${[...new Set(result.crmRecordsPerDoneJob)].join(', ') || '—'}.`,
		`- Violations: ${result.violations.length}${result.violations.length ? ` — ${result.violations.join('; ')}` : ''}`,
		'',
	].join('\n');
}

function renderSlowCase(result: SlowCaseResult): string[] {
	const attempts = result.attempts
		.map(
			(attempt) =>
				`${attempt.attempt} → ${attempt.outcome} (checkpoint ${attempt.checkpoint ? `\`${attempt.checkpoint}\`` : 'none'})`,
		)
		.join(', ');
	const requests =
		result.crmRequests
			.map(
				(request) =>
					`attempt ${request.attempt ?? '?'} → ${request.createdRecordId ?? 'no record'}${request.answerDelayMs > 0 ? ` (answered after ${seconds(request.answerDelayMs)})` : ''}`,
			)
			.join(', ') || 'none';
	const staleAttempt = result.attempts[0]?.attempt ?? 1;
	const staleRequests = result.crmRequests.filter(
		(request) => request.attempt === staleAttempt,
	).length;
	const shown = ['job_id', 'attempt_id', 'outcome', 'lease_lost', 'reason', 'current_status'];
	const leaseLost = result.leaseLostOutput
		? Object.fromEntries(
				shown
					.filter((key) => key in (result.leaseLostOutput ?? {}))
					.map((key) => [key, result.leaseLostOutput?.[key]]),
			)
		: null;
	const row = result.reportRow;
	return [
		`  - Attempts: ${attempts}; CRM requests: ${requests}${staleRequests === 0 ? ` (none from attempt ${staleAttempt})` : ''}; the job's result names ${result.resultRecordId} (fields name "${result.resultName}").`,
		`  - The slow attempt came out of *${result.stoppedAt}* on **Lease Lost**: \`${JSON.stringify(leaseLost)}\`; job row and attempts unchanged afterwards: ${result.jobUnchangedAfterStaleAttempt ? 'yes' : 'NO'}.`,
		`  - Unknown-outcomes report: ${row ? `attempt ${staleAttempt} listed with checkpoint ${row.checkpoint ? `\`${row.checkpoint}\`` : 'none'}, external_call "${row.external_call}"` : 'attempt not listed'}; job under \`check_external_system\`: ${result.inCheckExternalSystem ? 'yes' : 'no'}.`,
	];
}

export function renderSlowWorkerSection(result: SlowWorkerResult, info: RunInfo): string {
	return [
		`### A worker slower than its lease`,
		'',
		`- Command: \`${info.command}\`; date ${info.date.toISOString()}`,
		`- Lease ${result.leaseSeconds} s (the Dispatcher's, and the Worker's checkpoint right before the CRM call extends it by as much); the CRM ignores keys, so each CRM request creates its own record. The first attempt's AI fields name "stale attempt".`,
		`- **Late CRM answer, past the checkpoint**: the CRM stores the first attempt's record at once and answers after ${seconds(result.lateCrm.lateAnswerMs)}; the job is leased again meanwhile.`,
		...renderSlowCase(result.lateCrm),
		`- **Late AI answer, before the checkpoint**: the AI answers the first attempt after ${seconds(result.lateAi.lateAnswerMs)}; the job is leased again meanwhile.`,
		...renderSlowCase(result.lateAi),
		`- Violations: ${result.violations.length}${result.violations.length ? ` — ${result.violations.join('; ')}` : ''}`,
		'',
	].join('\n');
}

/** Replaces (or appends) the block between `<!-- rehearsal:<id>:begin -->` and `:end -->`. */
export function updateReliabilityDoc(path: string, id: string, markdown: string): void {
	const begin = `<!-- rehearsal:${id}:begin -->`;
	const end = `<!-- rehearsal:${id}:end -->`;
	const block = `${begin}\n${markdown.trimEnd()}\n${end}`;
	const text = existsSync(path) ? readFileSync(path, 'utf8') : '# Reliability\n';
	const from = text.indexOf(begin);
	const to = text.indexOf(end);
	let next: string;
	if (from >= 0 && to > from) next = text.slice(0, from) + block + text.slice(to + end.length);
	else {
		const anchor = '<!-- rehearsal:results:end -->';
		const at = text.indexOf(anchor);
		next =
			at >= 0
				? `${text.slice(0, at)}${block}\n\n${text.slice(at)}`
				: `${text.trimEnd()}\n\n${block}\n`;
	}
	writeFileSync(path, next);
}
