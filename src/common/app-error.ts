/**
 * The domain error. Services throw it with a stable code; the global filter maps the code to an HTTP
 * status and the contract's JSON shape (API.md section 3). Services never throw HttpException.
 */
export const ERROR_STATUS = {
  validation_failed: 400,
  invalid_path: 400,
  user_id_required: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  tenant_not_found: 404,
  api_key_not_found: 404,
  connection_not_found: 404,
  event_not_found: 404,
  endpoint_not_found: 404,
  agent_session_not_found: 404,
  /** The user's synced copy does not hold that workflow (docs/records.md). */
  record_not_found: 404,
  route_not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  tenant_exists: 409,
  user_not_connected: 409,
  admin_not_connected: 409,
  reauth_required: 409,
  /**
   * A stored secret of the tenant (its events secret, a webhook receiver's) does not open: damaged, or restored
   * from another installation. The partner replaces it (rotates the events secret, creates the receiver anew).
   */
  secret_unreadable: 409,
  /** A tenant or one of its users holds the most live agent sessions (AGENT_SESSIONS_PER_USER, AGENT_SESSIONS_PER_TENANT). */
  agent_session_limit: 409,
  /** The tenant holds ENDPOINTS_PER_TENANT event endpoints (docs/endpoints.md). */
  endpoint_limit: 409,
  /** The event is older than its tenant's retention window: kept no longer. */
  event_expired: 410,
  /** A change cursor older than SYNC_TOMBSTONE_DAYS: the feed after it may be pruned; read the copy again (docs/records.md). */
  cursor_expired: 410,
  environment_not_configured: 422,
  /** An events target that reaches an internal address (docs/security.md, "Events target"). */
  target_not_allowed: 422,
  connect_session_expired: 400,
  connect_state_invalid: 400,
  payload_too_large: 413,
  unsupported_media_type: 415,
  too_many_requests: 429,
  /** The company's upstream budget is spent, or the upstream asked it to slow down (docs/quotas.md): Retry-After says when. */
  quota_exhausted: 429,
  internal_error: 500,
  /** A stored secret does not open with VAULT_KEYS and its owner did not answer for it: docs/operations.md. */
  vault_key_mismatch: 500,
  upstream_error: 502,
  upstream_unavailable: 502,
  service_unavailable: 503,
  /** The key store (KEY_STORE) is unreachable and the tenant's data key is not cached (or past KEY_CACHE_GRACE): Retry-After says when to retry. */
  key_store_unavailable: 503,
  upstream_timeout: 504,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    /** Seconds the caller should wait: answered as Retry-After (a 429 or a 503). */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'AppError';
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

export interface ErrorBody {
  error: { code: string; message: string; requestId: string; details?: Record<string, unknown> };
}

/**
 * A failure raised below the HTTP layer that stands for one answer of the contract, with the one log line it
 * deserves in place of a stack. The module that raises it implements this, so the exception filter maps it
 * without knowing that module (common uses nothing of the product).
 */
export interface ContractFailure {
  readonly contractAnswer: { status: number; code: string; message: string };
  /** Fields that name no secret, and a message. */
  logLine(): { fields: Record<string, unknown>; message: string };
}

export function isContractFailure(e: unknown): e is ContractFailure {
  return (
    typeof e === 'object' &&
    e !== null &&
    typeof (e as { contractAnswer?: unknown }).contractAnswer === 'object' &&
    typeof (e as { logLine?: unknown }).logLine === 'function'
  );
}
