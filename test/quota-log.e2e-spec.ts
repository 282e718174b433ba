import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { parseBudget, type Budget, type QuotaClass } from '../src/config/quota-budgets.js';
import { leaseRuleOf, logOf, type QuotaLane } from '../src/quota/lane-policy.js';
import { QuotaWindowsRepository } from '../src/quota/quota-windows.repository.js';
import { newTenant } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';

interface Grant {
  at: number;
  lane: QuotaLane;
  units: number;
}

/** The most units granted within any interval of `lengthMs` (every interval that ends at a grant: the worst ones). */
function mostWithin(grants: Grant[], lengthMs: number, lane?: QuotaLane): number {
  const of = grants.filter((g) => g.units > 0 && (lane === undefined || g.lane === lane));
  let most = 0;
  let from = 0;
  let sum = 0;
  for (let i = 0; i < of.length; i++) {
    sum += of[i].units;
    while (of[from].at <= of[i].at - lengthMs) sum -= of[from++].units;
    most = Math.max(most, sum);
  }
  return most;
}

/**
 * The lease of the sliding log (cws_quota_lease_v1) on the real database, in simulated time (`atMs`): the rule of
 * docs/quotas.md ("The bound", "Lanes") without waiting for a clock.
 */
describe('the sliding log of a budget (cws_quota_lease_v1)', () => {
  let t: TestApp;
  let repo: QuotaWindowsRepository;
  const T0 = Date.UTC(2027, 0, 1, 12, 0, 0, 0);

  beforeAll(async () => {
    t = await startTestApp();
    repo = t.app.get(QuotaWindowsRepository, { strict: false });
    for (const id of ['any-window', 'people-first', 'give-back', 'new-budget']) await newTenant(t, id);
  });
  afterAll(() => t.close());

  function leaser(tenantId: string, cls: QuotaClass, budget: Budget) {
    const log = logOf(budget);
    const grants: Grant[] = [];
    return {
      log,
      grants,
      async lease(lane: QuotaLane, want: number, at: number) {
        const answer = await repo.lease(tenantId, cls, log, lane, want, leaseRuleOf(budget.calls), at);
        grants.push({ at, lane, units: answer.units });
        return answer;
      },
    };
  }

  it('grants at most the budget within any span, over three spans of demand at three times the budget', async () => {
    const budget = parseBudget('200/10s') as Budget;
    const l = leaser('any-window', 'read', budget);
    // Three "instances" asking in turn, people, agents and background alike, each every 40 ms of simulated time.
    const lanes: QuotaLane[] = ['interactive', 'agent', 'background'];
    let at = T0;
    for (let step = 0; at < T0 + 3 * l.log.spanMs; step++) {
      at += 40;
      const lane = lanes[step % 3];
      await l.lease(lane, 1 + (step % 4), at);
    }
    const total = (lane?: QuotaLane) => l.grants.filter((g) => lane === undefined || g.lane === lane).reduce((n, g) => n + g.units, 0);
    expect(mostWithin(l.grants, l.log.spanMs)).toBeLessThanOrEqual(budget.calls);
    // Whole spans are used: three spans' demand far past the budget, three budgets granted (less the log's last bucket each).
    expect(total()).toBeGreaterThanOrEqual(Math.floor(3 * budget.calls * 0.9));
    console.log(
      `200/10s at 3x for 3 spans: granted ${total()} (people ${total('interactive')}, agents ${total('agent')}, background ${total('background')}), most in any span ${mostWithin(l.grants, l.log.spanMs)}`,
    );
  });

  it('serves people first: people at half the budget get all they ask, agents at twice it get what people leave', async () => {
    const budget = parseBudget('400/60s') as Budget;
    const l = leaser('people-first', 'read', budget);
    // From the first moment both lanes call: people at 0.5x the budget, agents at 2x, each asking every 100 ms for what came since.
    const rate = { interactive: (0.5 * budget.calls) / budget.windowMs, agent: (2 * budget.calls) / budget.windowMs };
    const owed = { interactive: 0, agent: 0 };
    let askedPeople = 0;
    let grantedPeople = 0;
    for (let at = T0 + 100; at <= T0 + 3 * budget.windowMs; at += 100) {
      for (const lane of ['interactive', 'agent'] as const) {
        owed[lane] += rate[lane] * 100;
        const want = Math.floor(owed[lane]);
        if (want === 0) continue;
        const answer = await l.lease(lane, want, at);
        if (lane === 'interactive') {
          askedPeople += want;
          grantedPeople += answer.units;
          owed.interactive -= want; // a person's call is served or refused, never queued for minutes
        } else {
          owed.agent -= answer.units;
          owed.agent = Math.min(owed.agent, 10); // agents' callers give up too
          if (answer.units < want) expect(answer.waitMs).toBeGreaterThan(0);
        }
      }
    }
    const agents = l.grants.filter((g) => g.lane === 'agent');
    const lastSpan = agents.filter((g) => g.at > T0 + 3 * budget.windowMs - l.log.spanMs).reduce((n, g) => n + g.units, 0);
    console.log(
      `400/60s, people 0.5x, agents 2x, 3 windows: people ${grantedPeople} of ${askedPeople}; agents in the last span ${lastSpan}; most in any span ${mostWithin(l.grants, l.log.spanMs)}`,
    );
    expect(grantedPeople).toBe(askedPeople);
    expect(mostWithin(l.grants, l.log.spanMs)).toBeLessThanOrEqual(budget.calls);
    // Agents get the rest, less room for people's pace x 1.2 a tenth of a span ahead: about 400 - 200 - 24 a span.
    expect(lastSpan).toBeGreaterThanOrEqual(140);
    expect(lastSpan).toBeLessThanOrEqual(400 - 200);
  });

  it('takes back units given back while the log holds their bucket, and ignores them once it does not', async () => {
    const budget = parseBudget('10/10s') as Budget;
    const l = leaser('give-back', 'write', budget);
    const first = await l.lease('interactive', 10, T0);
    expect(first.units).toBe(10);
    const refused = await l.lease('interactive', 1, T0 + 1000);
    expect(refused.units).toBe(0);
    // The refusal names when the first grant leaves the span: no sooner, and within a bucket of it.
    expect(refused.waitMs).toBeGreaterThanOrEqual(l.log.spanMs - 1000 - l.log.bucketMs);
    expect(refused.waitMs).toBeLessThanOrEqual(l.log.spanMs - 1000 + l.log.bucketMs);
    await repo.giveBack('give-back', 'write', l.log, first.bucket, 'interactive', 4);
    expect((await l.lease('interactive', 10, T0 + 2000)).units).toBe(4);
    expect((await l.lease('interactive', 10, T0 + l.log.spanMs + l.log.bucketMs + 1)).units).toBe(6);
    // A give-back for a bucket the log no longer holds changes nothing.
    await repo.giveBack('give-back', 'write', l.log, first.bucket, 'interactive', 10);
    expect((await l.lease('interactive', 10, T0 + l.log.spanMs + l.log.bucketMs + 2)).units).toBe(0);
  });

  it('counts what was granted under an old budget as granted now when the budget changes', async () => {
    const before = leaser('new-budget', 'read', parseBudget('10/10s') as Budget);
    expect((await before.lease('interactive', 8, T0)).units).toBe(8);
    const after = leaser('new-budget', 'read', parseBudget('12/20s') as Budget);
    expect((await after.lease('interactive', 10, T0 + 5000)).units).toBe(4);
    // Later than the old span, the 8 are still counted: the new span started when the budget changed.
    expect((await after.lease('interactive', 10, T0 + 15_000)).units).toBe(0);
    expect((await after.lease('interactive', 20, T0 + 5000 + after.log.spanMs + after.log.bucketMs)).units).toBe(12);
  });
});
