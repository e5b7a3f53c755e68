import js from '@eslint/js';
import n8nCommunityNodes from '@n8n/eslint-plugin-community-nodes';
import n8nNodesBase from 'eslint-plugin-n8n-nodes-base';
import tseslint from 'typescript-eslint';

const communityConfig = n8nCommunityNodes.configs.recommendedWithoutN8nCloudSupport;

export default tseslint.config(
	{
		ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.tmp/**', 'gulpfile.js'],
	},
	{ ...js.configs.recommended, files: ['**/*.ts'] },
	...tseslint.configs.recommended.map((config) => ({ ...config, files: ['**/*.ts'] })),
	{
		files: ['**/*.ts'],
		languageOptions: { parserOptions: { projectService: false } },
		rules: {
			'@typescript-eslint/no-unused-vars': [
				'error',
				{ argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
			],
			'@typescript-eslint/no-explicit-any': 'error',
		},
	},
	// n8n's community-node rules, non-cloud variant, over the package's own files.
	{
		...communityConfig,
		files: ['package.json', 'nodes/**/*.ts', 'credentials/**/*.ts', 'nodes/**/*.json'],
		languageOptions: { parser: tseslint.parser },
		rules: {
			...communityConfig.rules,
			// This package talks to PostgreSQL through `pg`, which must be a runtime dependency
			// (n8n installs it with the package). That makes it a self-hosted-only package:
			// n8n Cloud's verified nodes cannot have dependencies, and this rule enforces that.
			'@n8n/community-nodes/no-runtime-dependencies': 'off',
		},
	},
	{
		files: ['nodes/**/*.ts'],
		plugins: { 'n8n-nodes-base': n8nNodesBase },
		rules: {
			...n8nNodesBase.configs.nodes.rules,
			// These two predate NodeConnectionTypes and ask for the string 'main', which the
			// community-nodes rule node-connection-type-literal in turn rejects.
			'n8n-nodes-base/node-class-description-inputs-wrong-regular-node': 'off',
			'n8n-nodes-base/node-class-description-outputs-wrong': 'off',
		},
	},
	{
		files: ['credentials/**/*.ts'],
		plugins: { 'n8n-nodes-base': n8nNodesBase },
		rules: {
			...n8nNodesBase.configs.credentials.rules,
			// Its fixer turns any documentation URL into a camel-cased slug; the community rule
			// credential-documentation-url already checks that the URL is valid.
			'n8n-nodes-base/cred-class-field-documentation-url-miscased': 'off',
			'n8n-nodes-base/cred-class-field-documentation-url-not-http-url': 'off',
		},
	},
	// The n8n glue reaches the core only through its public index (src/core/index.ts), and
	// PostgreSQL only through the core: no other module of src/, and no `pg`.
	{
		files: ['nodes/**/*.ts', 'credentials/**/*.ts'],
		rules: {
			'no-restricted-imports': [
				'error',
				{
					paths: [
						{ name: 'pg', message: 'Talk to PostgreSQL through the core (src/core/index.ts).' },
					],
					patterns: [
						{
							group: ['pg/*'],
							message: 'Talk to PostgreSQL through the core (src/core/index.ts).',
						},
						{
							regex: '^(\\.\\./)+src(?!/core$)(/.*)?$',
							message: 'Import the core only through its public index: …/src/core.',
						},
					],
				},
			],
		},
	},
	{
		files: ['test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'],
		rules: {
			'@typescript-eslint/no-non-null-assertion': 'off',
		},
	},
);
