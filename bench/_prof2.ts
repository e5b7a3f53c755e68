import pg from 'pg';
import { v7 } from 'uuid';
import { migrate, JobStore } from '../src/core';
import { leaseQuery } from '../src/core/sql/lease';
import { completeQuery } from '../src/core/sql/complete';
const url = 'postgres://postgres@127.0.0.1:5432/postgres';
const S = 'prof_ours'; const s = '"prof_ours"';
async function fresh(pool: pg.Pool, n: number) {
  await pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`); await migrate(pool, S);
  const store = new JobStore(pool, { schema: S });
  for (let b = 0; b < n; b += 1000) await store.enqueue(Array.from({ length: Math.min(1000, n - b) }, (_, i) => ({ queue: 'bench', payload: { n: b + i } })));
  for (const t of ['jobs', 'job_attempts', 'job_counts']) await pool.query(`VACUUM ANALYZE ${s}.${t}`);
  await pool.query('CHECKPOINT');
  return store;
}
async function drainApi(store: JobStore, workers: number) {
  let n = 0; let tl = 0; let tc = 0;
  const w = async () => { for (;;) { let t = performance.now(); const jobs = await store.lease({ queue: 'bench', limit: 1 }); tl += performance.now() - t; if (!jobs.length) return; t = performance.now(); await store.complete(jobs.map((j) => ({ jobId: j.id, attemptId: j.attempt_id, outcome: 'succeeded' as const }))); tc += performance.now() - t; n++; } };
  const t0 = performance.now(); await Promise.all(Array.from({ length: workers }, w)); const ms = performance.now() - t0;
  return { n, jps: Math.round(n / ms * 1000), leaseMs: +(tl / n).toFixed(2), completeMs: +(tc / n).toFixed(2) };
}
async function drainPrepared(pool: pg.Pool, workers: number) {
  let n = 0; let tl = 0; let tc = 0;
  const w = async () => { for (;;) {
    let t = performance.now();
    const q = leaseQuery(s, { queue: 'bench', limit: 1, leaseMs: 60000, workflowId: null, executionId: null, attemptIds: [v7()], slots: 1 });
    const { rows } = await pool.query({ name: 'lease1', text: q.text, values: q.values }); tl += performance.now() - t; if (!rows.length) return;
    t = performance.now();
    const c = completeQuery(s, rows.map((r, ord) => ({ ord, job_id: r.id, attempt_id: r.attempt_id, outcome: 'succeeded' as const, result: null, error_code: null, error_message: null, error_class: null, error_node: null, error_workflow: null, error_execution: null, delay_ms: null, backoff_base_ms: 5000, backoff_max_ms: 3600000 })), 'callbacks');
    await pool.query({ name: 'complete1', text: c.text, values: c.values }); tc += performance.now() - t; n++; } };
  const t0 = performance.now(); await Promise.all(Array.from({ length: workers }, w)); const ms = performance.now() - t0;
  return { n, jps: Math.round(n / ms * 1000), leaseMs: +(tl / n).toFixed(2), completeMs: +(tc / n).toFixed(2) };
}
async function sampleWaits(pool: pg.Pool, until: () => boolean) {
  const counts = new Map<string, number>();
  while (!until()) {
    const { rows } = await pool.query(`SELECT coalesce(wait_event_type,'CPU') || ':' || coalesce(wait_event,'running') AS w FROM pg_stat_activity WHERE application_name = 'prof' AND state = 'active' AND pid <> pg_backend_pid()`);
    for (const r of rows) counts.set(r.w, (counts.get(r.w) ?? 0) + 1);
    await new Promise((r) => setTimeout(r, 5));
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 10);
}
async function main() {
  const pool = new pg.Pool({ connectionString: url, max: 10, application_name: 'prof' });
  const mon = new pg.Pool({ connectionString: url, max: 1 });
  const N = 4000;
  for (const workers of [1, 8]) {
    const store = await fresh(pool, N);
    let done = false; const waits = sampleWaits(mon, () => done);
    const a = await drainApi(store, workers); done = true;
    console.log(`API      w=${workers}`, a, await waits);
    await fresh(pool, N);
    done = false; const waits2 = sampleWaits(mon, () => done);
    const b = await drainPrepared(pool, workers); done = true;
    console.log(`PREPARED w=${workers}`, b, await waits2);
  }
  await pool.end(); await mon.end();
}
main().catch((e) => { console.error(e); process.exit(1); });
