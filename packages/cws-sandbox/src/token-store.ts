import type { Clock, SandboxRefreshCalls } from './types.js';
import { randomToken, sha256Hex } from './random-tokens.js';
import { RingBuffer } from './ring-buffer.js';

/** One grant: a code exchange (or the issueTokens control) starts it, every refresh continues it. */
interface Family {
  readonly id: string;
  readonly userId: string;
  /** What the resource owner consented to; a refresh may narrow the token's scope, never widen it beyond this. */
  readonly grantedScopes: readonly string[];
  scopes: readonly string[];
  revoked: boolean;
  current: AccessEntry | null;
}

interface AccessEntry {
  readonly family: Family;
  expiresAt: number;
  /** Set when a refresh issued the family's next access token (sandbox choice: the old one dies then). */
  replaced: boolean;
}

interface RefreshEntry {
  readonly family: Family;
  used: boolean;
}

interface CodeEntry {
  readonly userId: string;
  readonly clientId: string;
  readonly redirectUri: string;
  readonly scopes: readonly string[];
  readonly expiresAt: number;
  used: boolean;
  family: Family | null;
}

export interface GrantTokens {
  readonly accessToken: string;
  readonly refreshToken: string;
  readonly familyId: string;
  readonly userId: string;
  readonly scopes: readonly string[];
}

export type GrantResult =
  | { readonly ok: true; readonly tokens: GrantTokens }
  | {
      readonly ok: false;
      readonly error: 'invalid_grant' | 'invalid_scope';
      readonly outcome: string;
      readonly description: string;
      readonly familyId?: string;
    };

export type AccessCheck =
  | { readonly status: 'ok'; readonly userId: string; readonly familyId: string; readonly scopes: readonly string[] }
  | { readonly status: 'expired' | 'revoked'; readonly userId: string; readonly familyId: string }
  | { readonly status: 'unknown' };

export interface RefreshLogEntry {
  readonly at: number;
  readonly family: string;
  readonly userId: string;
  readonly usedRefreshTokenHash: string;
}

const UNKNOWN: AccessCheck = Object.freeze({ status: 'unknown' });
const REFRESH_LOG_CAPACITY = 100_000;
// Codes are kept this long after expiry so that a late second use is still seen as reuse (and revokes).
const CODE_RETENTION_MS = 60 * 60 * 1000;

/**
 * Every token in memory, looked up by its value in a Map (O(1) on the hot path). Token values never
 * leave this class except in the responses that issue them.
 */
export class TokenStore {
  private readonly access = new Map<string, AccessEntry>();
  private readonly refreshTokens = new Map<string, RefreshEntry>();
  private readonly codes = new Map<string, CodeEntry>();
  private readonly familiesByUser = new Map<string, Set<Family>>();
  private readonly log = new RingBuffer<RefreshLogEntry>(REFRESH_LOG_CAPACITY);
  /** Per family (never bounded: one entry per family that ever presented a refresh token, as the families are kept). */
  private readonly refreshCalls = new Map<string, { granted: number; refused: number }>();
  private codesSinceSweep = 0;

  constructor(
    private readonly accessTtlMs: number,
    private readonly codeTtlMs: number,
    private readonly registeredScopes: ReadonlySet<string>,
    private readonly clock: Clock,
  ) {}

  /** Every access and refresh token value ever issued (tests assert none of them leaks anywhere). */
  issuedTokenValues(): string[] {
    return [...this.access.keys(), ...this.refreshTokens.keys()];
  }

  createCode(grant: { userId: string; clientId: string; redirectUri: string; scopes: readonly string[] }): string {
    if (++this.codesSinceSweep >= 1000) this.sweepCodes();
    const code = randomToken(32);
    this.codes.set(code, { ...grant, expiresAt: this.clock() + this.codeTtlMs, used: false, family: null });
    return code;
  }

  exchangeCode(code: string, clientId: string, redirectUri: string): GrantResult {
    const entry = this.codes.get(code);
    if (!entry) return fail('invalid_grant', 'unknown_code', 'The authorization code is unknown');
    if (entry.used) {
      // RFC 6749 4.1.2: a code used twice revokes the tokens issued from it.
      if (entry.family) this.revokeFamily(entry.family);
      return fail(
        'invalid_grant',
        'code_reuse',
        'The authorization code was already used; the tokens issued from it are revoked',
        entry.family?.id,
      );
    }
    if (this.clock() >= entry.expiresAt) return fail('invalid_grant', 'code_expired', 'The authorization code expired');
    if (entry.clientId !== clientId) return fail('invalid_grant', 'client_mismatch', 'The authorization code was issued to another client');
    if (entry.redirectUri !== redirectUri) {
      return fail('invalid_grant', 'redirect_uri_mismatch', 'redirect_uri is not identical to the one of the authorization request');
    }
    entry.used = true;
    const tokens = this.startFamily(entry.userId, entry.scopes);
    entry.family = this.familyOf(tokens);
    return { ok: true, tokens };
  }

  /** `requestedScopes` undefined keeps the originally granted scope (RFC 6749 section 6). */
  refresh(refreshToken: string, requestedScopes: readonly string[] | undefined): GrantResult {
    const entry = this.refreshTokens.get(refreshToken);
    if (!entry) return fail('invalid_grant', 'unknown_refresh_token', 'The refresh token is unknown');
    const result = this.refreshKnown(entry, refreshToken, requestedScopes);
    const counts = this.refreshCalls.get(entry.family.id) ?? { granted: 0, refused: 0 };
    if (result.ok) counts.granted++;
    else counts.refused++;
    this.refreshCalls.set(entry.family.id, counts);
    return result;
  }

