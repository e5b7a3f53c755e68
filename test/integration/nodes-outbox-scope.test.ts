import type pg from 'pg';

import { closeAllPools } from '../../src/core';
import { OutboxWrite } from '../../nodes/OutboxWrite/OutboxWrite.node';
import { databaseUrl, dropSchema, newPool, testSchema } from '../helpers/db';
import { nodeRunner } from '../helpers/n8n-context';

const schema = testSchema(__filename);
const nodes = nodeRunner(schema);
let pool: pg.Pool;

beforeAll(async () => {
	pool = newPool();
	await dropSchema(pool, schema);
});

afterAll(async () => {
	await closeAllPools();
	await dropSchema(pool, schema);
	await pool.end();
});

describe('Outbox Write: where "SQL to Run in the Same Transaction" runs', () => {
	it("in the credential's database, as its user, on that user's search path, which lacks the credential's schema", async () => {
		const url = new URL(databaseUrl());
		const result = await nodes.run(new OutboxWrite(), {
			items: [{ id: 'scope-1' }],
			parameters: {
				eventType: 'probe',
				companionSql:
					"SELECT current_database() AS db, current_user AS role, current_schemas(false) AS path, current_setting('search_path') AS search_path",
			},
		});
		const rows = (
			result.output('main')[0].json.outbox as { sql_rows: Array<Record<string, unknown>> }
		).sql_rows;
		expect(rows).toHaveLength(1);
		expect(rows[0].db).toBe(decodeURIComponent(url.pathname.slice(1) || 'postgres'));
		expect(rows[0].role).toBe(decodeURIComponent(url.username || process.env.USER || 'postgres'));
		const { rows: defaults } = await pool.query<{ search_path: string }>(
			"SELECT current_setting('search_path') AS search_path",
		);
		expect(rows[0].search_path).toBe(defaults[0].search_path);
		expect(rows[0].path).not.toContain(schema);
	});
});
