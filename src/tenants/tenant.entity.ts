import { Column, CreateDateColumn, Entity, PrimaryColumn, UpdateDateColumn } from 'typeorm';
import type { EnvironmentName } from '../config/app-config.js';

export const DESIGNS = ['admin', 'users', 'admin+users'] as const;
export type Design = (typeof DESIGNS)[number];

/** A tenant id: a lower-case slug of at most 63 characters. */
export const TENANT_ID = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

@Entity({ name: 'tenants' })
export class TenantEntity {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text' })
  environment: EnvironmentName;

  @Column({ type: 'text' })
  design: Design;

  @Column({ name: 'allowed_return_urls', type: 'jsonb' })
  allowedReturnUrls: string[];

  @Column({ name: 'events_target_url', type: 'text', nullable: true })
  eventsTargetUrl: string | null;

  @Column({ name: 'events_secret_enc', type: 'text' })
  eventsSecretEnc: string;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
