/**
 * A Node.js >= 24 binary for running n8n 2.x (its `bin/n8n` refuses older Node), independent of
 * the Node that runs the tests.
 *
 *   const { node, binDir, version } = await ensureNode24({ log: console.log });
 *
 * Resolution order: `$N8N_NODE_BINARY` (explicit path) → the current Node when it is already
 * >= 24 → the npm package `node@24` installed once into `<cache>/node-24` (see cache.ts).
 * `binDir` must go first in PATH for n8n, because its task runners start `node` from PATH.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { cacheRoot, COMPLETE_MARKER, ensureInstalled, npmInstallIntoCache } from './cache';

/** What `npm install node@24` puts on disk. */
export const NODE24_BYTES = 195e6;

export interface Node24 {
	/** Absolute path of the node executable. */
	node: string;
	/** Its folder; put it first in PATH for n8n. */
	binDir: string;
	version: string;
}

const MIN_MAJOR = 24;

function versionOf(nodePath: string): string {
	return execFileSync(nodePath, ['--version'], { encoding: 'utf8' }).trim();
}

function majorOf(version: string): number {
	return Number(/^v(\d+)/.exec(version)?.[1] ?? 0);
}

/** Where the `node` npm package leaves the real binary (it differs between package versions). */
function findBinary(installDir: string): string | undefined {
	const candidates = [
		join(installDir, 'node_modules', 'node', 'bin', 'node'),
		join(
			installDir,
			'node_modules',
			'node',
			'node_modules',
			`node-${process.platform}-${process.arch}`,
			'bin',
			'node',
		),
		join(installDir, 'node_modules', `node-${process.platform}-${process.arch}`, 'bin', 'node'),
	];
	for (const candidate of candidates) {
		if (!existsSync(candidate)) continue;
		try {
			if (majorOf(versionOf(candidate)) >= MIN_MAJOR) return candidate;
		} catch {
			// A shell shim or a binary for another platform: try the next candidate.
		}
	}
	return undefined;
}

/** True when no download is needed (Node >= 24 runs this, or the cached copy is complete). */
export function node24Ready(): boolean {
	if (process.env.N8N_NODE_BINARY || majorOf(process.version) >= MIN_MAJOR) return true;
	return existsSync(join(cacheRoot(), `node-${MIN_MAJOR}`, COMPLETE_MARKER));
}

export async function ensureNode24(opts: { log?: (s: string) => void } = {}): Promise<Node24> {
	const log = opts.log ?? (() => {});
	const explicit = process.env.N8N_NODE_BINARY;
	if (explicit) {
		const version = versionOf(explicit);
		if (majorOf(version) < MIN_MAJOR)
			throw new Error(`N8N_NODE_BINARY=${explicit} is ${version}; n8n 2.x needs >= 24`);
		return { node: explicit, binDir: dirname(explicit), version };
	}
	if (majorOf(process.version) >= MIN_MAJOR) {
		return { node: process.execPath, binDir: dirname(process.execPath), version: process.version };
	}

	const dir = join(cacheRoot(), `node-${MIN_MAJOR}`);
	await ensureInstalled(
		dir,
		async (target) => {
			// The package's preinstall script fetches the platform binary, so scripts must run here.
			await npmInstallIntoCache(target, {
				spec: `node@${MIN_MAJOR}`,
				what: `Node ${MIN_MAJOR}`,
				expectedBytes: NODE24_BYTES,
				npmArgs: ['--foreground-scripts', '--ignore-scripts=false'],
				log,
			});
			if (!findBinary(target))
				throw new Error(`node@${MIN_MAJOR} installed into ${target} but no usable binary found`);
		},
		log,
	);
	const node = findBinary(dir);
	if (!node)
		throw new Error(`no Node ${MIN_MAJOR} binary in ${dir}; delete that folder to reinstall`);
	return { node, binDir: dirname(node), version: versionOf(node) };
}
