/**
 * The kill rehearsal: a submitter keeps jobs in flight through the real receiver while the main
 * n8n process is SIGKILLed `kills` times, each kill aimed at one window (T1…T4 in turn) and
 * classified from a snapshot one second later; n8n is restarted after every kill. After the
 * last one the run drains until quiet and its final state is checked (final-state.ts).
 */
import type { Environment } from '../environment';
import { sleep, type Log } from './constants';
import { workerExecutionStates } from './executions';
import { checkFinalState } from './final-state';
import type {
	KilledAttempt,
	KillRecord,
	KillRehearsalConfig,
	KillRehearsalResult,
} from './kill-types';
import { snapshot, waitQuiet } from './observations';
import { fetchReconciliationReport } from './reconciliation';
import { Submitter } from './submitter';
import {
	aimAt,
	classify,
	emptyWindows,
	seededRandom,
	TARGETS,
	WINDOWS,
	type Window,
} from './windows';

async function restartN8n(env: Environment, log: Log): Promise<void> {
	for (let attempt = 1; ; attempt++) {
		try {
			await env.n8n.restart();
			return;
		} catch (error) {
			if (attempt >= 3) throw error;
			log(
				`restart failed (${error instanceof Error ? error.message.split('\n')[0] : String(error)}); trying again`,
			);
			await sleep(2_000);
		}
	}
}

export async function runKillRehearsal(
	env: Environment,
	input: KillRehearsalConfig,
): Promise<KillRehearsalResult> {
	const log = input.log ?? (() => undefined);
	const seed = input.seed ?? Math.floor(Math.random() * 2 ** 31);
	const config = {
		kills: input.kills,
		honourKeys: input.honourKeys,
		leaseSeconds: input.leaseSeconds,
		inFlight: input.inFlight ?? 24,
		submitConcurrency: input.submitConcurrency ?? 4,
		aiLatencyMs: input.aiLatencyMs ?? 1_500,
		crmDelayMs: input.crmDelayMs ?? 2_000,
		minUpMs: input.minUpMs ?? 2_000,
		maxUpMs: input.maxUpMs ?? 8_000,
		aimTimeoutMs: input.aimTimeoutMs ?? 20_000,
		drainTimeoutMs: input.drainTimeoutMs ?? 10 * 60_000,
		runId: input.runId,
		targets: input.targets && input.targets.length > 0 ? input.targets : TARGETS,
		seed,
	};
	const prefix = `${config.runId}-`;
	const random = seededRandom(seed);
	const violations: string[] = [];
	const startedAt = new Date();
	const started = Date.now();

	env.standins.crm.honourKeys = config.honourKeys;
	env.standins.crm.delayMs = config.crmDelayMs;
	env.standins.ai.latencyMs = config.aiLatencyMs;

	const submitter = new Submitter(env, prefix, config.inFlight, config.submitConcurrency);
	submitter.start();

	const kills: KillRecord[] = [];
	const killed = new Map<string, KilledAttempt>();
	/** Latest kill snapshot at which each attempt was in flight (first death, or running again). */
	const lastInFlightAt = new Map<string, number>();
	const caught = new Map<string, Set<Window>>();
	const t1Workers: Record<string, number> = { new: 0, running: 0, none: 0 };
	let maxExpiredLeaseAgeMs = 0;
	let upSince = Date.now();
	let drainMs = 0;

	try {
		for (let n = 1; n <= config.kills; n++) {
			const target = config.targets[(n - 1) % config.targets.length];
			await sleep(config.minUpMs + random() * (config.maxUpMs - config.minUpMs));
			const aimed = await aimAt(
				env,
				target,
				{
					aiLatencyMs: config.aiLatencyMs,
					crmDelayMs: config.crmDelayMs,
					prefix,
					timeoutMs: config.aimTimeoutMs,
				},
				random,
			);
			const upMs = Date.now() - upSince;
			await env.n8n.kill('SIGKILL');
			// Statements PostgreSQL had fully received still run to completion (and commit), and
			// requests already on the wire still reach the stand-ins; give them a moment so the
			// snapshot is the state the crash left behind.
			await sleep(1_000);
			const snap = await snapshot(env, prefix);
			const classes = classify(snap, new Set(killed.keys()));
			const t1Attempts = [...classes.values()]
				.filter((entry) => entry.window === 'T1' && entry.attemptId)
				.map((entry) => entry.attemptId as string);
			const workers = await workerExecutionStates(env, t1Attempts);
			const windows = emptyWindows();
			const t1Here: Record<string, number> = { new: 0, running: 0, none: 0 };
			let recovering = 0;
			for (const [jobId, entry] of classes) {
				if (entry.attemptId) lastInFlightAt.set(entry.attemptId, snap.at);
				if (entry.window === 'R') {
					recovering++;
					continue;
				}
				windows[entry.window]++;
				if (!caught.has(jobId)) caught.set(jobId, new Set());
				caught.get(jobId)!.add(entry.window);
				if (entry.attemptId) {
					const worker =
						entry.window === 'T1' ? (workers.get(entry.attemptId) ?? 'none') : 'started';
					if (entry.window === 'T1') {
						t1Here[worker] = (t1Here[worker] ?? 0) + 1;
						t1Workers[worker] = (t1Workers[worker] ?? 0) + 1;
					}
					killed.set(entry.attemptId, {
						kill: n,
						window: entry.window,
						jobId,
						snapshotAt: snap.at,
						worker,
					});
				}
			}
			for (const job of snap.jobs) {
				if (
					job.status === 'running' &&
					job.lease_until &&
					job.lease_until.getTime() < snap.at - 1_000
				) {
					maxExpiredLeaseAgeMs = Math.max(
						maxExpiredLeaseAgeMs,
						snap.at - job.lease_until.getTime(),
					);
				}
			}
			const restartStarted = Date.now();
			await restartN8n(env, log);
			upSince = Date.now();
			const record: KillRecord = {
				n,
				target,
				aimed,
				upMs,
				restartMs: upSince - restartStarted,
				windows,
				t1Workers: t1Here,
				recovering,
			};
			kills.push(record);
			log(
				`kill ${n}/${config.kills} aimed at ${target}${aimed ? '' : ' (not seen, killed anyway)'} after ${(upMs / 1000).toFixed(1)} s up: ` +
					WINDOWS.map((w) => `${w}=${windows[w]}`).join(' ') +
					` (T1 workers queued/started/none ${t1Here.new}/${t1Here.running}/${t1Here.none}) R=${recovering}; restart ${(record.restartMs / 1000).toFixed(1)} s`,
			);
		}
		submitter.stopNew();
		const drainStarted = Date.now();
		const quiet = await waitQuiet(env, prefix, submitter, config.drainTimeoutMs);
		drainMs = Date.now() - drainStarted;
		if (!quiet)
			violations.push(
				`the run did not get quiet within ${config.drainTimeoutMs / 1000} s after the last kill`,
			);
	} finally {
		await submitter.stop();
	}
	violations.push(...submitter.violations);

	const final = await snapshot(env, prefix);
	const report = await fetchReconciliationReport(env);
	const checked = await checkFinalState(
		env,
		{
			startedAt,
			submissions: [...submitter.submissions.values()],
			kills,
			killed,
			lastInFlightAt,
			caught,
			honourKeys: config.honourKeys,
		},
		final,
		report,
	);
	return {
		...checked,
		config,
		startedAt,
		durationMs: Date.now() - started,
		drainMs,
		kills,
		t1Workers,
		maxExpiredLeaseAgeMs,
		violations: [...violations, ...checked.violations],
	};
}
