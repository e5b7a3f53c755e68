/**
 * The fault rehearsal's invariants (scripts/lib/rehearsal/invariants/*.ts) and its window
 * model, on small hand-made final states: each check passes on a state where its guarantee
 * holds and names the violation on one where it does not.
 */

import {
	attributeCrmRequests,
	checkCheckpointsBeforeCrm,
	checkKilledAttempts,
	orphanCause,
} from '../../scripts/lib/rehearsal/invariants/attempts';
import {
	checkCrmSideEffects,
	checkUnheldRecordsListed,
} from '../../scripts/lib/rehearsal/invariants/crm';
import {
	checkAttemptHistory,
	checkEveryJobTerminal,
	checkNoJobLost,
} from '../../scripts/lib/rehearsal/invariants/jobs';
import { checkLateAttempts, lateAttemptsOf } from '../../scripts/lib/rehearsal/invariants/late';
import {
	checkCheckList,
	checkOrphansListed,
	checkReportListsUnknownOutcomes,
} from '../../scripts/lib/rehearsal/invariants/report';
import { finalView, type FinalView } from '../../scripts/lib/rehearsal/invariants/view';
import type { KilledAttempt, KillRecord } from '../../scripts/lib/rehearsal/kill-types';
import type {
	AttemptRow,
	CallView,
	CrmView,
	JobRow,
} from '../../scripts/lib/rehearsal/observations';
import {
	reportConsistency,
	type ReconciliationReport,
	type ReportRow,
} from '../../scripts/lib/rehearsal/reconciliation';
import type { Submission } from '../../scripts/lib/rehearsal/submitter';
import { classify, emptyWindows, seededRandom } from '../../scripts/lib/rehearsal/windows';

const at = (second: number) => Date.UTC(2026, 0, 1, 0, 0, second);

function job(id: string, status: string, attempts: number, recordId?: string): JobRow {
	return {
		id,
		status,
		attempts,
		max_attempts: 5,
		attempt_id: `${id}-a${attempts}`,
		lease_until: null,
		result: recordId ? { crm_record_id: recordId } : null,
		error_code: status === 'failed' ? 'max_attempts' : null,
		doc_id: `doc-${id}`,
	};
}

function attempt(
	jobId: string,
	n: number,
	outcome: string | null,
	checkpointSecond: number | null = null,
): AttemptRow {
	return {
		attempt_id: `${jobId}-a${n}`,
		job_id: jobId,
		attempt: n,
		started_at: new Date(at(n)),
		lease_until: null,
		finished_at: null,
		outcome,
		error_code: null,
		checkpoint: checkpointSecond === null ? null : 'crm_request',
		checkpoint_at: checkpointSecond === null ? null : new Date(at(checkpointSecond)),
	};
}

function crmRequest(
	attemptId: string | null,
	second: number,
	created: string | null,
	replayedOf?: string,
): CrmView {
	return {
		at: at(second),
		attemptId,
		key: null,
		status: created ? 201 : 200,
		createdRecordId: created,
		recordId: created ?? replayedOf ?? null,
		replayed: replayedOf !== undefined,
		responded: true,
		answerDelayMs: 0,
	};
}

function state(input: {
	jobs: JobRow[];
	attempts: AttemptRow[];
	ai?: Array<[string, number]>;
	crm?: Array<[string, CrmView]>;
}): FinalView {
	const ai = new Map<string, CallView[]>();
	for (const [attemptId, second] of input.ai ?? [])
		ai.set(attemptId, [...(ai.get(attemptId) ?? []), { at: at(second), attemptId }]);
	const crm = new Map<string, CrmView[]>();
	for (const [key, entry] of input.crm ?? [])
		crm.set(key, [...(crm.get(key) ?? []), { ...entry, key }]);
	return finalView({ jobs: input.jobs, attempts: input.attempts, ai, crm });
}

function submission(key: string, jobId: string | null): Submission {
	return {
		key,
		docId: key,
		body: { document: { id: key, text: '' } },
		jobId,
		tries: 1,
		unanswered: 0,
		answered503: 0,
		startingUp: 0,
		recoveredLostAnswer: false,
		otherAnswers: [],
	};
}

function killedAt(
	window: KilledAttempt['window'],
	jobId: string,
	second: number,
	worker = 'started',
): KilledAttempt {
	return { kill: 1, window, jobId, snapshotAt: at(second), worker };
}

