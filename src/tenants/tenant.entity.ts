import { Column, CreateDateColumn, Entity, PrimaryColumn, UpdateDateColumn } from 'typeorm';
import type { EnvironmentName } from '../config/environment-config.js';

export const DESIGNS = ['admin', 'users', 'admin+users'] as const;
export type Design = (typeof DESIGNS)[number];

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

  /** The secret before the last rotation: it signs too until eventsSecretPrevUntil (the overlap). */
  @Column({ name: 'events_secret_prev_enc', type: 'text', nullable: true })
  eventsSecretPrevEnc: string | null;

  @Column({ name: 'events_secret_prev_until', type: 'timestamptz', nullable: true })
  eventsSecretPrevUntil: Date | null;

  /** The event types delivered to the target; null: all. Events of other types are stored (state filtered), not delivered. */
  @Column({ name: 'event_types', type: 'jsonb', nullable: true })
  eventTypes: string[] | null;

  /** The target answered 410 Gone: nothing is delivered until eventsTargetUrl is set again. */
  @Column({ name: 'events_target_disabled', type: 'boolean', default: false })
  eventsTargetDisabled: boolean;

  /** How many days its events and their attempts are kept; null: EVENT_RETENTION_DAYS. */
  @Column({ name: 'event_retention_days', type: 'integer', nullable: true })
  eventRetentionDays: number | null;

  /** Its own upstream budgets per class (`{"read": "400/60s"}`, docs/quotas.md); null: its environment's (CWS_<ENV>_QUOTAS). */
  @Column({ type: 'jsonb', nullable: true })
  quotas: Record<string, string> | null;

  /** Synced records (docs/records.md): its own switch; null: SYNC_WORKFLOWS. */
  @Column({ name: 'sync_workflows', type: 'boolean', nullable: true })
  syncWorkflows: boolean | null;

  /** Set by DELETE: the tenant is gone for every caller at once; its rows are removed in the background. */
  @Column({ name: 'deleted_at', type: 'timestamptz', nullable: true })
  deletedAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
