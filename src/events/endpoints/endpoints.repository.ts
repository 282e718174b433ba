import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { lockEndpointCount, TenantsRepository } from '../../tenants/tenants.repository.js';
import { ENDPOINT_COLUMNS as COLUMNS, type DisabledReason, type EndpointRow, toEndpoint } from './endpoint.js';

/** What an insert writes: the stored row's own fields, the rest are the database's defaults. */
export type NewEndpoint = Pick<
  EndpointRow,
  'id' | 'tenantId' | 'url' | 'description' | 'eventTypes' | 'filter' | 'rateLimitPerSecond' | 'maxInFlight' | 'disabled' | 'secretEnc'
>;

export type EndpointChanges = Partial<
  Pick<EndpointRow, 'url' | 'description' | 'eventTypes' | 'filter' | 'rateLimitPerSecond' | 'maxInFlight'>
>;

/** What the failure clock made of one attempt's outcome (docs/endpoints.md, "When an endpoint is disabled"). */
export type ClockChange =
  | { kind: 'none' }
  | { kind: 'failing'; since: Date; hours: number }
  | { kind: 'disabled'; reason: DisabledReason; since: Date | null }
  | { kind: 'recovered' };

/**
 * The event_endpoints table (docs/endpoints.md): the tenant's added endpoints, their sealed secrets, and the
 * failure clock and Retry-After floor each keeps in the database.
 */
