import type pg from 'pg';

/**
 * The plans of the statements a call runs inside functions (e.g. queue_stats), which EXPLAIN of
 * the call does not show. auto_explain (a contrib module; LOAD needs a superuser) logs them,
 * and client_min_messages = log sends those log lines to this connection as notices. Returns
 * every notice the call raised, outer statement included; throws when auto_explain cannot be
 * loaded.
 */
export async function loggedPlans(
	pool: pg.Pool,
	text: string,
	values: unknown[] = [],
	options: { analyze?: boolean } = {},
): Promise<string[]> {
	const client = await pool.connect();
	const notices: string[] = [];
	const onNotice = (notice: { message?: string }) => {
		if (notice.message) notices.push(notice.message);
	};
	client.on('notice', onNotice);
	try {
		await client.query(`LOAD 'auto_explain'`);
		await client.query('SET auto_explain.log_min_duration = 0');
		await client.query('SET auto_explain.log_nested_statements = on');
		if (options.analyze) {
			await client.query('SET auto_explain.log_analyze = on');
			await client.query('SET auto_explain.log_buffers = on');
		}
		await client.query('SET client_min_messages = log');
		await client.query(text, values);
		return notices;
	} finally {
		client.off('notice', onNotice);
		// The session settings must not leak into the pool.
		client.release(true);
	}
}