function row(attemptId: string, jobId: string, checkpoint: boolean): ReportRow {
	return {
		job_id: jobId,
		stable_key: jobId,
		attempt_id: attemptId,
		outcome: 'lease_expired',
		checkpoint: checkpoint ? 'crm_request' : null,
		checkpoint_at: checkpoint ? new Date(at(1)).toISOString() : null,
		external_call: checkpoint ? 'may have happened' : 'not made',
	};
}

function report(rows: ReportRow[]): ReconciliationReport {
	const keys = (list: ReportRow[]) => [...new Set(list.map((r) => r.stable_key))];
	const checked = rows.filter((r) => r.checkpoint !== null);
	const unchecked = rows.filter((r) => r.checkpoint === null);
	return {
		count: rows.length,
		jobs: keys(rows).length,
		unknown_outcomes: rows,
		check_external_system: {
			count: checked.length,
			jobs: keys(checked).length,
			stable_keys: keys(checked),
		},
		no_external_call: { count: unchecked.length, jobs: keys(unchecked).length },
	};
}

describe('checkNoJobLost', () => {
	it('holds when every key got a 202 naming a stored job and every job has a client', () => {
		const view = state({ jobs: [job('j1', 'done', 1)], attempts: [] });
		expect(checkNoJobLost([submission('k1', 'j1')], view)).toMatchObject({
			lost: 0,
			violations: [],
		});
	});

	it('counts a key without 202, a 202 without a job, and names a job nobody got', () => {
		const view = state({ jobs: [job('j1', 'done', 1), job('j9', 'done', 1)], attempts: [] });
		const checked = checkNoJobLost(
			[submission('k1', 'j1'), submission('k2', null), submission('k3', 'gone')],
			view,
		);
		expect(checked.lost).toBe(2);
		expect(checked.violations).toEqual([
			'submission k2 never got a 202',
			'job gone (202 for k3) is not in the database',
			'job j9 (doc-j9) exists but no client got its id',
		]);
	});
});

describe('checkEveryJobTerminal', () => {
	it('counts done and failed jobs by error code, and a running one as stuck', () => {
		const view = state({
			jobs: [job('a', 'done', 1), job('b', 'failed', 5), job('c', 'running', 1)],
			attempts: [],
		});
		expect(checkEveryJobTerminal(view)).toEqual({
			stuck: 1,
			done: 1,
			failed: 1,
			other: 1,
			failedByCode: { max_attempts: 1 },
			violations: ['job c ended running, not done or failed'],
		});
	});
});

describe('checkAttemptHistory', () => {
	it('holds for an attempt superseded by one that succeeded; an unkilled lease_expired attempt is slow', () => {
		const view = state({
			jobs: [job('j', 'done', 2)],
			attempts: [attempt('j', 1, 'lease_expired'), attempt('j', 2, 'succeeded')],
		});
		const checked = checkAttemptHistory(view, new Map());
		expect(checked.violations).toEqual([]);
		expect(checked.leaseExpired).toBe(1);
		expect([...checked.slow]).toEqual(['j-a1']);
		expect(checkAttemptHistory(view, new Map([['j-a1', killedAt('T3', 'j', 1)]])).slow.size).toBe(
			0,
		);
	});

	it('names a result written by an attempt that no longer held the lease', () => {
		const view = state({
			jobs: [job('j', 'done', 2)],
			attempts: [attempt('j', 1, 'succeeded'), attempt('j', 2, 'succeeded')],
		});
		const checked = checkAttemptHistory(view, new Map());
		expect(checked.staleApplied).toBe(1);
		expect(checked.violations).toEqual([
			'job j: attempt 1 of 2 recorded succeeded, an outcome only the current attempt may write',
		]);
	});
});

