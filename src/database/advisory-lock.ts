import type { DataSource } from 'typeorm';

/** Advisory lock keys: one per start-up step that several instances may run at the same moment. */
export const LOCKS = {
  migrations: 7_310_442_001,
  jobQueueSetup: 7_310_442_002,
  /** Retention's partitions, sweeps and tenant removals: one instance at a time. */
  retention: 7_310_442_003,
} as const;

/**
 * Runs `work` while holding a PostgreSQL session advisory lock, so that instances starting together
 * take turns (schema set-up run concurrently deadlocks or collides); the late ones find it done.
 */
export async function withAdvisoryLock<T>(db: DataSource, key: number, work: () => Promise<T>): Promise<T> {
  const runner = db.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [key]);
    return await work();
  } finally {
    await runner.query('SELECT pg_advisory_unlock($1)', [key]).catch(() => undefined);
    await runner.release();
  }
}

/**
 * Runs `work` only if no other session holds the lock (pg_try_advisory_lock): periodic work that one instance
 * at a time does. Answers null, without running it, when another instance is at it.
 */
export async function withTryAdvisoryLock<T>(db: DataSource, key: number, work: () => Promise<T>): Promise<T | null> {
  const runner = db.createQueryRunner();
  await runner.connect();
  try {
    const [{ locked }] = (await runner.query('SELECT pg_try_advisory_lock($1) AS locked', [key])) as Array<{ locked: boolean }>;
    if (!locked) return null;
    try {
      return await work();
    } finally {
      await runner.query('SELECT pg_advisory_unlock($1)', [key]).catch(() => undefined);
    }
  } finally {
    await runner.release();
  }
}