@Injectable()
export class EndpointsRepository {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly tenants: TenantsRepository,
  ) {}

  /**
   * Inserts the endpoint when the tenant holds fewer than `max` endpoints, its eventsTargetUrl included (read under
   * lockEndpointCount, with every other change to that count), so two creations, or a creation and a first
   * eventsTargetUrl, cannot both take the last place. False: full.
   */
  async insertBounded(e: NewEndpoint, max: number): Promise<boolean> {
    return this.db.transaction(async (m) => {
      await lockEndpointCount(m, e.tenantId);
      const first = (await this.tenants.hasEventsTargetIn(m, e.tenantId)) ? 1 : 0;
      if ((await this.countOfTenantIn(m, e.tenantId)) + first >= max) return false;
      await m.query(
        `INSERT INTO event_endpoints (id, tenant_id, url, description, event_types, filter, rate_limit_per_second, max_in_flight,
           disabled, disabled_reason, disabled_at, secret_enc)
         VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8, $9, CASE WHEN $9 THEN 'request' END, CASE WHEN $9 THEN now() END, $10)`,
        [
          e.id,
          e.tenantId,
          e.url,
          e.description,
          jsonOrNull(e.eventTypes),
          jsonOrNull(e.filter),
          e.rateLimitPerSecond,
          e.maxInFlight,
          e.disabled,
          e.secretEnc,
        ],
      );
      return true;
    });
  }

  async listOfTenant(tenantId: string): Promise<EndpointRow[]> {
    const rows = (await this.db.query(`SELECT ${COLUMNS} FROM event_endpoints WHERE tenant_id = $1 ORDER BY created_at, id`, [
      tenantId,
    ])) as Array<Record<string, unknown>>;
    return rows.map(toEndpoint);
  }

  /** The endpoints of these tenants, for the fan-out (in its transaction). */
  async listOfTenants(m: EntityManager, tenantIds: string[]): Promise<EndpointRow[]> {
    const rows = (await m.query(`SELECT ${COLUMNS} FROM event_endpoints WHERE tenant_id = ANY($1::text[]) ORDER BY created_at, id`, [
      tenantIds,
    ])) as Array<Record<string, unknown>>;
    return rows.map(toEndpoint);
  }

  async find(tenantId: string, id: string): Promise<EndpointRow | null> {
    const rows = (await this.db.query(`SELECT ${COLUMNS} FROM event_endpoints WHERE tenant_id = $1 AND id = $2`, [tenantId, id])) as Array<
      Record<string, unknown>
    >;
    return rows[0] ? toEndpoint(rows[0]) : null;
  }

  async findById(id: string): Promise<EndpointRow | null> {
    const rows = (await this.db.query(`SELECT ${COLUMNS} FROM event_endpoints WHERE id = $1`, [id])) as Array<Record<string, unknown>>;
    return rows[0] ? toEndpoint(rows[0]) : null;
  }

  async countOfTenant(tenantId: string): Promise<number> {
    return this.countOfTenantIn(this.db.manager, tenantId);
  }

  /** The tenant's added endpoints, read in the caller's transaction. */
  async countOfTenantIn(m: EntityManager, tenantId: string): Promise<number> {
    const [{ n }] = (await m.query(`SELECT count(*)::int AS n FROM event_endpoints WHERE tenant_id = $1`, [tenantId])) as Array<{
      n: number;
    }>;
    return n;
  }

  /** Changes the given fields; answers the endpoint after, or null when it is not the tenant's. */
  async update(tenantId: string, id: string, c: EndpointChanges): Promise<EndpointRow | null> {
    const sets: string[] = [];
    const values: unknown[] = [tenantId, id];
    const set = (column: string, value: unknown, cast = '') => {
      values.push(value);
      sets.push(`${column} = $${values.length}${cast}`);
    };
    if (c.url !== undefined) set('url', c.url);
    if (c.description !== undefined) set('description', c.description);
    if (c.eventTypes !== undefined) set('event_types', jsonOrNull(c.eventTypes), '::jsonb');
    if (c.filter !== undefined) set('filter', jsonOrNull(c.filter), '::jsonb');
    if (c.rateLimitPerSecond !== undefined) set('rate_limit_per_second', c.rateLimitPerSecond);
    if (c.maxInFlight !== undefined) set('max_in_flight', c.maxInFlight);
    sets.push('updated_at = now()');
    const [rows] = (await this.db.query(
      `UPDATE event_endpoints SET ${sets.join(', ')} WHERE tenant_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      values,
    )) as [Array<Record<string, unknown>>, number];
    return rows[0] ? toEndpoint(rows[0]) : null;
  }

  /**
   * Disables the endpoint at the partner's request, or enables it again. Enabling resets the failure clock and any
   * Retry-After floor, and marks a recovery due (announced with its first successful attempt) when it had been
   * disabled by failure or a 410. Answers the endpoint after, or null when it is not the tenant's.
   */
  async setDisabled(tenantId: string, id: string, disabled: boolean): Promise<EndpointRow | null> {
    const [rows] = (await this.db.query(
      disabled
        ? `UPDATE event_endpoints SET disabled = true, disabled_reason = CASE WHEN disabled THEN disabled_reason ELSE 'request' END,
             disabled_at = CASE WHEN disabled THEN disabled_at ELSE now() END, updated_at = now()
           WHERE tenant_id = $1 AND id = $2 RETURNING ${COLUMNS}`
        : `UPDATE event_endpoints SET disabled = false, disabled_reason = NULL, disabled_at = NULL, failing_since = NULL,
             failing_events = 0, failing_warned = 0, not_before = NULL,
             recovery_due = recovery_due OR (disabled AND disabled_reason IN ('failing', 'gone')), updated_at = now()
           WHERE tenant_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      [tenantId, id],
    )) as [Array<Record<string, unknown>>, number];
    return rows[0] ? toEndpoint(rows[0]) : null;
  }

  async delete(tenantId: string, id: string): Promise<boolean> {
    const [, n] = (await this.db.query(`DELETE FROM event_endpoints WHERE tenant_id = $1 AND id = $2`, [tenantId, id])) as [
      unknown,
      number,
    ];
    return n === 1;
  }

  /** A new sealed secret; the one it replaces signs too until `prevUntil` (null: stops at once). */
  async replaceSecret(tenantId: string, id: string, secretEnc: string, prevEnc: string | null, prevUntil: Date | null): Promise<boolean> {
    const [, n] = (await this.db.query(
      `UPDATE event_endpoints SET secret_enc = $3, secret_prev_enc = $4, secret_prev_until = $5, updated_at = now()
        WHERE tenant_id = $1 AND id = $2`,
      [tenantId, id, secretEnc, prevEnc, prevUntil],
    )) as [unknown, number];
    return n === 1;
  }

  /**
   * The failure clock after one recorded attempt (in the recording's transaction, the endpoint's row locked): a
   * success stops it (and answers `recovered` when a warning or a disable had been announced); a failure starts it
   * if it is not running, counts the event when this is its first failure since the clock started (`firstFailedAt`:
   * when the delivery first failed before this attempt, null if never), and answers the warning or the disable due.
   * `gone` (a 410) disables at once; `notBefore` (a Retry-After) holds every attempt to the endpoint until then.
   * `r`: the clock as lockClock read it in this transaction.
   */
  /** Locks the endpoint's row for a recording (the first lock it takes: the same order as a claim) and reads its clock. */
  async lockClock(m: EntityManager, id: string): Promise<ClockRow | null> {
    const rows = (await m.query(
      `SELECT failing_since, failing_events, failing_warned, recovery_due, disabled, now() AS now FROM event_endpoints WHERE id = $1 FOR UPDATE`,
      [id],
    )) as ClockRow[];
    return rows[0] ?? null;
  }

  async applyOutcome(
    m: EntityManager,
    id: string,
    r: ClockRow | null,
    o: { ok: boolean; gone: boolean; firstFailedAt: Date | null; notBefore: Date | null; disableAfterMs: number },
  ): Promise<ClockChange> {
    if (!r) return { kind: 'none' };
    if (o.ok) {
      if (r.failing_since === null && !r.recovery_due) return { kind: 'none' };
      await m.query(
        `UPDATE event_endpoints SET failing_since = NULL, failing_events = 0, failing_warned = 0, recovery_due = false WHERE id = $1`,
        [id],
      );
      return r.recovery_due || r.failing_warned > 0 ? { kind: 'recovered' } : { kind: 'none' };
    }
    const now = r.now;
    const since = r.failing_since ?? now;
    const counts = r.failing_since === null || o.firstFailedAt === null || o.firstFailedAt < r.failing_since;
    const events = Number(r.failing_events) + (counts ? 1 : 0);
    const failedMs = now.getTime() - since.getTime();
    let change: ClockChange = { kind: 'none' };
    let warned = Number(r.failing_warned);
    let disable: DisabledReason | null = null;
    if (r.disabled) change = { kind: 'none' };
    else if (o.gone) disable = 'gone';
    else if (failedMs >= o.disableAfterMs && events >= MIN_FAILED_EVENTS) disable = 'failing';
    else {
      // The warnings come at 1/5 and 3/5 of ENDPOINT_DISABLE_AFTER: after 24 h and 72 h with the default 5 days.
      const due = failedMs >= (o.disableAfterMs * 3) / 5 ? 2 : failedMs >= o.disableAfterMs / 5 ? 1 : 0;
      if (due > warned) {
        warned = due;
        change = { kind: 'failing', since, hours: Math.floor(failedMs / 3_600_000) };
      }
    }
    if (disable) change = { kind: 'disabled', reason: disable, since: r.failing_since === null ? null : since };
    await m.query(
      `UPDATE event_endpoints SET failing_since = $2, failing_events = $3, failing_warned = $4,
         not_before = CASE WHEN $5::timestamptz IS NOT NULL THEN GREATEST(coalesce(not_before, $5::timestamptz), $5::timestamptz) ELSE not_before END,
         disabled = disabled OR $6::boolean,
         disabled_reason = CASE WHEN NOT disabled AND $6::boolean THEN $7 ELSE disabled_reason END,
         disabled_at = CASE WHEN NOT disabled AND $6::boolean THEN now() ELSE disabled_at END
       WHERE id = $1`,
      [id, since, events, warned, o.notBefore, disable !== null, disable],
    );
    return change;
  }
}

/** The failure clock of an endpoint's row, read under its lock (lockClock). */
export interface ClockRow {
  failing_since: Date | null;
  failing_events: number;
  failing_warned: number;
  recovery_due: boolean;
  disabled: boolean;
  now: Date;
}

/** An endpoint is disabled for failure only when the failures span at least this many events. */
export const MIN_FAILED_EVENTS = 10;

function jsonOrNull(v: unknown): string | null {
  return v === null || v === undefined ? null : JSON.stringify(v);
}