describe('attributeCrmRequests and checkCheckpointsBeforeCrm', () => {
	it('files CRM requests by attempt and names one without the attempt header or of another job', () => {
		const view = state({
			jobs: [job('j', 'done', 1, 'rec1'), job('k', 'done', 1, 'rec2')],
			attempts: [attempt('j', 1, 'succeeded', 1), attempt('k', 1, 'succeeded', 1)],
			crm: [
				['j', crmRequest('j-a1', 2, 'rec1')],
				['k', crmRequest(null, 2, 'rec2')],
				['k', crmRequest('j-a1', 3, null, 'rec2')],
			],
		});
		const { crmOf, violations } = attributeCrmRequests(view);
		expect(crmOf('j-a1')).toHaveLength(2);
		expect(violations).toEqual([
			'CRM request for job k without X-Attempt-Id',
			'CRM request for job k names attempt j-a1 of another job',
		]);
	});

	it('requires the checkpoint before the CRM request and after an AI request', () => {
		const good = state({
			jobs: [job('j', 'done', 1, 'rec1')],
			attempts: [attempt('j', 1, 'succeeded', 2)],
			ai: [['j-a1', 1]],
			crm: [['j', crmRequest('j-a1', 3, 'rec1')]],
		});
		expect(checkCheckpointsBeforeCrm(good, attributeCrmRequests(good).crmOf).violations).toEqual(
			[],
		);

		const bad = state({
			jobs: [job('j', 'done', 1, 'rec1'), job('k', 'done', 1, 'rec2')],
			attempts: [attempt('j', 1, 'succeeded', 9), attempt('k', 1, 'succeeded', null)],
			crm: [
				['j', crmRequest('j-a1', 3, 'rec1')],
				['k', crmRequest('k-a1', 3, 'rec2')],
			],
		});
		const violations = checkCheckpointsBeforeCrm(bad, attributeCrmRequests(bad).crmOf).violations;
		expect(violations).toHaveLength(3);
		expect(violations[0]).toMatch(
			/^attempt j-a1 recorded its checkpoint at .* after its CRM request/,
		);
		expect(violations[1]).toBe(
			'attempt j-a1 recorded checkpoint crm_request without an AI request',
		);
		expect(violations[2]).toBe(
			'attempt k-a1 of job k reached the CRM but recorded checkpoint null',
		);
	});
});

describe('checkKilledAttempts', () => {
	const kills: KillRecord[] = [
		{
			n: 1,
			target: 'T1',
			aimed: true,
			upMs: 1,
			restartMs: 1,
			windows: { ...emptyWindows(), T1: 1, T3: 1 },
			t1Workers: {},
			recovering: 0,
		},
	];

	it('a T1 attempt queued in n8n may run again at boot; one killed in T3 stays dead', () => {
		const view = state({
			jobs: [job('a', 'done', 2), job('b', 'done', 2)],
			attempts: [
				attempt('a', 1, 'lease_expired'),
				attempt('a', 2, 'succeeded'),
				attempt('b', 1, 'lease_expired', 1),
				attempt('b', 2, 'succeeded'),
			],
			ai: [['a-a1', 20]],
			crm: [['b', crmRequest('b-a1', 2, 'rec1')]],
		});
		const killed = new Map([
			['a-a1', killedAt('T1', 'a', 10, 'new')],
			['b-a1', killedAt('T3', 'b', 10)],
		]);
		const checked = checkKilledAttempts({
			view,
			kills,
			caught: new Map([['a', new Set(['T1' as const])]]),
			killed,
			crmOf: attributeCrmRequests(view).crmOf,
		});
		expect(checked.violations).toEqual([]);
		expect([...checked.rerun]).toEqual(['a-a1']);
		expect(checked.windows.T1).toMatchObject({ pairs: 1, jobs: 1, kills: 1, rerunSuperseded: 1 });
		expect(checked.windows.T3).toMatchObject({ pairs: 1, withCrmRequest: 1 });
	});

	it('names an attempt killed after its worker started that ran again', () => {
		const view = state({
			jobs: [job('a', 'done', 1)],
			attempts: [attempt('a', 1, 'succeeded')],
		});
		const checked = checkKilledAttempts({
			view,
			kills,
			caught: new Map(),
			killed: new Map([['a-a1', killedAt('T2', 'a', 10)]]),
			crmOf: () => [],
		});
		expect(checked.staleApplied).toBe(1);
		expect(checked.violations).toEqual([
			'attempt a-a1 of job a, killed in T2 (worker started) at kill 1, ran again after the crash (outcome succeeded)',
		]);
	});
});

