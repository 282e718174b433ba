import { timingSafeEqual } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { v7 as timeOrderedUuid } from 'uuid';
import { AppError } from '../common/app-error.js';
import { CommitBatcher, statementRefused } from '../common/commit-batcher.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { EventDeliveryService } from '../events/event-delivery.service.js';
import { EventsRepository, type NewEvent } from '../events/events.repository.js';
import { SyncEngine, workflowIdOfEvent } from '../records/sync-engine.service.js';
import { currentTraceparent } from '../telemetry/operation-spans.js';
import { TokenVault, VaultError } from '../vault/token-vault.service.js';
import { WebhookReceiversRepository } from './webhook-receivers.repository.js';
import { receiverRef } from './webhooks.service.js';
import { sha256 } from '../common/hash.js';
import { isJsonType } from '../common/request-body.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CACHE_TTL_MS = 60_000;
const CACHE_MAX = 10_000;
// Compared against when the receiver is unknown, so that an unknown receiver costs the same as a wrong secret.
const NO_RECEIVER = sha256('no receiver');
const TYPE_FIELDS = ['event', 'type', 'eventType'] as const;
const INBOUND_GROUP_MAX = 250;

/**
 * Upstream deliveries to self-targeted webhooks. Fail closed: no receiver or no matching Authorization,
 * no entry (401, nothing stored). An accepted delivery is committed to the events table before the
 * answer, then handed to the outbound delivery.
 */
@Injectable()
export class InboundService {
  // Receivers never change once created, so their expected digest can be kept briefly (never the secret).
  private readonly digests = new Map<string, { digest: Buffer; until: number }>();
  // Deliveries arriving while the INSERTs in flight commit go together in the next: one WAL flush for many.
  // INBOUND_COMMITS_IN_FLIGHT groups at once (1 by default; more hide a slow WAL flush at some database CPU);
  // the events API reads only what no open writer can still precede (EventsRepository.listAfter).
  private readonly inserts: CommitBatcher<NewEvent & { id: string }>;

  constructor(
    private readonly receivers: WebhookReceiversRepository,
    private readonly vault: TokenVault,
    private readonly events: EventsRepository,
    private readonly delivery: EventDeliveryService,
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly sync: SyncEngine,
  ) {
    this.inserts = new CommitBatcher(
      async (events) => {
        const saved = await this.events.recordMany(events);
        // The relay is woken only for something to deliver: a tenant without an events target stores its
        // deliveries as no_target, and a relay pass per group would be a transaction for nothing.
        for (const state of saved.values()) {
          if (state === 'pending') {
            this.delivery.kick();
            break;
          }
        }
        return saved;
      },
      INBOUND_GROUP_MAX,
      statementRefused,
      config.events.inboundCommitsInFlight,
    );
  }

