import { VariableProblem } from './variable-types.js';

// Upstream budgets (docs/quotas.md): how CWS_<ENV>_QUOTAS and a tenant's `quotas` are written, read once here.

/** The classes of resource calls a budget counts: `read` = GET and HEAD, `write` = every other method. */
export const QUOTA_CLASSES = ['read', 'write'] as const;
export type QuotaClass = (typeof QUOTA_CLASSES)[number];

/** At most this many calls within any interval of `windowMs` (docs/quotas.md, "The bound"). */
export interface Budget {
  readonly calls: number;
  readonly windowMs: number;
  /** As written (`400/60s`), for answers and logs. */
  readonly text: string;
}

export type QuotaBudgets = Readonly<Partial<Record<QuotaClass, Budget>>>;

export const MAX_BUDGET_CALLS = 1_000_000_000;
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000 };
const MIN_WINDOW_MS = 1000;
const MAX_WINDOW_MS = 86_400_000;
const BUDGET = /^(\d{1,10})\/(\d{1,5})(s|m|h)$/;

/** The class of a resource call by its method. */
export function quotaClassOf(method: string): QuotaClass {
  return method === 'GET' || method === 'HEAD' ? 'read' : 'write';
}

/** `<calls>/<window>` (`400/60s`, `40/1m`, `10000/1h`), or what is wrong with it. */
export function parseBudget(text: string): Budget | string {
  const m = BUDGET.exec(text.trim());
  if (!m) return `a budget is <calls>/<window>, e.g. 400/60s (window in s, m or h), got "${text}"`;
  const calls = Number(m[1]);
  const windowMs = Number(m[2]) * UNIT_MS[m[3]];
  if (calls < 1 || calls > MAX_BUDGET_CALLS) return `the calls of a budget are 1 to ${MAX_BUDGET_CALLS}, got "${text}"`;
  if (windowMs < MIN_WINDOW_MS || windowMs > MAX_WINDOW_MS) return `the window of a budget is 1s to 24h, got "${text}"`;
  return Object.freeze({ calls, windowMs, text: `${calls}/${m[2]}${m[3]}` });
}

/** CWS_<ENV>_QUOTAS: `<class>=<budget>` pairs, comma separated (`read=400/60s,write=40/60s`). */
export function quotaBudgets(raw: string): QuotaBudgets {
  const budgets: Partial<Record<QuotaClass, Budget>> = {};
  for (const pair of raw.split(',')) {
    if (!pair.trim()) continue;
    const eq = pair.indexOf('=');
    const name = (eq > 0 ? pair.slice(0, eq) : pair).trim();
    if (!isQuotaClass(name)) throw new VariableProblem(`names the classes read and write (read=400/60s,write=40/60s), got "${name}"`);
    if (budgets[name]) throw new VariableProblem(`names the class ${name} twice`);
    const budget = parseBudget(eq > 0 ? pair.slice(eq + 1) : '');
    if (typeof budget === 'string') throw new VariableProblem(`${name}: ${budget}`);
    budgets[name] = budget;
  }
  return Object.freeze(budgets);
}

export function isQuotaClass(name: string): name is QuotaClass {
  return (QUOTA_CLASSES as readonly string[]).includes(name);
}

/** The budgets in force for a tenant: its own per class (`tenant`, as stored), else its environment's. */
export function budgetsInForce(environment: QuotaBudgets, tenant: Readonly<Record<string, string>> | null): QuotaBudgets {
  if (tenant === null) return environment;
  const merged: Partial<Record<QuotaClass, Budget>> = { ...environment };
  for (const cls of QUOTA_CLASSES) {
    const own = tenant[cls];
    const budget = typeof own === 'string' ? parseBudget(own) : null;
    if (budget !== null && typeof budget !== 'string') merged[cls] = budget;
  }
  return Object.freeze(merged);
}
