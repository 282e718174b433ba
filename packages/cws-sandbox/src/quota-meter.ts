import { badRequest, isPlainObject } from './http-io.js';
import type { Clock, SandboxQuota, SandboxQuotas } from './types.js';

/**
 * Rate limits per company (the sandbox's choice: the spec shows none, section 7): at most `calls` resource calls
 * of a class (`read`: GET and HEAD, `write`: the others) in any interval of `windowSeconds` (the strictest way an
 * upstream may count), or per window aligned to the Unix epoch (`counting: 'clock'`). A call past it is answered
 * 429 with Retry-After (the seconds until a call leaves the interval, or to the window's end) and is not counted.
 */
export class QuotaMeter {
  private readonly companies = new Map<string, SandboxQuotas>();
  private readonly used = new Map<string, { window: number; calls: number }>();
  /** Sliding counting: the times of the calls of the last interval, oldest first (at most `calls` of them). */
  private readonly logs = new Map<string, number[]>();

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
    const key = `${companyId}\n${cls}`;
    if (quota.counting !== 'clock') return this.slide(key, quota.calls, windowMs, now);
    const window = Math.floor(now / windowMs);
    let used = this.used.get(key);
    if (used === undefined || used.window !== window) this.used.set(key, (used = { window, calls: 0 }));
    if (used.calls < quota.calls) {
      used.calls++;
      return null;
    }
    return Math.max(1, Math.ceil(((window + 1) * windowMs - now) / 1000));
  }

  private slide(key: string, calls: number, windowMs: number, now: number): number | null {
    let log = this.logs.get(key);
    if (log === undefined) this.logs.set(key, (log = []));
    let gone = 0;
    while (gone < log.length && log[gone] <= now - windowMs) gone++;
    if (gone > 0) log.splice(0, gone);
    if (log.length < calls) {
      log.push(now);
      return null;
    }
    return Math.max(1, Math.ceil((log[log.length - calls] + windowMs - now) / 1000));
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
  const { calls, windowSeconds, counting } = value;
  const whole = (n: unknown, max: number): n is number => typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= max;
  const known = Object.keys(value).every((k) => k === 'calls' || k === 'windowSeconds' || k === 'counting');
  if (!whole(calls, 1_000_000_000) || !whole(windowSeconds, 86_400) || !known)
    throw badRequest(
      'invalid_quota',
      `${where} must be {"calls": 1 to 1e9, "windowSeconds": 1 to 86400, "counting"?: "sliding" or "clock"}`,
    );
  if (counting === undefined) return { calls, windowSeconds };
  if (counting !== 'sliding' && counting !== 'clock') throw badRequest('invalid_quota', `${where}.counting is "sliding" or "clock"`);
  return { calls, windowSeconds, counting };
}
