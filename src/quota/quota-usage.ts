import { QUOTA_CLASSES, type QuotaBudgets, type QuotaClass } from '../config/quota-budgets.js';
import type { WindowFigures } from './quota-windows.repository.js';

export interface QuotaWindowUsage {
  start: string;
  end: string;
  spent: number;
  waited: number;
  refused: number;
  upstream429: number;
}

/** What a tenant shows of one class (GET /v1/tenants/{id}): its budget, whose it is, the pause, the last two windows. */
export interface QuotaClassUsage {
  budget: string | null;
  source: 'tenant' | 'environment' | null;
  pausedUntil: string | null;
  window: QuotaWindowUsage | null;
  previousWindow: QuotaWindowUsage | null;
}

/** The figures of every class from a tenant's rows; `own`: the tenant's own budgets as stored (null: none). */
export function usageOf(
  rows: { windows: WindowFigures[]; pauses: Partial<Record<QuotaClass, number>> },
  budgets: QuotaBudgets,
  own: Readonly<Record<string, string>> | null,
  now: number,
): Record<QuotaClass, QuotaClassUsage> {
  const usage = {} as Record<QuotaClass, QuotaClassUsage>;
  for (const cls of QUOTA_CLASSES) {
    const budget = budgets[cls];
    const paused = rows.pauses[cls];
    const windowOf = (start: number): QuotaWindowUsage | null => {
      if (budget === undefined) return null;
      const row = rows.windows.find((w) => w.cls === cls && w.start === start && w.windowMs === budget.windowMs);
      return {
        start: new Date(start).toISOString(),
        end: new Date(start + budget.windowMs).toISOString(),
        spent: row?.spent ?? 0,
        waited: row?.waited ?? 0,
        refused: row?.refused ?? 0,
        upstream429: row?.upstream429 ?? 0,
      };
    };
    const start = budget === undefined ? 0 : Math.floor(now / budget.windowMs) * budget.windowMs;
    usage[cls] = {
      budget: budget?.text ?? null,
      source: budget === undefined ? null : typeof own?.[cls] === 'string' ? 'tenant' : 'environment',
      pausedUntil: paused !== undefined && paused > now ? new Date(paused).toISOString() : null,
      window: windowOf(start),
      previousWindow: budget === undefined ? null : windowOf(start - budget.windowMs),
    };
  }
  return usage;
}
