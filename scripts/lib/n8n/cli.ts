/**
 * What is done to an n8n instance through its CLI and npm before (or between) its starts:
 * install community packages, import credentials and workflows, publish and unpublish.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { basename, isAbsolute, join, resolve } from 'node:path';

import { run, tail, type RunResult } from '../cache';
import { inPool, trackChild } from '../processes';

type Log = (line: string) => void;

/** Runs `n8n <args>` with the instance's environment; its output goes to the instance log. */
export type CliRunner = (args: string[]) => Promise<RunResult>;

export async function cliOrThrow(cli: CliRunner, args: string[]): Promise<RunResult> {
	const res = await cli(args);
	if (res.code !== 0)
		throw new Error(
			`n8n ${args.join(' ')} exited with ${res.code}\n${tail(res.stdout + res.stderr, 40)}`,
		);
	return res;
}

/**
 * `npm install`s tarballs into `<userFolder>/.n8n/nodes` like n8n's own community-package
 * installer: no peer deps (n8n-workflow must be n8n's copy, resolved through the NODE_PATH n8n
 * sets up) and no install scripts.
 */
export async function installPackages(
	userFolder: string,
	tarballs: string[],
	log: Log,
	appendLog: (text: string) => void,
): Promise<void> {
	const nodesDir = join(userFolder, '.n8n', 'nodes');
	mkdirSync(nodesDir, { recursive: true });
	if (!existsSync(join(nodesDir, 'package.json'))) {
		writeFileSync(
			join(nodesDir, 'package.json'),
			JSON.stringify({ name: 'installed-nodes', private: true }) + '\n',
		);
	}
	log(`installing ${tarballs.map((t) => basename(t)).join(', ')} into n8n (npm install)`);
	const res = await run(
		'npm',
		[
			'install',
			...tarballs.map((t) => (isAbsolute(t) ? t : resolve(t))),
			'--omit=dev',
			'--omit=peer',
			'--no-audit',
			'--no-fund',
			'--ignore-scripts',
			'--loglevel=error',
		],
		{
			cwd: nodesDir,
			env: { ...process.env, NODE_ENV: 'production' },
			onOutput: appendLog,
			onSpawn: (child) => trackChild(child, 'npm install'),
		},
	);
	if (res.code !== 0)
		throw new Error(
			`npm install ${tarballs.join(' ')} failed:\n${tail(res.stdout + res.stderr, 40)}`,
		);
}

export async function importCredentials(
	cli: CliRunner,
	dir: string,
	credentials: object[],
): Promise<void> {
	if (credentials.length === 0) return;
	const file = join(dir, `credentials-${Date.now()}.json`);
	writeFileSync(file, JSON.stringify(credentials, null, 2));
	try {
		await cliOrThrow(cli, ['import:credentials', `--input=${file}`]);
	} finally {
		// The file holds secrets in plain text; n8n has them encrypted now.
		rmSync(file, { force: true });
	}
}

export interface WorkflowSources {
	dir?: string;
	files?: string[];
	workflows?: object[];
}

export async function importWorkflows(
	cli: CliRunner,
	instanceDir: string,
	o: WorkflowSources,
): Promise<void> {
	if (o.dir) await cliOrThrow(cli, ['import:workflow', '--separate', `--input=${resolve(o.dir)}`]);
	for (const f of o.files ?? [])
		await cliOrThrow(cli, ['import:workflow', `--input=${resolve(f)}`]);
	if (o.workflows && o.workflows.length > 0) {
		const wfDir = mkdtempSync(join(instanceDir, 'workflows-'));
		o.workflows.forEach((wf, i) =>
			writeFileSync(join(wfDir, `${String(i).padStart(3, '0')}.json`), JSON.stringify(wf, null, 2)),
		);
		await cliOrThrow(cli, ['import:workflow', '--separate', `--input=${wfDir}`]);
	}
}

export async function activeWorkflowIds(cli: CliRunner): Promise<string[]> {
	const res = await cliOrThrow(cli, ['list:workflow', '--active=true', '--onlyId']);
	return res.stdout
		.split('\n')
		.map((l) => l.trim())
		.filter((l) => /^[A-Za-z0-9_-]+$/.test(l));
}

/**
 * Publishes (or unpublishes) through the CLI, two at a time (each run boots n8n: seconds of
 * CPU), and verifies against list:workflow, because publish:workflow exits 0 even when it fails.
 */
export async function setPublished(
	cli: CliRunner,
	ids: string[],
	published: boolean,
	logTail: () => string,
	log: Log = () => undefined,
): Promise<void> {
	const command = published ? 'publish:workflow' : 'unpublish:workflow';
	let done = 0;
	await inPool(ids, 2, async (id) => {
		await cliOrThrow(cli, [command, `--id=${id}`]);
		done++;
		log(`${published ? 'published' : 'unpublished'} ${id} (${done} of ${ids.length})`);
	});
	const active = new Set(await activeWorkflowIds(cli));
	const wrong = ids.filter((id) => active.has(id) !== published);
	if (wrong.length > 0)
		throw new Error(
			`workflows ${published ? 'not published' : 'still published'}: ${wrong.join(', ')}\n${logTail()}`,
		);
}
