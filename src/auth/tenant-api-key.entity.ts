import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'tenant_api_keys' })
export class TenantApiKeyEntity {
  @PrimaryColumn({ type: 'uuid' })
  id: string;

  @Column({ name: 'tenant_id', type: 'text' })
  tenantId: string;

  @Column({ type: 'text', nullable: true })
  name: string | null;

  /** The first characters of the key, shown in lists and used to find candidates without the hash. */
  @Column({ name: 'key_prefix', type: 'text' })
  keyPrefix: string;

  /** SHA-256 of the whole key; the key itself is never stored. */
  @Column({ name: 'key_hash', type: 'bytea' })
  keyHash: Buffer;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'last_used_at', type: 'timestamptz', nullable: true })
  lastUsedAt: Date | null;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt: Date | null;
}
