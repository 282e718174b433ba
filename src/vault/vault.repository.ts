import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { SealedColumn } from './sealed-columns.js';

export interface SealedValue {
  id: string;
  value: string;
  /** The owner tenant (SealedColumn.tenantColumn). */
  tenantId: string;
}

/**
 * What a re-encryption moves: `ring-key`, values in the ring's format not under the active key (a ring rotation while
 * the ring seals); `tenant-keys`, every value in the ring's format, to its tenant's data key (after an upgrade);
 * `ring`, every value under a tenant's data key and every ring value not under the active key, to the ring's active
 * key (before a rollback to release 0.2.0, which reads only the ring's format).
 */
export type ReencryptTarget = 'ring-key' | 'tenant-keys' | 'ring';

export interface KeyCheck {
  kid: string;
  /** null: recorded from existing data by the migration, not yet verified by a start with that key. */
  checkEnc: string | null;
}

export interface SealedChange {
  id: string;
  previous: string;
  next: string;
}

/**
 * The vault's only data access: raw SQL over the sealed columns of other modules' tables. Identifiers come
 * only from SEALED_COLUMNS and are quoted anyway; every value goes in as a parameter.
 */
@Injectable()
export class VaultRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** The sealed columns whose table and columns exist: tables of modules not migrated yet are left out. */
  async existingColumns(columns: readonly SealedColumn[]): Promise<SealedColumn[]> {
    const rows = await this.db.query<Array<{ table_name: string; column_name: string }>>(
      `SELECT table_name, column_name FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = ANY($1::text[])`,
      [[...new Set(columns.map((c) => c.table))]],
    );
    const present = new Set(rows.map((r) => `${r.table_name}.${r.column_name}`));
    return columns.filter((c) => present.has(`${c.table}.${c.idColumn}`) && present.has(`${c.table}.${c.column}`));
  }

  async listKeyChecks(): Promise<KeyCheck[]> {
    const rows = await this.db.query<Array<{ kid: string; check_enc: string | null }>>(
      `SELECT kid, check_enc FROM vault_key_checks ORDER BY kid`,
    );
    return rows.map((r) => ({ kid: r.kid, checkEnc: r.check_enc }));
  }

  /**
   * Records the check value of a key id unless one is recorded already (another instance may have been
   * first, possibly with other key bytes): returns the check value that is stored now.
   */
  async recordKeyCheck(kid: string, checkEnc: string): Promise<string> {
    const rows = await this.db.query<Array<{ check_enc: string }>>(
      `INSERT INTO vault_key_checks (kid, check_enc) VALUES ($1, $2)
       ON CONFLICT (kid) DO UPDATE SET check_enc = COALESCE(vault_key_checks.check_enc, EXCLUDED.check_enc)
       RETURNING check_enc`,
      [kid, checkEnc],
    );
    return rows[0].check_enc;
  }

  async forgetKeyCheck(kid: string): Promise<void> {
    await this.db.query(`DELETE FROM vault_key_checks WHERE kid = $1`, [kid]);
  }

  /** One value sealed under `kid`, if any (a scan when there is none: only at start, for a key id that needs it). */
  async findOneUnderKey(col: SealedColumn, kid: string): Promise<SealedValue | null> {
    const rows = await this.db.query<SealedValue[]>(
      `SELECT ${ident(col.idColumn)}::text AS id, ${ident(col.column)} AS value, ${ident(col.tenantColumn)}::text AS "tenantId"
         FROM ${ident(col.table)} WHERE ${ident(col.column)} LIKE $1 ESCAPE '\\' LIMIT 1`,
      [keyPrefixPattern(kid)],
    );
    return rows[0] ?? null;
  }

  /**
   * Rows whose value `target` would move (see ReencryptTarget): in the ring's format not under `kid`, and so on.
   * `passOver`: tenants whose values never move to or from a data key (deleted ones: their data keys are destroyed).
   */
  async countNotUnderKey(
    col: SealedColumn,
    kid: string,
    target: ReencryptTarget = 'ring-key',
    passOver: readonly string[] = [],
  ): Promise<number> {
    const rows = await this.db.query<Array<{ n: number }>>(`SELECT count(*)::int AS n FROM ${ident(col.table)} WHERE ${notUnderKey(col)}`, [
      keyPrefixPattern(kid),
      target,
      passOver,
    ]);
    return rows[0].n;
  }

  /** The first `limit` rows (by id) that countNotUnderKey counts. */
  async findNotUnderKey(
    col: SealedColumn,
    kid: string,
    limit: number,
    target: ReencryptTarget = 'ring-key',
    passOver: readonly string[] = [],
  ): Promise<SealedValue[]> {
    return this.db.query<SealedValue[]>(
      `SELECT ${ident(col.idColumn)}::text AS id, ${ident(col.column)} AS value, ${ident(col.tenantColumn)}::text AS "tenantId"
         FROM ${ident(col.table)} WHERE ${notUnderKey(col)} ORDER BY ${ident(col.idColumn)} LIMIT $4`,
      [keyPrefixPattern(kid), target, passOver, limit],
    );
  }

  /** Per tenant, how many values are in each format: `v1` (the ring) or `v2/<version>` (the tenant's data key). */
  async formatsByTenant(col: SealedColumn): Promise<Array<{ tenantId: string; format: string; n: number }>> {
    return this.db.query<Array<{ tenantId: string; format: string; n: number }>>(
      `SELECT ${ident(col.tenantColumn)}::text AS "tenantId",
              CASE WHEN ${ident(col.column)} LIKE 'v2.%' THEN 'v2/' || split_part(${ident(col.column)}, '.', 2) ELSE 'v1' END AS format,
              count(*)::int AS n
         FROM ${ident(col.table)} WHERE ${ident(col.column)} IS NOT NULL GROUP BY 1, 2`,
    );
  }

  /** How many of the tenant's values are sealed under version `version` of its data key. */
  async countUnderVersion(col: SealedColumn, tenantId: string, version: number): Promise<number> {
    const rows = await this.db.query<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM ${ident(col.table)} WHERE ${ident(col.tenantColumn)}::text = $1 AND ${ident(col.column)} LIKE $2`,
      [tenantId, `v2.${version}.%`],
    );
    return rows[0].n;
  }

  /**
   * The first `limit` rows of the tenant (by id, after `after` when given) sealed other than under version `version`
   * of its data key: under an older version, or in the ring's format (keys rotate).
   */
  async findUnderOtherVersion(
    col: SealedColumn,
    tenantId: string,
    version: number,
    limit: number,
    after: string | null = null,
  ): Promise<SealedValue[]> {
    const from = after === null ? '' : `AND ${ident(col.idColumn)} > $4`;
    return this.db.query<SealedValue[]>(
      `SELECT ${ident(col.idColumn)}::text AS id, ${ident(col.column)} AS value, ${ident(col.tenantColumn)}::text AS "tenantId"
         FROM ${ident(col.table)}
        WHERE ${ident(col.tenantColumn)}::text = $1 AND ${ident(col.column)} IS NOT NULL
          AND NOT (${ident(col.column)} LIKE $2) ${from} ORDER BY ${ident(col.idColumn)} LIMIT $3`,
      after === null ? [tenantId, `v2.${version}.%`, limit] : [tenantId, `v2.${version}.%`, limit, after],
    );
  }

  /** How many rows findUnderOtherVersion would walk (none left: the tenant's values are all under `version`). */
  async countUnderOtherVersion(col: SealedColumn, tenantId: string, version: number): Promise<number> {
    const rows = await this.db.query<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM ${ident(col.table)}
        WHERE ${ident(col.tenantColumn)}::text = $1 AND ${ident(col.column)} IS NOT NULL AND NOT (${ident(col.column)} LIKE $2)`,
      [tenantId, `v2.${version}.%`],
    );
    return rows[0].n;
  }

  /**
   * Compare-and-swap, one transaction per call: each row gets its new value only if it still holds the
   * value that was read. A running instance may have rewritten a secret meanwhile (a token renewal); its
   * value is newer and must win. Returns the number of rows updated; the others were left alone.
   */
  async replaceIfUnchanged(col: SealedColumn, changes: readonly SealedChange[]): Promise<number> {
    const sql = `UPDATE ${ident(col.table)} SET ${ident(col.column)} = $1 WHERE ${ident(col.idColumn)} = $2 AND ${ident(col.column)} = $3`;
    return this.db.transaction(async (tx) => {
      let updated = 0;
      for (const c of changes) {
        // For an UPDATE, TypeORM's raw result is [rows, rowCount].
        const [, affected] = await tx.query<[unknown, number]>(sql, [c.next, c.id, c.previous]);
        updated += affected;
      }
      return updated;
    });
  }
}

/**
 * $1: the active kid's prefix; $2: the ReencryptTarget; $3: tenants passed over. A passed-over tenant's rows (a deleted
 * one's, until the purge takes them) move from one ring key to another like any other (the ring opens and seals
 * them), but never to or from a data key.
 */
function notUnderKey(col: SealedColumn): string {
  const c = ident(col.column);
  return `${c} IS NOT NULL AND (
    (${c} LIKE 'v1.%' AND ($2::text = 'tenant-keys' OR ${c} NOT LIKE $1 ESCAPE '\\')) OR ($2::text = 'ring' AND ${c} LIKE 'v2.%'))
    AND NOT (($2::text = 'tenant-keys' OR ${c} LIKE 'v2.%') AND ${ident(col.tenantColumn)}::text = ANY($3::text[]))`;
}

function keyPrefixPattern(kid: string): string {
  return `v1.${kid.replace(/[\\%_]/g, (c) => `\\${c}`)}.%`;
}

function ident(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
