// What one agent tool call's audit row costs, by the size of the group it commits in: CPU per row of this process
// and of its PostgreSQL backend, AuditLogRepository.insertMany (the statement AuditService's group commit runs) on
// TypeORM's pg pool, groups written one after another as the app does with one group in flight. A group holds the
// calls that arrived while the one before it was committing, so its size follows the calls in flight
// (docs/agents.md, "Cost").
//   npx tsx bench/audit-groups.ts      (DATABASE_URL: a PostgreSQL server to create a scratch database on)
// Env: AUDIT_GROUP_SIZES (1,5,20,100), AUDIT_ROWS (20000 per size and round), AUDIT_ROUNDS (3). Not part of `npm test`.
import 'reflect-metadata';
import { randomBytes, randomUUID } from 'node:crypto';
import type pg from 'pg';
import { DataSource } from 'typeorm';
import { AuditLogRepository } from '../src/audit/audit-log.repository.js';
import type { AuditRecord } from '../src/audit/audit-entry.js';
import { runMigrations } from '../src/database/migrate.js';
import { cpuMs, finish, median, withScratchDatabase } from './harness.js';

const SIZES = (process.env.AUDIT_GROUP_SIZES ?? '1,5,20,100').split(',').map(Number);
const ROWS = Number(process.env.AUDIT_ROWS ?? 20_000);
const ROUNDS = Number(process.env.AUDIT_ROUNDS ?? 3);

/** A tool call's row, as AgentToolRunner writes it. */
function row(): { id: string; at: Date; record: AuditRecord } {
  return {
    id: randomUUID(),
    at: new Date(),
    record: {
      action: 'agent.tool_call',
      actor: { kind: 'agent_session', id: randomUUID() },
      tenantId: 'bench',
      target: 'tools/facadeListWorkflows',
      userId: 'u-alice',
      requestId: randomUUID(),
      outcome: 'success',
      status: 200,
      traceId: randomBytes(16).toString('hex'),
    },
  };
}

async function run(url: string, admin: pg.Client): Promise<void> {
  const ds = new DataSource({ type: 'postgres', url, extra: { max: 1 } });
  try {
    await runMigrations(url);
    await ds.initialize();
    const repo = new AuditLogRepository(ds);
    for (let i = 0; i < 200; i++) await repo.insertMany([row(), row()]); // warm-up: JIT, the statement prepared
    const database = new URL(url).pathname.slice(1);
    const pids = (await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, [database])).rows.map(
      (r) => r.pid,
    );
    console.log('| rows per group | app µs/row | database µs/row | both |');
    console.log('|---:|---:|---:|---:|');
    for (const size of SIZES) {
      const app: number[] = [];
      const db: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const groups = Array.from({ length: Math.ceil(ROWS / size) }, () => Array.from({ length: size }, row));
        const dbBefore = pids.reduce((s, p) => s + cpuMs(p), 0);
        const before = process.cpuUsage();
        for (const g of groups) await repo.insertMany(g);
        const used = process.cpuUsage(before);
        const n = groups.length * size;
        app.push((used.user + used.system) / n);
        db.push(((pids.reduce((s, p) => s + cpuMs(p), 0) - dbBefore) * 1000) / n);
      }
      const [a, d] = [median(app), median(db)];
      console.log(`| ${size} | ${a.toFixed(1)} | ${d.toFixed(1)} | ${(a + d).toFixed(1)} |`);
    }
  } finally {
    await ds.destroy().catch(() => undefined);
  }
}

finish(withScratchDatabase('cws_audit', run));
