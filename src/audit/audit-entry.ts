/**
 * What the audit trail records (docs/api.md section 4): every change of credentials or data. An action is
 * named `<what>.<done>`; a failed attempt keeps the action's name with outcome `failure`.
 */
export const AUDIT_ACTIONS = [
  'tenant.created',
  'tenant.updated',
  'tenant.deleted',
  'api_key.created',
  'api_key.revoked',
  'events_secret.rotated',
  'endpoint.created',
  'endpoint.updated',
  'endpoint.deleted',
  'endpoint.secret_rotated',
  'endpoint.failing',
  'endpoint.disabled',
  'endpoint.recovered',
  'webhook.provisioned',
  'connection.created',
  'connection.reconnected',
  'connection.deleted',
  'user.erased',
  'console.login',
  'console.logout',
  'agent_session.created',
  'agent_session.revoked',
  'agent.tool_call',
  'kek.rotation_started',
  'kek.rotation_finished',
  'tenant_key.rotated',
  'tenant_key.resealed',
  'tenant_key.retired',
  'tenant_key.destroyed',
  'tenant_key.kek_set',
  'vault.reencrypt_started',
  'vault.reencrypt_finished',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export const ACTOR_KINDS = ['operator', 'tenant_key', 'console', 'connect_session', 'agent_session', 'service'] as const;
export type ActorKind = (typeof ACTOR_KINDS)[number];

/**
 * Who acted, never by a secret: the operator key is `operator` (the key itself names nobody else), a tenant
 * key by its id, a console session by its id (null for a sign-in that failed: there is no session), and the
 * browser that completed a connect session by that session's id, an AI agent by its agent session's id; cws-connect
 * itself (`service`, id null) for what it does on its own (an event endpoint disabled after failing, docs/endpoints.md).
 */
export interface AuditActor {
  kind: ActorKind;
  id: string | null;
}

export type AuditOutcome = 'success' | 'failure';

/** What a key operation did, in ids, versions and counts (docs/keys.md, "Audit rows"); never key material. */
export type AuditDetails = Record<string, string | number | boolean | number[]>;

export interface AuditRecord {
  action: AuditAction;
  actor: AuditActor;
  tenantId: string | null;
  /** What was acted on, as `<kind>/<id>` (`api-keys/<uuid>`, `connections/<uuid>`...); null when the tenant itself is. */
  target?: string | null;
  /** The partner's end user the change concerns; cleared when that user is erased (AuditService.forgetUser). */
  userId?: string | null;
  requestId: string | null;
  outcome: AuditOutcome;
  /** An agent's tool call: the status of its answer (the upstream's, or this service's error status). */
  status?: number | null;
  /** The trace the change ran in (tracing on), to find its spans. */
  traceId?: string | null;
  /** Ids, versions and counts of the operation (key operations); never a secret. */
  details?: AuditDetails | null;
}

/**
 * A stored row. Failures of the same action by the same actor on the same tenant within a minute are one row with a
 * count, except an agent's tool calls: one row each.
 */
export interface AuditRow extends Required<AuditRecord> {
  id: string;
  at: Date;
  count: number;
}

/** Where a page starts: after this (at, id), at as PostgreSQL's exact text (microseconds). */
export interface AuditPosition {
  at: string;
  id: string;
}
