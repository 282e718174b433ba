import { randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { loadConfig } from './app-config.js';
import { ConfigError } from './config-error.js';
import { budgetsInForce, parseBudget, quotaBudgets, quotaClassOf } from './quota-budgets.js';

const base = {
  VAULT_KEYS: `k1:${randomBytes(32).toString('base64')}`,
  OPERATOR_API_KEY: `cwsop_${randomBytes(24).toString('base64url')}`,
  DATABASE_URL: 'postgres://x@127.0.0.1/db',
  DATA_DIR: '/nonexistent',
  SANDBOX: 'off',
};
const na = { CWS_NA_AUTH_URL: 'https://na.example', CWS_NA_CLIENT_ID: 'id', CWS_NA_CLIENT_SECRET: 'secret' };

describe('upstream budgets: CWS_<ENV>_QUOTAS and a tenant’s quotas', () => {
  it('reads <calls>/<window> per class; GET and HEAD are reads, every other method a write', () => {
    expect(parseBudget('400/60s')).toEqual({ calls: 400, windowMs: 60_000, text: '400/60s' });
    expect(parseBudget(' 10/1h ')).toEqual({ calls: 10, windowMs: 3_600_000, text: '10/1h' });
    expect(quotaBudgets('read=400/60s, write=40/1m')).toEqual({
      read: { calls: 400, windowMs: 60_000, text: '400/60s' },
      write: { calls: 40, windowMs: 60_000, text: '40/1m' },
    });
    expect(['GET', 'HEAD', 'POST', 'PATCH', 'DELETE'].map(quotaClassOf)).toEqual(['read', 'read', 'write', 'write', 'write']);
  });

  it('stops the start with one line naming the variable', () => {
    const cases: Array<[string, RegExp]> = [
      ['read=400', /CWS_NA_QUOTAS: read: a budget is <calls>\/<window>/],
      ['reads=400/60s', /CWS_NA_QUOTAS: names the classes read and write/],
      ['read=400/60s,read=10/1s', /names the class read twice/],
      ['read=0/60s', /the calls of a budget are 1 to/],
      ['write=5/0s', /the window of a budget is 1s to 24h/],
      ['write=5/25h', /the window of a budget is 1s to 24h/],
    ];
    for (const [value, message] of cases) {
      let error: unknown;
      try {
        loadConfig({ ...base, ...na, CWS_NA_QUOTAS: value });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(message);
    }
    expect(loadConfig({ ...base, ...na, CWS_NA_QUOTAS: 'read=400/60s' }).environments.na?.quotas.read?.calls).toBe(400);
    expect(loadConfig({ ...base, ...na }).environments.na?.quotas).toEqual({});
    expect(loadConfig({ ...base, ...na, QUOTA_MAX_WAIT_MS: '0' }).quota.maxWaitMs).toBe(0);
    expect(loadConfig({ ...base, ...na }).quota.maxWaitMs).toBe(250);
  });

  it("a tenant's own budget replaces its environment's class by class", () => {
    const environment = quotaBudgets('read=400/60s,write=40/60s');
    expect(budgetsInForce(environment, null)).toBe(environment);
    const merged = budgetsInForce(environment, { read: '10/1s' });
    expect([merged.read?.text, merged.write?.text]).toEqual(['10/1s', '40/60s']);
  });
});
