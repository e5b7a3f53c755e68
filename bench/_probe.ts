import { PgBoss } from 'pg-boss';
import { makeWorkerUtils, runOnce } from 'graphile-worker';
import pg from 'pg';
const url = 'postgres://postgres@127.0.0.1:5432/postgres';
async function main() {
  const pool = new pg.Pool({ connectionString: url });
  await pool.query('DROP SCHEMA IF EXISTS probe_boss CASCADE; DROP SCHEMA IF EXISTS probe_gw CASCADE');
  const boss = new PgBoss({ connectionString: url, schema: 'probe_boss', supervise: false, schedule: false, registerInstance: false, max: 10 });
  boss.on('error', (e) => console.error('boss error', e));
  await boss.start();
  await boss.createQueue('q');
  const ids = await boss.insert('q', Array.from({ length: 5 }, (_, i) => ({ data: { n: i } })), { returnId: true });
  console.log('inserted', ids);
  const jobs = await boss.fetch('q', { batchSize: 2 });
  console.log('fetched', jobs);
  console.log(await boss.complete('q', jobs.map((j) => j.id)));
  console.log(await boss.getQueueStats('q'));
  await boss.stop({ graceful: false });
  const utils = await makeWorkerUtils({ pgPool: pool, schema: 'probe_gw' });
  await utils.migrate();
  const added = await utils.addJobs([{ identifier: 'noop', payload: { n: 1 } }, { identifier: 'noop', payload: { n: 2 } }]);
  console.log('gw added', added.length);
  let count = 0;
  await runOnce({ pgPool: pool, schema: 'probe_gw', concurrentJobs: 2, noHandleSignals: true, taskList: { noop: async () => { count++; } } });
  console.log('gw ran', count);
  await utils.release();
  await pool.end();
}
main().catch((e) => { console.error(e); process.exit(1); });
