// Probe: backend CPU of the claim (and the tick's count) per claimed row, at 1k and 1M connections, alternated.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { CLAIM_DUE_SQL, COUNT_DUE_SQL } from '../src/connections/store/renewal-lease.repository.js';
import { seedConnections, seedTenants, BIG_TENANT } from '../bench/scale-seed.js';
import { scratchDatabase } from '../bench/measure.js';
import { cpuMs } from '../bench/harness.js';

const CLAIM = process.env.CTID ? CLAIM_DUE_SQL.replace('SELECT id, tenant_id FROM connections', 'SELECT ctid, id, tenant_id FROM connections').replace('WHERE c.id = due.id', 'WHERE c.ctid = due.ctid') : CLAIM_DUE_SQL;
const SIZES = (process.env.SIZES ?? '1000,1000000').split(',').map(Number);
const ROUNDS = Number(process.env.ROUNDS ?? 15);
const keys = `k1:${randomBytes(32).toString('base64')}`;
const dbs = [];
for (const n of SIZES) {
  const s = await scratchDatabase('probe_claim');
  await seedTenants(s.db, keys, 10000);
  await seedConnections(s.db, keys, { tenants: 10000, connections: n, accessToken: 'x', accessExpiresAt: new Date(Date.now() + 3600e3) });
  for (const sql of (process.env.SETUP_SQL ?? '').split(';;').filter((x) => x.trim())) await s.db.query(sql);
  await s.db.query('VACUUM ANALYZE');
  await s.db.query('CHECKPOINT');
  const ids = (await s.db.query(`SELECT id FROM connections WHERE tenant_id = $1 AND status = 'active' ORDER BY created_at LIMIT 300`, [BIG_TENANT])).rows.map((r) => r.id);
  const c = new pg.Client({ connectionString: s.url, application_name: 'probe-claim' });
  await c.connect();
  const pid = (await c.query('SELECT pg_backend_pid() AS p')).rows[0].p;
  dbs.push({ n, s, c, pid, ids, per: [] as number[], countPer: [] as number[] });
  console.log(`seeded ${n}`);
}
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 === 0 ? dbs : [...dbs].reverse();
  for (const d of order) {
    await d.s.db.query(`UPDATE connections SET refresh_due_at = now() - interval '1 second', lease_until = NULL, lease_owner = NULL WHERE id = ANY($1::uuid[])`, [d.ids]);
    let claimed = 0;
    let t = cpuMs(d.pid);
    let countMs = 0;
    for (let k = 0; k < 3; k++) {
      const c0 = cpuMs(d.pid);
      await d.c.query({ name: 'count', text: COUNT_DUE_SQL, values: [64] });
      countMs += cpuMs(d.pid) - c0;
      const res = await d.c.query({ name: 'claim', text: CLAIM, values: ['probe', 60000, 100] });
      claimed += res.rowCount ?? 0;
    }
    const ms = cpuMs(d.pid) - t;
    if (claimed !== 300) throw new Error(`claimed ${claimed}`);
    if (r > 0) { d.per.push(((ms - countMs) * 1000) / claimed); d.countPer.push((countMs * 1000) / 3); }
    await d.s.db.query(`UPDATE connections SET refresh_due_at = now() + interval '1 day', lease_until = NULL, lease_owner = NULL WHERE id = ANY($1::uuid[])`, [d.ids]);
  }
}
for (const d of dbs) {
  await d.s.db.query(`UPDATE connections SET refresh_due_at = now() - interval '1 second', lease_until = NULL, lease_owner = NULL WHERE id = ANY($1::uuid[])`, [d.ids]);
  const plan = (await d.c.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${CLAIM.replace('$1', "'x'").replace('$2', '60000').replace('$3', '100')}`)).rows.map((r) => r['QUERY PLAN']).join('\n');
  const st = (await d.s.db.query(`SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'connections'`)).rows[0];
  const ix = (await d.s.db.query(`SELECT indexrelname, pg_relation_size(indexrelid) AS b FROM pg_stat_user_indexes WHERE relname = 'connections'`)).rows;
  console.log(`--- ${d.n}: upd ${st.n_tup_upd} hot ${st.n_tup_hot_upd}; indexes ${ix.map((r) => r.indexrelname + ' ' + Math.round(r.b / 8192)).join(', ')}\n${plan}`);
}
const med = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
for (const d of dbs) {
  console.log(`${d.n}: claim µs per row median ${med(d.per).toFixed(1)} [${d.per.map((x) => x.toFixed(0)).join(' ')}]; count µs median ${med(d.countPer).toFixed(1)}`);
  await d.c.end();
  await d.s.drop();
}
