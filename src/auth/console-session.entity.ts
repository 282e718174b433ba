import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'console_sessions' })
export class ConsoleSessionEntity {
  @PrimaryColumn({ type: 'uuid' })
  id: string;

  /** SHA-256 of the secret in the session cookie. */
  @Column({ name: 'token_hash', type: 'bytea' })
  tokenHash: Buffer;

  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;
}
