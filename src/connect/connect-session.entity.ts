import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';
import type { ConnectionKind } from '../connections/store/connection.entity.js';

@Entity({ name: 'connect_sessions' })
export class ConnectSessionEntity {
  @PrimaryColumn({ type: 'uuid' })
  id: string;

  @Column({ name: 'tenant_id', type: 'text' })
  tenantId: string;

  @Column({ type: 'text' })
  kind: ConnectionKind;

  @Column({ name: 'user_id', type: 'text', nullable: true })
  userId: string | null;

  @Column({ name: 'return_url', type: 'text' })
  returnUrl: string;

  @Column({ type: 'jsonb' })
  scopes: string[];

  /** SHA-256 of the secret in the connect URL. */
  @Column({ name: 'token_hash', type: 'bytea' })
  tokenHash: Buffer;

  /** SHA-256 of the OAuth state, set when the browser opens the connect URL. */
  @Column({ name: 'state_hash', type: 'bytea', nullable: true })
  stateHash: Buffer | null;

  /** SHA-256 of the value in the browser-binding cookie set with the state (connect-state.store.ts). */
  @Column({ name: 'browser_hash', type: 'bytea', nullable: true })
  browserHash: Buffer | null;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true })
  startedAt: Date | null;

  @Column({ name: 'state_expires_at', type: 'timestamptz', nullable: true })
  stateExpiresAt: Date | null;

  /** `popup` when the browser module runs the flow in a popup (the callback ends on the completion page). */
  @Column({ type: 'text', nullable: true })
  display: 'popup' | null;

  @Column({ name: 'completed_at', type: 'timestamptz', nullable: true })
  completedAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