  /** How many refresh_token grant calls presented a refresh token of `familyId` (zeros for a family never refreshed). */
  refreshCallsOf(familyId: string): SandboxRefreshCalls {
    const counts = this.refreshCalls.get(familyId);
    return { family: familyId, granted: counts?.granted ?? 0, refused: counts?.refused ?? 0 };
  }

  private refreshKnown(entry: RefreshEntry, refreshToken: string, requestedScopes: readonly string[] | undefined): GrantResult {
    const family = entry.family;
    if (entry.used) {
      this.revokeFamily(family);
      return fail('invalid_grant', 'refresh_reuse', 'The refresh token was already used; every token of its grant is revoked', family.id);
    }
    if (family.revoked) return fail('invalid_grant', 'revoked_grant', 'The grant of this refresh token was revoked', family.id);
    let scopes = family.grantedScopes;
    if (requestedScopes) {
      for (const scope of requestedScopes) {
        if (!this.registeredScopes.has(scope) || !family.grantedScopes.includes(scope)) {
          return fail(
            'invalid_scope',
            'invalid_scope',
            `Scope ${scope} is not within the registered and previously granted scopes`,
            family.id,
          );
        }
      }
      scopes = requestedScopes;
    }
    entry.used = true;
    family.scopes = scopes;
    const tokens = this.rotate(family);
    this.log.push({ at: this.clock(), family: family.id, userId: family.userId, usedRefreshTokenHash: sha256Hex(refreshToken) });
    return { ok: true, tokens };
  }

  /** A new grant without the browser round trip (test and benchmark control). */
  issue(userId: string, scopes: readonly string[]): GrantTokens {
    return this.startFamily(userId, scopes);
  }

  checkAccess(token: string): AccessCheck {
    const entry = this.access.get(token);
    if (!entry) return UNKNOWN;
    const family = entry.family;
    if (family.revoked || entry.replaced) return { status: 'revoked', userId: family.userId, familyId: family.id };
    if (this.clock() >= entry.expiresAt) return { status: 'expired', userId: family.userId, familyId: family.id };
    return { status: 'ok', userId: family.userId, familyId: family.id, scopes: family.scopes };
  }

  /** Makes matching live access tokens expired now; returns how many. */
  expireAccess(filter: { userId?: string; accessToken?: string } = {}): number {
    const now = this.clock();
    const live = (entry: AccessEntry | null | undefined): entry is AccessEntry =>
      !!entry && !entry.family.revoked && !entry.replaced && now < entry.expiresAt;
    if (filter.accessToken !== undefined) {
      const entry = this.access.get(filter.accessToken);
      if (!live(entry) || (filter.userId !== undefined && entry.family.userId !== filter.userId)) return 0;
      entry.expiresAt = now;
      return 1;
    }
    let count = 0;
    const userSets =
      filter.userId !== undefined ? [this.familiesByUser.get(filter.userId) ?? new Set<Family>()] : this.familiesByUser.values();
    for (const families of userSets) {
      for (const family of families) {
        if (live(family.current)) {
          family.current.expiresAt = now;
          count++;
        }
      }
    }
    return count;
  }

  /** Revokes every live grant of the user; returns how many grants. */
  revokeUser(userId: string): number {
    let count = 0;
    for (const family of this.familiesByUser.get(userId) ?? []) {
      if (!family.revoked) {
        this.revokeFamily(family);
        count++;
      }
    }
    return count;
  }

  refreshLog(): RefreshLogEntry[] {
    return this.log.toArray();
  }

  private startFamily(userId: string, scopes: readonly string[]): GrantTokens {
    const family: Family = { id: `fam_${randomToken(12)}`, userId, grantedScopes: scopes, scopes, revoked: false, current: null };
    let families = this.familiesByUser.get(userId);
    if (!families) this.familiesByUser.set(userId, (families = new Set()));
    families.add(family);
    return this.rotate(family);
  }

  private rotate(family: Family): GrantTokens {
    if (family.current) family.current.replaced = true;
    const accessToken = randomToken(32);
    const refreshToken = randomToken(32);
    const entry: AccessEntry = { family, expiresAt: this.clock() + this.accessTtlMs, replaced: false };
    family.current = entry;
    this.access.set(accessToken, entry);
    this.refreshTokens.set(refreshToken, { family, used: false });
    return { accessToken, refreshToken, familyId: family.id, userId: family.userId, scopes: family.scopes };
  }

  private familyOf(tokens: GrantTokens): Family {
    return (this.access.get(tokens.accessToken) as AccessEntry).family;
  }

  private revokeFamily(family: Family): void {
    family.revoked = true;
  }

  private sweepCodes(): void {
    this.codesSinceSweep = 0;
    const cutoff = this.clock() - CODE_RETENTION_MS;
    for (const [code, entry] of this.codes) if (entry.expiresAt < cutoff) this.codes.delete(code);
  }
}

function fail(
  error: 'invalid_grant' | 'invalid_scope',
  outcome: string,
  description: string,
  familyId?: string,
): { ok: false; error: 'invalid_grant' | 'invalid_scope'; outcome: string; description: string; familyId?: string } {
  return familyId === undefined ? { ok: false, error, outcome, description } : { ok: false, error, outcome, description, familyId };
}