describe('checkCrmSideEffects', () => {
	it('CRM honours keys: the repeat of an attempt killed in T3 is a replay, one record per job', () => {
		const view = state({
			jobs: [job('j', 'done', 2, 'rec1')],
			attempts: [attempt('j', 1, 'lease_expired', 1), attempt('j', 2, 'succeeded', 5)],
			crm: [
				['j', crmRequest('j-a1', 2, 'rec1')],
				['j', crmRequest('j-a2', 6, null, 'rec1')],
			],
		});
		const killed = new Map([['j-a1', killedAt('T3', 'j', 3)]]);
		const checked = checkCrmSideEffects({
			view,
			crmOf: attributeCrmRequests(view).crmOf,
			causeOf: orphanCause(killed, new Set(), new Set()),
			honourKeys: true,
		});
		expect(checked.violations).toEqual([]);
		expect(checked).toMatchObject({ requests: 2, created: 1, replayed: 1, extraRecords: 0 });
		expect(checked.orphans.T3).toBe(1);
		expect(checked.replaysByCause.T3).toBe(1);
		expect([...checked.orphanAttempts]).toEqual(['j-a1']);
	});

	it('CRM ignores keys: an extra record is a duplicate by cause; one without a cause is named', () => {
		const view = state({
			jobs: [job('j', 'done', 2, 'rec2'), job('k', 'done', 2, 'rec4')],
			attempts: [
				attempt('j', 1, 'lease_expired', 1),
				attempt('j', 2, 'succeeded', 5),
				attempt('k', 1, 'lease_expired', 1),
				attempt('k', 2, 'succeeded', 5),
			],
			crm: [
				['j', crmRequest('j-a1', 2, 'rec1')],
				['j', crmRequest('j-a2', 6, 'rec2')],
				['k', crmRequest('k-a1', 2, 'rec3')],
				['k', crmRequest('k-a2', 6, 'rec4')],
			],
		});
		const killed = new Map([['j-a1', killedAt('T4', 'j', 3)]]);
		const checked = checkCrmSideEffects({
			view,
			crmOf: attributeCrmRequests(view).crmOf,
			causeOf: orphanCause(killed, new Set(), new Set()),
			honourKeys: false,
		});
		expect(checked.duplicatesByCause.T4).toBe(1);
		expect(checked).toMatchObject({ jobsWithMoreThanOneRecord: 2, extraRecords: 2 });
		expect(checked.violations).toEqual([
			'job k: attempt 1 (lease_expired) reached the CRM without its result being kept, and was neither killed in T3/T4, re-run at boot, nor slow',
		]);
	});

	it('names a result that is not the record of the attempt holding the lease', () => {
		const view = state({
			jobs: [job('j', 'done', 1, 'rec9')],
			attempts: [attempt('j', 1, 'succeeded', 1)],
			crm: [['j', crmRequest('j-a1', 2, 'rec1')]],
		});
		const checked = checkCrmSideEffects({
			view,
			crmOf: attributeCrmRequests(view).crmOf,
			causeOf: () => null,
			honourKeys: true,
		});
		expect(checked.staleApplied).toBe(1);
		expect(checked.violations).toEqual([
			'job j: result names CRM record rec9, but the attempt holding the lease got rec1',
		]);
	});
});

describe('the reconciliation report against the journals', () => {
	const view = state({
		jobs: [job('j', 'done', 2, 'rec2'), job('k', 'done', 2, 'rec3')],
		attempts: [
			attempt('j', 1, 'lease_expired', 1),
			attempt('j', 2, 'succeeded', 5),
			attempt('k', 1, 'lease_expired'),
			attempt('k', 2, 'succeeded', 5),
		],
		crm: [
			['j', crmRequest('j-a1', 2, 'rec1')],
			['j', crmRequest('j-a2', 6, 'rec2')],
			['k', crmRequest('k-a2', 6, 'rec3')],
		],
	});
	const crmOf = attributeCrmRequests(view).crmOf;
	const killed = new Map([
		['j-a1', killedAt('T3', 'j', 3)],
		['k-a1', killedAt('T1', 'k', 3)],
	]);
	const rows = [row('j-a1', 'j', true), row('k-a1', 'k', false)];

	it('holds when the report lists exactly the lease_expired attempts, split by checkpoint', () => {
		const listed = checkReportListsUnknownOutcomes({
			report: report(rows),
			view,
			killed,
			slow: new Set(),
		});
		expect(listed).toMatchObject({ exact: true, leaseExpiredAttempts: 2, violations: [] });
		const checkList = checkCheckList({
			reportRows: listed.reportRows,
			view,
			crmOf,
			killed,
			lastInFlightAt: new Map(),
		});
		expect(checkList).toMatchObject({
			withCheckpoint: 1,
			withoutCheckpoint: 1,
			checkedWithCrmRequest: 1,
			leaseExpiredWithCrmRequest: 1,
			checkpointRowsExact: true,
			checkListMatchesCrmRequests: true,
			violations: [],
		});
		expect(checkOrphansListed(new Set(['j-a1']), listed.reportRows)).toEqual({
			coversEveryOrphan: true,
			violations: [],
		});
		expect(
			checkUnheldRecordsListed({
				view,
				reportRows: listed.reportRows,
				keysToCheck: new Set(['j']),
			}),
		).toEqual({ unheldRecords: 1, unheldRecordsListed: 1, violations: [] });
	});

	it('names a missing row, a row nobody explains, and a "no call made" row whose call was made', () => {
		const wrong = [row('k-a1', 'k', false), row('j-a1', 'j', false)];
		const listed = checkReportListsUnknownOutcomes({
			report: report([wrong[0]]),
			view,
			killed: new Map([['j-a1', killedAt('T3', 'j', 3)]]),
			slow: new Set(),
		});
		expect(listed.exact).toBe(false);
		expect(listed.violations).toEqual([
			'attempt j-a1 ended lease_expired but is missing from the unknown-outcomes report',
			'the unknown-outcomes report lists attempt k-a1, which was neither in flight at a kill nor slower than its lease',
			'attempt j-a1 killed in T3 is not in the report',
		]);
		const checkList = checkCheckList({
			reportRows: new Map(wrong.map((r) => [r.attempt_id, r])),
			view,
			crmOf,
			killed,
			lastInFlightAt: new Map(),
		});
		expect(checkList.checkpointRowsExact).toBe(false);
		expect(checkList.checkListMatchesCrmRequests).toBe(false);
		expect(checkList.violations).toContain(
			'report row of attempt j-a1 (job j) says no CRM call was made, but the CRM got its request',
		);
		expect(checkOrphansListed(new Set(['j-a1']), new Map()).coversEveryOrphan).toBe(false);
	});

	it('reportConsistency checks the report adds up', () => {
		expect(reportConsistency(report(rows))).toEqual([]);
		expect(reportConsistency({ ...report(rows), count: 5 })).toEqual(['report count 5 for 2 rows']);
	});
});

