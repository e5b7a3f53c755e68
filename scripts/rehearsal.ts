/**
 * `npm run rehearsal`: the full fault rehearsal. Starts PostgreSQL for n8n (yours from
 * DATABASE_URL, otherwise an embedded one), a private embedded PostgreSQL for the job database
 * (unless `--outage cut`: then the job database is on the same server as n8n's), the stand-in
 * AI and CRM, and a real n8n with this package and every bundled workflow (the lease shortened:
 * the Dispatcher's and the Worker's checkpoint), then:
 *
 *   1. SIGKILLs n8n `--kills` times while jobs are in flight, with a CRM that honours
 *      Idempotency-Key and/or one that ignores it (`--honour-keys true|false|both`);
 *   2. restarts the job database's PostgreSQL mid-run, down for 8 s (`--outage crash`: an
 *      immediate shutdown instead, which loses the WAL not yet flushed, as a crash does;
 *      `--outage cut`: cuts it with a TCP proxy, for a server that must not be restarted);
 *      n8n's own database stays up;
 *   3. lets one worker outlive its lease past the checkpoint (late CRM answer) and one before
 *      it (late AI answer).
 *
 * Every run checks its guarantees (see scripts/lib/rehearsal.ts) and writes its figures into
 * docs/RELIABILITY.md (`--no-doc` to skip). Exits 1 when any check failed.
 *
 *   npm run rehearsal -- --kills 100 --honour-keys both
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run rehearsal -- --kills 20 --honour-keys false
 *
 * Options: --kills N (per CRM mode, default 100), --honour-keys true|false|both (default both),
 * --lease-seconds S (default 15), --in-flight N (default 24), --seed N, --outage restart|crash|cut
 * (default restart), --no-outage, --no-slow-worker, --doc PATH (default docs/RELIABILITY.md),
 * --no-doc, --quiet,
 * --schema NAME (job schema, default dj_rehearsal; it is dropped at start, so two runs on one
 * database need different names).
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

import pg from 'pg';

import { exitCleanly, failAndExit } from './lib/cleanup';
import { maskDatabaseUrl } from './lib/database-url';
import { ENVIRONMENT_NEEDS, REPO_DIR } from './lib/environment';
import { DEFAULT_N8N_VERSION, downloadNotice } from './lib/n8n';
import { startPostgres, type RunningPostgres } from './lib/postgres';
import {
	renderKillSection,
	renderOutageSection,
	renderSlowWorkerSection,
	runKillRehearsal,
	runOutageScenario,
	runSlowWorkerScenario,
	startRehearsalEnvironment,
	updateReliabilityDoc,
	type OutageKind,
	type RehearsalEnvironment,
	type RunInfo,
} from './lib/rehearsal';

interface Args {
	kills: number;
	honourKeys: boolean[];
	leaseSeconds: number;
	inFlight: number;
	seed: number;
	outage: boolean;
	outageKind: OutageKind;
	slowWorker: boolean;
	doc: string | null;
	quiet: boolean;
	schema: string;
}

function usage(message: string): never {
	process.stderr.write(
		`${message}\nusage: npm run rehearsal -- [--kills N] [--honour-keys true|false|both] [--lease-seconds S] [--in-flight N] [--seed N] [--outage restart|crash|cut] [--no-outage] [--no-slow-worker] [--doc PATH | --no-doc] [--quiet] [--schema NAME]\n`,
	);
	process.exit(2);
}

function parseArgs(argv: string[]): Args {
	const args: Args = {
		kills: 100,
		honourKeys: [true, false],
		leaseSeconds: 15,
		inFlight: 24,
		seed: Math.floor(Math.random() * 2 ** 31),
		outage: true,
		outageKind: 'restart',
		slowWorker: true,
		doc: join(REPO_DIR, 'docs', 'RELIABILITY.md'),
		quiet: false,
		schema: 'dj_rehearsal',
	};
	for (let i = 0; i < argv.length; i++) {
		const [flag, inline] = argv[i].split('=', 2);
		const value = () => {
			const v = inline ?? argv[++i];
			if (v === undefined) usage(`${flag} needs a value`);
			return v;
		};
		const int = (min: number) => {
			const v = Number(value());
			if (!Number.isInteger(v) || v < min) usage(`${flag} must be an integer ≥ ${min}`);
			return v;
		};
		switch (flag) {
			case '--kills':
				args.kills = int(0);
				break;
			case '--honour-keys': {
				const v = value();
				if (v === 'true') args.honourKeys = [true];
				else if (v === 'false') args.honourKeys = [false];
				else if (v === 'both') args.honourKeys = [true, false];
				else usage('--honour-keys must be true, false or both');
				break;
			}
			case '--lease-seconds':
				args.leaseSeconds = int(5);
				break;
			case '--in-flight':
				args.inFlight = int(1);
				break;
			case '--seed':
				args.seed = int(0);
				break;
			case '--outage': {
				const v = value();
				if (v !== 'restart' && v !== 'crash' && v !== 'cut')
					usage('--outage must be restart, crash or cut');
				args.outageKind = v;
				break;
			}
			case '--no-outage':
				args.outage = false;
				break;
			case '--no-slow-worker':
				args.slowWorker = false;
				break;
			case '--doc':
				args.doc = value();
				break;
			case '--no-doc':
				args.doc = null;
				break;
			case '--quiet':
				args.quiet = true;
				break;
			case '--schema': {
				const v = value();
				if (!/^[a-z_][a-z0-9_]{0,49}$/.test(v)) usage('--schema must be a lower-case identifier');
				args.schema = v;
				break;
			}
			default:
				usage(`unknown option ${argv[i]}`);
		}
	}
	return args;
}

/** The commit the packed package was built from, and whether the working tree differed. */
function sourceDescription(): string {
	try {
		const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_DIR })
			.toString()
			.trim();
		const dirty =
			execFileSync(
				'git',
				['status', '--porcelain', '--', 'src', 'nodes', 'credentials', 'migrations', 'workflows'],
				{ cwd: REPO_DIR },
			)
				.toString()
				.trim() !== '';
		return `commit ${commit}${dirty ? ' plus uncommitted changes' : ''}`;
	} catch {
		return 'a source tree without git';
	}
}

