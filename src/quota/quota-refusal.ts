import { AppError } from '../common/app-error.js';
import type { Budget, QuotaClass } from '../config/quota-budgets.js';
import type { QuotaLane } from './lane-policy.js';

/**
 * `429 quota_exhausted` with the seconds to wait (Retry-After, and `details.retryAfterSeconds` for callers that
 * read the body, such as an agent's tool result). `budget` null: the class is paused by the upstream's own 429.
 */
export function quotaRefusal(cls: QuotaClass, lane: QuotaLane, budget: Budget | null, waitMs: number): AppError {
  const seconds = Math.max(1, Math.ceil(waitMs / 1000));
  const message =
    budget === null
      ? `The upstream asked to slow down this company's ${cls} calls; retry after the seconds in Retry-After.`
      : `This company's upstream budget for ${cls} calls (${budget.text}) has no room for this ${lane} call now; retry after the seconds in Retry-After.`;
  return new AppError('quota_exhausted', message, { class: cls, lane, retryAfterSeconds: seconds }, seconds);
}
