import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One row per vault key id the database holds values under: a check value sealed with that key (the start-up
 * check opens it, so a wrong VAULT_KEYS is refused before anything is served). Existing data gets a row per
 * key id found in it, with no check value yet: the first start that holds the key fills it in after opening
 * one of those values. Key ids are read from the sealed text `v1.<kid>.<iv>.<ciphertext>.<tag>`.
 */
export class CreateVaultKeyChecks1796200000000 implements MigrationInterface {
  name = 'CreateVaultKeyChecks1796200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE vault_key_checks (
        kid        text PRIMARY KEY,
        check_enc  text,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      INSERT INTO vault_key_checks (kid)
      SELECT DISTINCT split_part(v, '.', 2) FROM (
        SELECT events_secret_enc AS v FROM tenants
        UNION ALL SELECT access_token_enc FROM connections
        UNION ALL SELECT refresh_token_enc FROM connections
        UNION ALL SELECT secret_enc FROM webhook_receivers
      ) sealed
      WHERE v LIKE 'v1.%'
      ON CONFLICT DO NOTHING`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE vault_key_checks`);
  }
}