  /**
   * `delivery.body` is what the one JSON body parser made of it (common/json-body.ts: NUL, unpaired
   * surrogates and deep nesting are refused there, before this runs); `delivery.json`, when given, the
   * text it was parsed from, stored as is.
   */
  accept(
    tenantId: string,
    receiverId: string,
    authorization: string | undefined,
    delivery: { contentType: string | undefined; body: unknown; json?: string },
  ): Promise<{ id: string }> {
    // A cached digest (the common case) is checked without a turn of the event loop: no async function or
    // await per delivery here, each being a promise more.
    const cached = this.cachedDigest(tenantId, receiverId);
    if (cached === undefined)
      return this.loadDigest(tenantId, receiverId).then((expected) => this.store(expected, tenantId, receiverId, authorization, delivery));
    try {
      return this.store(cached, tenantId, receiverId, authorization, delivery);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Checks the delivery against the receiver's digest (null: no such receiver) and commits it; throws at once when it is refused. */
  private store(
    expected: Buffer | null,
    tenantId: string,
    receiverId: string,
    authorization: string | undefined,
    delivery: { contentType: string | undefined; body: unknown; json?: string },
  ): Promise<{ id: string }> {
    const given = sha256(authorization ?? '');
    const match = timingSafeEqual(given, expected ?? NO_RECEIVER);
    if (!match || !expected || authorization === undefined)
      throw new AppError('unauthorized', "The webhook's Authorization is missing or wrong.");
    if (!isJsonType(delivery.contentType))
      throw new AppError('unsupported_media_type', 'A delivery is a JSON body: content-type: application/json.');
    const body = delivery.body;
    if (body === undefined) throw new AppError('validation_failed', 'A delivery is a JSON body (content-type: application/json).');
    // Time-ordered (UUIDv7): consecutive deliveries land on the same right-hand leaf of the primary key index
    // instead of a random one, which under load cost most of the insert (page reads, full-page WAL images).
    const id = timeOrderedUuid();
    // The group commit runs in whichever request started it: each delivery's own trace is taken here.
    const traceparent = currentTraceparent();
    return this.inserts
      .save({
        id,
        tenantId,
        source: 'upstream',
        type: eventTypeOf(body),
        payload: body,
        payloadJson: delivery.json,
        // The partner's key to recognise the same delivery posted again: the upstream shows no delivery id.
        payloadDigest: delivery.json === undefined ? null : sha256(delivery.json).toString('base64url'),
        receiverId,
        traceparent,
      })
      .then(
        (stored) => {
          // Not stored: the tenant (and with it the receiver) was deleted since the digest was cached.
          if (!stored) throw new AppError('unauthorized', "The webhook's Authorization is missing or wrong.");
          // A workflow named by the event is read again for each synced user holding it (a hint: never built from the payload).
          const workflowId = workflowIdOfEvent(body);
          if (workflowId !== null) this.sync.hint(tenantId, workflowId);
          return { id };
        },
        (e: unknown) => {
          // The group commit isolates a member the database refuses; a data exception is this delivery's own fault.
          if (sqlStateOf(e)?.startsWith('22'))
            throw new AppError('validation_failed', 'The delivery holds a value PostgreSQL cannot store as JSON.');
          throw e;
        },
      );
  }

  /** The receiver's expected digest when cached and fresh; null when the receiver id cannot exist; undefined: ask the database. */
  private cachedDigest(tenantId: string, receiverId: string): Buffer | null | undefined {
    if (!UUID.test(receiverId)) return null;
    const hit = this.digests.get(digestKey(tenantId, receiverId));
    return hit && hit.until > Date.now() ? hit.digest : undefined;
  }

  private async loadDigest(tenantId: string, receiverId: string): Promise<Buffer | null> {
    const receiver = await this.receivers.findInTenant(tenantId, receiverId);
    if (!receiver) return null;
    let secret: string;
    try {
      secret = await this.vault.open(receiver.secretEnc, receiverRef(tenantId, receiver.id));
    } catch (e) {
      if (e instanceof VaultError) throw unreadableReceiver(e);
      throw e;
    }
    const digest = sha256(secret);
    if (this.digests.size >= CACHE_MAX) this.digests.clear();
    this.digests.set(digestKey(tenantId, receiverId), { digest, until: Date.now() + CACHE_TTL_MS });
    return digest;
  }
}

/**
 * The receiver's secret does not open (the vault counted and logged it): that receiver's deliveries are refused
 * with a code the partner can act on, and every other receiver works. Under a key this instance's ring lacks
 * but other instances hold (a rotation under way), 503: the upstream retries the delivery.
 */
function unreadableReceiver(e: VaultError): AppError {
  if (e.ringBehind) return new AppError('service_unavailable', 'This instance does not hold the key of this receiver yet; retry.');
  return new AppError('secret_unreadable', "This receiver's stored secret cannot be read: the partner must create the receiver again.");
}

function digestKey(tenantId: string, receiverId: string): string {
  return `${tenantId}/${receiverId.toLowerCase()}`;
}

function sqlStateOf(e: unknown): string | undefined {
  const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? code : undefined;
}

/** The payload's event kind when it names one (`event`, `type` or `eventType`), else `unknown`. */
export function eventTypeOf(payload: unknown): string {
  if (payload && typeof payload === 'object' && !Array.isArray(payload)) {
    for (const field of TYPE_FIELDS) {
      const v = (payload as Record<string, unknown>)[field];
      if (typeof v === 'string' && /^[A-Za-z0-9_.:-]{1,200}$/.test(v)) return v;
    }
  }
  return 'unknown';
}
