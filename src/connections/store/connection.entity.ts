import { Column, CreateDateColumn, Entity, PrimaryColumn, UpdateDateColumn } from 'typeorm';

export type ConnectionKind = 'admin' | 'user';
export type ConnectionStatus = 'active' | 'reauth_required';

@Entity({ name: 'connections' })
export class ConnectionEntity {
  @PrimaryColumn({ type: 'uuid' })
  id: string;

  @Column({ name: 'tenant_id', type: 'text' })
  tenantId: string;

  @Column({ type: 'text' })
  kind: ConnectionKind;

  /** The partner's own user id; null for the admin connection. */
  @Column({ name: 'user_id', type: 'text', nullable: true })
  userId: string | null;

  @Column({ name: 'upstream_user_id', type: 'text' })
  upstreamUserId: string;

  @Column({ name: 'upstream_email', type: 'text', nullable: true })
  upstreamEmail: string | null;

  @Column({ name: 'upstream_username', type: 'text', nullable: true })
  upstreamUsername: string | null;

  @Column({ name: 'is_admin', type: 'boolean' })
  isAdmin: boolean;

  @Column({ type: 'text' })
  status: ConnectionStatus;

  @Column({ name: 'status_reason', type: 'text', nullable: true })
  statusReason: string | null;

  @Column({ type: 'jsonb' })
  scopes: string[];

  @Column({ name: 'access_token_enc', type: 'text', nullable: true })
  accessTokenEnc: string | null;

  @Column({ name: 'refresh_token_enc', type: 'text', nullable: true })
  refreshTokenEnc: string | null;

  @Column({ name: 'access_token_expires_at', type: 'timestamptz', nullable: true })
  accessTokenExpiresAt: Date | null;

  /** When the scheduler renews it: REFRESH_AT of the lifetime, with jitter. */
  @Column({ name: 'refresh_due_at', type: 'timestamptz', nullable: true })
  refreshDueAt: Date | null;

  @Column({ name: 'last_refreshed_at', type: 'timestamptz', nullable: true })
  lastRefreshedAt: Date | null;

  @Column({ name: 'refresh_failures', type: 'integer' })
  refreshFailures: number;

  /** Bumped by every token write; renewals save with a compare-and-swap on it. */
  @Column({ type: 'bigint', transformer: { to: (v: number) => v, from: (v: string | number) => Number(v) } })
  version: number;

  @Column({ name: 'lease_owner', type: 'text', nullable: true })
  leaseOwner: string | null;

  @Column({ name: 'lease_until', type: 'timestamptz', nullable: true })
  leaseUntil: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
