import pg from 'pg';
import { migrate, JobStore } from '../src/core';
import { completeQuery } from '../src/core/sql/complete';
const url = 'postgres://postgres@127.0.0.1:5432/postgres';
const S = 'exp_ours'; const s = '"exp_ours"';
async function main() {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  await pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`); await migrate(pool, S);
  const store = new JobStore(pool, { schema: S });
  for (let b = 0; b < 20; b++) await store.enqueue(Array.from({ length: 1000 }, (_, i) => ({ queue: 'bench', payload: { n: i } })));
  for (const t of ['jobs', 'job_attempts', 'job_counts']) await pool.query(`VACUUM ANALYZE ${s}.${t}`);
  // drain half to have a realistic mid-drain state
  for (let i = 0; i < 100; i++) { const jobs = await store.lease({ queue: 'bench', limit: 100 }); await store.complete(jobs.map((j) => ({ jobId: j.id, attemptId: j.attempt_id, outcome: 'succeeded' as const }))); }
  const jobs = await store.lease({ queue: 'bench', limit: 100 });
  const cq = completeQuery(s, jobs.map((job, ord) => ({ ord, job_id: job.id, attempt_id: job.attempt_id, outcome: 'succeeded' as const, result: null, error_code: null, error_message: null, error_class: null, error_node: null, error_workflow: null, error_execution: null, delay_ms: null, backoff_base_ms: 5000, backoff_max_ms: 3600000 })), 'callbacks');
  const c = await pool.connect();
  await c.query('BEGIN');
  const cp = (await c.query('EXPLAIN (ANALYZE, BUFFERS) ' + cq.text, cq.values)).rows.map((r) => r['QUERY PLAN'] as string);
  await c.query('ROLLBACK');
  console.log(cp.join('\n'));
  c.release();
  await pool.query(`DROP SCHEMA ${s} CASCADE`);
  await pool.end();
}
main().catch((e) => { console.error(e); process.exit(1); });
