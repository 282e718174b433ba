import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

export interface LiveInstance {
  instanceId: string;
  keyIds: string[];
}

/**
 * The vault_instances table: each live instance's key ids, with its heartbeat. Every time is the database's
 * (now()), so clocks that differ between hosts cannot make a live instance look gone.
 */
@Injectable()
export class VaultInstancesRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** Records that `instanceId` is alive and holds `keyIds`, deletes rows unseen for `expiryMs`, returns the live ones (itself included). */
  async heartbeat(instanceId: string, keyIds: readonly string[], expiryMs: number): Promise<LiveInstance[]> {
    await this.db.query(
      `INSERT INTO vault_instances (instance_id, key_ids, last_seen) VALUES ($1, $2::text[], now())
       ON CONFLICT (instance_id) DO UPDATE SET key_ids = EXCLUDED.key_ids, last_seen = now()`,
      [instanceId, keyIds],
    );
    await this.db.query(`DELETE FROM vault_instances WHERE last_seen < now() - make_interval(secs => $1::double precision / 1000)`, [
      expiryMs,
    ]);
    return this.live(expiryMs);
  }

  /** The instances seen within `expiryMs`. */
  async live(expiryMs: number): Promise<LiveInstance[]> {
    const rows = await this.db.query<Array<{ instance_id: string; key_ids: string[] }>>(
      `SELECT instance_id, key_ids FROM vault_instances
        WHERE last_seen >= now() - make_interval(secs => $1::double precision / 1000) ORDER BY instance_id`,
      [expiryMs],
    );
    return rows.map((r) => ({ instanceId: r.instance_id, keyIds: r.key_ids }));
  }

  /**
   * A row that stays live until it is removed (last_seen 'infinity'): `vault:reencrypt --to-ring` records one holding
   * the ring's key ids without the envelope format, so running instances seal with the ring until it is removed.
   */
  async hold(instanceId: string, keyIds: readonly string[]): Promise<void> {
    await this.db.query(
      `INSERT INTO vault_instances (instance_id, key_ids, last_seen) VALUES ($1, $2::text[], 'infinity')
       ON CONFLICT (instance_id) DO UPDATE SET key_ids = EXCLUDED.key_ids, last_seen = 'infinity'`,
      [instanceId, keyIds],
    );
  }

  async remove(instanceId: string): Promise<void> {
    await this.db.query(`DELETE FROM vault_instances WHERE instance_id = $1`, [instanceId]);
  }
}
