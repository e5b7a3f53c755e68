import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

/**
 * The error bodies of the bundled workflows link to README#errors: every code the package can
 * raise must be documented there, so a new code cannot be added without its row. The codes
 * are read from the source, where errors are made: `new DurableJobsError('<code>', …)` and the
 * constructors of its subclasses.
 */
const REPO = resolve(__dirname, '..', '..');

function sourceFiles(dir: string): string[] {
	return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
		const path = join(dir, entry.name);
		if (entry.isDirectory()) return sourceFiles(path);
		return entry.name.endsWith('.ts') ? [path] : [];
	});
}

const SOURCES = [...sourceFiles(join(REPO, 'src', 'core')), ...sourceFiles(join(REPO, 'nodes'))];
const CODE = /'([a-z][a-z0-9_]*)'/g;

interface Found {
	codes: Map<string, string[]>;
	/** `new DurableJobsError(…)` sites whose code is not a literal. */
	computed: string[];
}

function errorCodesInSource(): Found {
	const codes = new Map<string, string[]>();
	const computed: string[] = [];
	const add = (code: string, file: string) =>
		codes.set(code, [...(codes.get(code) ?? []), relative(REPO, file)]);
	for (const file of SOURCES) {
		const text = readFileSync(file, 'utf8');
		for (const match of text.matchAll(/new DurableJobsError\(\s*([^,]*),/g)) {
			const literal = /^'([a-z][a-z0-9_]*)'$/.exec(match[1].trim());
			if (literal) add(literal[1], file);
			else computed.push(`${relative(REPO, file)}: ${match[1].trim()}`);
		}
		// Subclasses pass their code (or a choice of codes) as super()'s first argument.
		if (/class \w+ extends (DurableJobsError|ValidationError)\b/.test(text)) {
			for (const match of text.matchAll(/super\(([^,]*),/g))
				for (const code of match[1].matchAll(CODE)) add(code[1], file);
		}
	}
	return { codes, computed };
}

function readmeErrorsSection(): string {
	const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
	const start = readme.indexOf('\n## Errors\n');
	expect(start).toBeGreaterThan(0);
	const end = readme.indexOf('\n## ', start + 1);
	return readme.slice(start, end === -1 ? undefined : end);
}

describe('README#errors documents every error code', () => {
	const { codes, computed } = errorCodesInSource();
	const section = readmeErrorsSection();

	it('finds the codes where errors are made (the scan itself works)', () => {
		for (const code of [
			'invalid_input',
			'payload_too_large',
			'idempotency_key_reused',
			'database_unavailable',
			'migrations_missing',
			'database_error',
			'companion_sql_failed',
			'invalid_parameter',
		])
			expect(codes.has(code)).toBe(true);
	});

	it('every error is made with a literal code, or passes on the code of an error it wraps', () => {
		expect(computed.filter((site) => !/: error\.code$/.test(site))).toEqual([]);
	});

	it.each([...codes.keys()].sort())(
		'`%s` has a row: HTTP status, what happened, the fix',
		(code) => {
			const row = section.split('\n').find((line) => line.startsWith(`| \`${code}\` |`));
			expect(row, `${code} (raised in ${codes.get(code)!.join(', ')})`).toBeDefined();
			const cells = row!
				.split('|')
				.slice(1, -1)
				.map((cell) => cell.trim());
			expect(cells).toHaveLength(4);
			expect(cells[1]).toMatch(/^\d{3}\b/);
			for (const cell of cells) expect(cell.length).toBeGreaterThan(0);
		},
	);
});