async function main(): Promise<void> {
	const argv = process.argv.slice(2);
	const args = parseArgs(argv);
	const began = Date.now();
	const log = (line: string) => {
		if (!args.quiet) process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
	};
	exitCleanly({ log: (line) => process.stdout.write(`\n${line}\n`) });
	const notice = downloadNotice();
	if (notice) log(notice);
	const command = `${process.env.DATABASE_URL ? `DATABASE_URL=${maskDatabaseUrl(process.env.DATABASE_URL)} ` : ''}npm run rehearsal${argv.length ? ` -- ${argv.join(' ')}` : ''}`;

	let postgres: RunningPostgres | undefined;
	let env: RehearsalEnvironment | undefined;
	let failures = 0;
	const stop = async () => {
		await env?.stop().catch(() => undefined);
		await postgres?.stop().catch(() => undefined);
	};
	try {
		log(
			process.env.DATABASE_URL
				? "n8n's database: checking DATABASE_URL"
				: "n8n's database: DATABASE_URL not set, starting an embedded PostgreSQL (from npm)",
		);
		postgres = await startPostgres(log, [], { needs: ENVIRONMENT_NEEDS });
		const client = new pg.Client({ connectionString: postgres.url });
		await client.connect();
		const version = (await client.query<{ server_version: string }>('SHOW server_version')).rows[0]
			.server_version;
		await client.end();
		const n8nPostgres = `PostgreSQL ${version.split(' ')[0]} (${postgres.embedded ? 'embedded, from npm' : 'DATABASE_URL'})`;
		const source = sourceDescription();
		log(
			`starting the environment (lease ${args.leaseSeconds} s; job database ${args.outageKind === 'restart' ? 'on a private embedded PostgreSQL' : "on n8n's server"}; package built from ${source})`,
		);
		env = await startRehearsalEnvironment({
			databaseUrl: postgres.url,
			outage: args.outageKind,
			schema: args.schema,
			leaseSeconds: args.leaseSeconds,
			log,
		});
		const jobsVersion = (await env.jobsDb.query<{ server_version: string }>('SHOW server_version'))
			.rows[0].server_version;
		const postgresText = env.jobsServer
			? `${n8nPostgres} for n8n; PostgreSQL ${jobsVersion.split(' ')[0]} (embedded, from npm, private: the outage ${args.outageKind === 'crash' ? 'crashes' : 'restarts'} it) for the job database`
			: `${n8nPostgres} for both n8n and the job database`;
		const info = (): RunInfo => ({
			command,
			date: new Date(),
			n8nVersion: DEFAULT_N8N_VERSION,
			postgres: postgresText,
			totalMs: Date.now() - began,
			source,
		});

		for (const [index, honourKeys] of args.honourKeys.entries()) {
			if (args.kills === 0) break;
			log(
				`kill rehearsal: ${args.kills} kills, CRM ${honourKeys ? 'honours' : 'ignores'} Idempotency-Key`,
			);
			const result = await runKillRehearsal(env, {
				kills: args.kills,
				honourKeys,
				leaseSeconds: args.leaseSeconds,
				inFlight: args.inFlight,
				runId: `r${Date.now().toString(36)}${honourKeys ? 'h' : 'n'}`,
				seed: args.seed + index,
				log,
			});
			failures += result.violations.length;
			const section = renderKillSection(result, info());
			process.stdout.write(`\n${section}\n`);
			if (args.doc) updateReliabilityDoc(args.doc, `kills-honour-keys-${honourKeys}`, section);
		}
		if (args.outage) {
			log(
				env.jobsServer
					? `outage: ${env.outageKind === 'crash' ? 'crashing' : 'restarting'} the job database's PostgreSQL mid-run`
					: 'outage: cutting the job database mid-run with the TCP proxy',
			);
			const result = await runOutageScenario(env, {
				runId: `o${Date.now().toString(36)}`,
				leaseSeconds: args.leaseSeconds,
				log,
			});
			failures += result.violations.length;
			const section = renderOutageSection(result, info());
			process.stdout.write(`\n${section}\n`);
			if (args.doc)
				updateReliabilityDoc(
					args.doc,
					args.outageKind === 'crash' ? 'outage-crash' : 'outage',
					section,
				);
		}
		if (args.slowWorker) {
			log('slow worker: a CRM answer, then an AI answer, outlasts the lease');
			const result = await runSlowWorkerScenario(env, {
				runId: `s${Date.now().toString(36)}`,
				leaseSeconds: args.leaseSeconds,
				log,
			});
			failures += result.violations.length;
			const section = renderSlowWorkerSection(result, info());
			process.stdout.write(`\n${section}\n`);
			if (args.doc) updateReliabilityDoc(args.doc, 'slow-worker', section);
		}
		log(
			`done in ${((Date.now() - began) / 60_000).toFixed(1)} min; ${failures} violation(s)${args.doc ? `; figures in ${args.doc}` : ''}`,
		);
	} finally {
		await stop();
	}
	process.exit(failures === 0 ? 0 : 1);
}

main().catch(failAndExit);
