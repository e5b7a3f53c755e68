import { defineConfig } from 'vitest/config';

export default defineConfig({
	test: {
		// Each integration file gets its own schema, so files can run side by side; two at a
		// time fits the 2-core machines this runs on. End-to-end files each start an n8n and
		// run one at a time (npm run test:e2e passes --no-file-parallelism).
		maxWorkers: 2,
		minWorkers: 1,
		projects: [
			{
				test: {
					name: 'unit',
					include: ['test/unit/**/*.test.ts'],
					environment: 'node',
				},
			},
			{
				test: {
					name: 'integration',
					include: ['test/integration/**/*.test.ts'],
					environment: 'node',
					globalSetup: ['test/helpers/global-postgres.ts'],
					testTimeout: 120_000,
					hookTimeout: 120_000,
				},
			},
			{
				test: {
					name: 'e2e',
					include: ['test/e2e/**/*.test.ts'],
					environment: 'node',
					globalSetup: ['test/helpers/global-postgres.ts'],
					testTimeout: 20 * 60_000,
					hookTimeout: 20 * 60_000,
				},
			},
		],
	},
});
