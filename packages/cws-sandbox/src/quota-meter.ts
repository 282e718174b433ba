import { badRequest, isPlainObject } from './http-io.js';
import type { Clock, SandboxQuota, SandboxQuotas } from './types.js';

/**
 * Rate limits per company (the sandbox's choice: the spec shows none, section 7): at most `calls` resource calls
 * of a class (`read`: GET and HEAD, `write`: the others) per window of `windowSeconds`, windows aligned to the Unix
 * epoch. A call past it is answered 429 with Retry-After (the seconds to the window's end) and is not counted.
 */
export class QuotaMeter {
  private readonly companies = new Map<string, SandboxQuotas>();
  private readonly used = new Map<string, { window: number; calls: number }>();

  constructor(
    private readonly defaults: SandboxQuotas,
    private readonly clock: Clock,
  ) {}

  /** A company's limits; null: back to the sandbox's defaults (its `quotas` option). */
  set(companyId: string, quotas: SandboxQuotas | null): void {
    if (quotas === null) this.companies.delete(companyId);
    else this.companies.set(companyId, quotas);
  }

  of(companyId: string): SandboxQuotas {
    return this.companies.get(companyId) ?? this.defaults;
  }

  /** Counts a call; null when within the limit, else the seconds to wait (the call is not counted). */
  charge(companyId: string, method: string | undefined): number | null {
    const cls = method === 'GET' || method === 'HEAD' ? 'read' : 'write';
    const quota = this.of(companyId)[cls];
    if (quota === undefined) return null;
    const now = this.clock();
    const windowMs = quota.windowSeconds * 1000;
    const window = Math.floor(now / windowMs);
    const key = `${companyId}\n${cls}`;
    let used = this.used.get(key);
    if (used === undefined || used.window !== window) this.used.set(key, (used = { window, calls: 0 }));
    if (used.calls < quota.calls) {
      used.calls++;
      return null;
    }
    return Math.max(1, Math.ceil(((window + 1) * windowMs - now) / 1000));
  }
}

/** `{"read"?: {"calls", "windowSeconds"} | null, "write"?: ...}`, checked (the control route's body and the `quotas` option). */
export function parseQuotas(value: unknown, where: string): SandboxQuotas {
  if (!isPlainObject(value)) throw badRequest('invalid_quota', `${where} must be an object`);
  const quotas: SandboxQuotas = {};
  for (const [cls, quota] of Object.entries(value)) {
    if (cls !== 'read' && cls !== 'write') throw badRequest('invalid_quota', `${where} names the classes read and write, not ${cls}`);
    if (quota === null) continue;
    quotas[cls] = parseQuota(quota, `${where}.${cls}`);
  }
  return quotas;
}

function parseQuota(value: unknown, where: string): SandboxQuota {
  if (!isPlainObject(value)) throw badRequest('invalid_quota', `${where} must be {"calls", "windowSeconds"}`);
  const { calls, windowSeconds } = value;
  const whole = (n: unknown, max: number): n is number => typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= max;
  if (!whole(calls, 1_000_000_000) || !whole(windowSeconds, 86_400) || Object.keys(value).length !== 2)
    throw badRequest('invalid_quota', `${where} must be {"calls": 1 to 1e9, "windowSeconds": 1 to 86400}`);
  return { calls, windowSeconds };
}
