import type { Clock } from './types.js';
import { randomToken } from './random-tokens.js';

/** An authorization request that passed validation and waits for the person's decision. */
export interface PendingAuthorization {
  readonly id: string;
  readonly clientId: string;
  readonly redirectUri: string;
  readonly scopeParam: string;
  readonly scopes: readonly string[];
  /** The state as received: `raw` is echoed to the redirect URI unchanged, `value` is its decoded form. */
  readonly state: { readonly raw: string; readonly value: string } | null;
  readonly expiresAt: number;
}

const TTL_MS = 10 * 60 * 1000;

/**
 * Server-side pending requests: the consent form carries only an unguessable id, so the request cannot
 * be altered between the page and the decision, and each id is good for one decision.
 */
export class PendingAuthorizations {
  private readonly pending = new Map<string, PendingAuthorization>();
  private addsSinceSweep = 0;

  constructor(private readonly clock: Clock) {}

  add(request: Omit<PendingAuthorization, 'id' | 'expiresAt'>): PendingAuthorization {
    if (++this.addsSinceSweep >= 256) this.sweep();
    const entry: PendingAuthorization = { ...request, id: randomToken(24), expiresAt: this.clock() + TTL_MS };
    this.pending.set(entry.id, entry);
    return entry;
  }

  get(id: string): PendingAuthorization | undefined {
    const entry = this.pending.get(id);
    if (!entry) return undefined;
    if (this.clock() >= entry.expiresAt) {
      this.pending.delete(id);
      return undefined;
    }
    return entry;
  }

  take(id: string): PendingAuthorization | undefined {
    const entry = this.get(id);
    this.pending.delete(id);
    return entry;
  }

  private sweep(): void {
    this.addsSinceSweep = 0;
    const now = this.clock();
    for (const [id, entry] of this.pending) if (now >= entry.expiresAt) this.pending.delete(id);
  }
}
