import { execFileSync } from 'node:child_process';
import { mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The src/ and migrations/ of a git ref, exported with `git archive` into a temporary directory
 * with node_modules linked, so its core can be imported next to the working tree's.
 */
export function exportRef(ref: string): { dir: string; commit: string } {
	const root = join(__dirname, '..', '..');
	const dir = mkdtempSync(join(tmpdir(), 'durable-jobs-compare-'));
	const commit = execFileSync('git', ['rev-parse', '--short', ref], {
		cwd: root,
		encoding: 'utf8',
	}).trim();
	const archive = execFileSync('git', ['archive', commit, 'src', 'migrations'], {
		cwd: root,
		maxBuffer: 64 * 1024 * 1024,
	});
	execFileSync('tar', ['-x', '-C', dir], { input: archive });
	symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
	return { dir, commit };
}
