/**
 * n8n installed once into the cache (see cache.ts), run with Node 24 (see node24.ts), and this
 * package packed the way npm publishes it.
 */
import { existsSync, mkdirSync, mkdtempSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

import {
	cacheRoot,
	COMPLETE_MARKER,
	ensureInstalled,
	formatBytes,
	runOrThrow,
	tail,
	npmInstallIntoCache,
} from '../cache';
import { ensureNode24, node24Ready, NODE24_BYTES } from '../node24';
import { trackChild } from '../processes';

export const DEFAULT_N8N_VERSION = process.env.N8N_E2E_VERSION || '2.40.7';
/** What `npm install n8n@2.40` puts on disk. */
export const N8N_BYTES = 2.9e9;

type Log = (line: string) => void;

export interface N8nInstall {
	version: string;
	/** Node >= 24 executable used to run n8n. */
	node24: string;
	/** `<cache>/n8n-<version>/node_modules/n8n/bin/n8n` — run it as `node24 n8nBin <cmd>`. */
	n8nBin: string;
	/** Folder of node24; first in PATH for n8n (its task runners start `node` from PATH). */
	binDir: string;
	installDir: string;
}

export function n8nInstallDir(version = DEFAULT_N8N_VERSION): string {
	return join(cacheRoot(), `n8n-${version}`);
}

/**
 * What a first run still has to download, as a sentence with sizes, the cache folder and the
 * free disk there; undefined when n8n and Node 24 are both cached.
 */
export function downloadNotice(version = DEFAULT_N8N_VERSION): string | undefined {
	const missing: Array<[string, number]> = [];
	if (!existsSync(join(n8nInstallDir(version), COMPLETE_MARKER)))
		missing.push([`n8n ${version}`, N8N_BYTES]);
	if (!node24Ready()) missing.push(['Node 24 (n8n needs it)', NODE24_BYTES]);
	if (missing.length === 0) return undefined;
	const total = missing.reduce((sum, [, bytes]) => sum + bytes, 0);
	let free = '';
	try {
		let dir = cacheRoot();
		while (!existsSync(dir)) dir = join(dir, '..');
		const stats = statfsSync(dir);
		free = `; ${formatBytes(stats.bavail * stats.bsize)} free there`;
	} catch {
		// No figure: say nothing about free space.
	}
	return (
		`First run: downloads ${missing.map(([what, bytes]) => `${what} (about ${formatBytes(bytes)})`).join(' and ')}, ` +
		`about ${formatBytes(total)} of disk in ${cacheRoot()}${free}; a few minutes on a fast line, once. ` +
		'Set DURABLE_JOBS_CACHE_DIR to put the cache elsewhere.'
	);
}

/**
 * Installs (once) and returns Node 24 and n8n. The first n8n install downloads ~2.9 GB and
 * takes minutes; `--ignore-scripts` is required because some native builds fail here, which is
 * also why n8n must run on PostgreSQL instead of sqlite.
 */
export async function ensureN8n(opts: { version?: string; log?: Log } = {}): Promise<N8nInstall> {
	const log = opts.log ?? (() => {});
	const version = opts.version ?? DEFAULT_N8N_VERSION;
	const node = await ensureNode24({ log });
	const installDir = n8nInstallDir(version);
	await ensureInstalled(
		installDir,
		async (dir) => {
			await npmInstallIntoCache(dir, {
				spec: `n8n@${version}`,
				what: `n8n ${version}`,
				expectedBytes: N8N_BYTES,
				npmArgs: ['--ignore-scripts', '--loglevel=error'],
				log,
			});
		},
		log,
	);
	const n8nBin = join(installDir, 'node_modules', 'n8n', 'bin', 'n8n');
	if (!existsSync(n8nBin)) throw new Error(`${n8nBin} missing; delete ${installDir} to reinstall`);
	return { version, node24: node.node, n8nBin, binDir: node.binDir, installDir };
}

/**
 * `npm pack` of the package in `repoDir` (its prepack builds it) into `outDir` (default: a new
 * temp folder). Returns the absolute tarball path.
 */
export async function packPackage(
	repoDir: string,
	opts: { outDir?: string; log?: Log } = {},
): Promise<string> {
	const outDir = opts.outDir ?? mkdtempSync(join(tmpdir(), 'durable-jobs-pack-'));
	mkdirSync(outDir, { recursive: true });
	const started = Date.now();
	opts.log?.('building and packing this package (npm pack)');
	const res = await runOrThrow('npm', ['pack', '--json', '--pack-destination', outDir], {
		cwd: repoDir,
		onSpawn: (child) => trackChild(child, 'npm pack'),
	});
	// Lifecycle scripts (prepack → build) print to stdout before the JSON, gulp with "[hh:mm:ss]".
	const jsonStart = /^\[\s*$/m.exec(res.stdout)?.index;
	if (jsonStart === undefined)
		throw new Error(`npm pack printed no JSON:\n${tail(res.stdout, 30)}`);
	const parsed = JSON.parse(res.stdout.slice(jsonStart)) as Array<{ filename: string }>;
	const file = parsed[0]?.filename;
	if (!file) throw new Error(`npm pack printed no filename:\n${res.stdout}`);
	opts.log?.(`packed ${file} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
	return join(outDir, basename(file));
}