describe('checkLateAttempts', () => {
	it('a slow attempt that came out of the checkpoint on Lease Lost made no CRM call', () => {
		const view = state({
			jobs: [job('j', 'done', 2, 'rec2')],
			attempts: [attempt('j', 1, 'lease_expired'), attempt('j', 2, 'succeeded', 5)],
			crm: [['j', crmRequest('j-a2', 6, 'rec2')]],
		});
		const late = lateAttemptsOf(view, new Set(), new Set(['j-a1']));
		expect(late.map((a) => a.attempt_id)).toEqual(['j-a1']);
		const routes = new Map([['j-a1', { first: [], leaseLost: [{ attempt_id: 'j-a1' }] }]]);
		const crmOf = attributeCrmRequests(view).crmOf;
		expect(
			checkLateAttempts({ late, routes, rerun: new Set(), killed: new Map(), crmOf }),
		).toMatchObject({ stoppedAtCheckpoint: { slow: 1 }, violations: [] });
		const calledAnyway = () => [crmRequest('j-a1', 9, 'rec9')];
		expect(
			checkLateAttempts({ late, routes, rerun: new Set(), killed: new Map(), crmOf: calledAnyway })
				.violations,
		).toEqual([
			'attempt j-a1 came out of Checkpoint: CRM request on Lease Lost, yet the CRM got its request',
		]);
	});
});

describe('the window model', () => {
	it('classifies each job of a snapshot into T0–T4, or R for an attempt that already died', () => {
		const running = (id: string) => job(id, 'running', 1);
		const snap = {
			at: at(10),
			jobs: [
				job('q', 'queued', 0),
				running('t1'),
				running('t2'),
				running('t3'),
				running('t4'),
				running('r'),
			],
			attempts: [],
			ai: new Map([
				['t2-a1', [{ at: at(1), attemptId: 't2-a1' }]],
				['t3-a1', [{ at: at(1), attemptId: 't3-a1' }]],
			]),
			crm: new Map([
				['t3', [{ ...crmRequest('t3-a1', 2, 'rec1'), responded: false }]],
				['t4', [crmRequest('t4-a1', 2, 'rec2')]],
			]),
		};
		const classes = classify(snap, new Set(['r-a1']));
		expect(Object.fromEntries([...classes].map(([id, c]) => [id, c.window]))).toEqual({
			q: 'T0',
			t1: 'T1',
			t2: 'T2',
			t3: 'T3',
			t4: 'T4',
			r: 'R',
		});
	});

	it('seededRandom replays the same kill plan for the same seed', () => {
		const a = seededRandom(42);
		const b = seededRandom(42);
		const first = [a(), a(), a()];
		expect([b(), b(), b()]).toEqual(first);
		expect(first.every((n) => n >= 0 && n < 1)).toBe(true);
		expect(seededRandom(43)()).not.toBe(first[0]);
	});
});
