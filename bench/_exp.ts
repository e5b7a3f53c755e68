import pg from 'pg';
import { v7 } from 'uuid';
import { migrate, JobStore } from '../src/core';
import { leaseQuery } from '../src/core/sql/lease';
import { completeQuery } from '../src/core/sql/complete';
const url = 'postgres://postgres@127.0.0.1:5432/postgres';
const S = 'exp_ours'; const s = '"exp_ours"';
const RET = Number(process.env.RET ?? 300000);
async function main() {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  await pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`); await migrate(pool, S);
  const store = new JobStore(pool, { schema: S });
  if (RET > 0) {
    await pool.query(`INSERT INTO ${s}.jobs (id, queue, payload, attempts, attempt_id, started_at) SELECT gen_random_uuid(), 'bench', jsonb_build_object('n', g), 1, gen_random_uuid(), now() FROM generate_series(1, $1::int) g`, [RET]);
    await pool.query(`INSERT INTO ${s}.job_attempts (attempt_id, job_id, attempt, started_at, finished_at, outcome) SELECT attempt_id, id, 1, now(), now(), 'succeeded' FROM ${s}.jobs`);
    await pool.query(`UPDATE ${s}.jobs SET status = 'done', finished_at = now() WHERE status = 'queued'`);
  }
  for (let b = 0; b < 3; b++) await store.enqueue(Array.from({ length: 1000 }, (_, i) => ({ queue: 'bench', payload: { n: i } })));
  // some running jobs, as in a live system with long workflows
  await store.lease({ queue: 'bench', limit: 1000, leaseMs: 3600000 });
  for (const t of ['jobs', 'job_attempts', 'job_counts']) await pool.query(`VACUUM ANALYZE ${s}.${t}`);
  const N = 300; let tl = 0, tc = 0;
  for (let i = 0; i < N; i++) {
    let t = performance.now(); const [job] = await store.lease({ queue: 'bench', limit: 1 }); tl += performance.now() - t;
    t = performance.now(); await store.complete([{ jobId: job.id, attemptId: job.attempt_id, outcome: 'succeeded' }]); tc += performance.now() - t;
  }
  console.log(`retained=${RET} running=1000: lease ${(tl / N).toFixed(2)} ms, complete ${(tc / N).toFixed(2)} ms per call`);
  const c = await pool.connect();
  const q = leaseQuery(s, { queue: 'bench', limit: 1, leaseMs: 60000, workflowId: null, executionId: null, attemptIds: [v7()], slots: 1 });
  await c.query('BEGIN');
  const lp = (await c.query('EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ' + q.text, q.values)).rows.map((r) => r['QUERY PLAN'] as string);
  await c.query('ROLLBACK');
  console.log('LEASE scans:\n' + lp.filter((l) => /Scan|Time|Buffers: shared/.test(l) && !/CTE Scan/.test(l)).join('\n'));
  const [job] = await store.lease({ queue: 'bench', limit: 1 });
  const cq = completeQuery(s, [{ ord: 0, job_id: job.id, attempt_id: job.attempt_id, outcome: 'succeeded', result: null, error_code: null, error_message: null, error_class: null, error_node: null, error_workflow: null, error_execution: null, delay_ms: null, backoff_base_ms: 5000, backoff_max_ms: 3600000 }], 'callbacks');
  await c.query('BEGIN');
  const cp = (await c.query('EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ' + cq.text, cq.values)).rows.map((r) => r['QUERY PLAN'] as string);
  await c.query('ROLLBACK');
  console.log('COMPLETE scans:\n' + cp.filter((l) => /Scan|Time|Buffers: shared|Rows Removed/.test(l) && !/CTE Scan/.test(l)).join('\n'));
  c.release();
  await pool.query(`DROP SCHEMA ${s} CASCADE`);
  await pool.end();
}
main().catch((e) => { console.error(e); process.exit(1); });
