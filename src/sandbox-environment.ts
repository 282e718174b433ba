import type { SandboxQuotas, SandboxServer } from 'cws-sandbox';
import type { QuotaBudgets } from './config/quota-budgets.js';
import type { AppConfig } from './config/app-config.js';
import type { CwsEnvironment } from './config/environment-config.js';

/**
 * The configuration with the `sandbox` environment pointing at the running in-process sandbox (SANDBOX=on):
 * its address, and the client id, secret and scopes it registered, so that the sandbox's own defaults reach
 * the service only from the sandbox that service.ts started.
 */
export function withSandboxEnvironment(
  config: AppConfig,
  sandbox: Pick<SandboxServer, 'url' | 'clientId' | 'clientSecret' | 'scopes'>,
): AppConfig {
  const environment: CwsEnvironment = Object.freeze({
    name: 'sandbox',
    authUrl: sandbox.url,
    apiUrl: sandbox.url,
    clientId: sandbox.clientId,
    clientSecret: sandbox.clientSecret,
    scopes: Object.freeze([...sandbox.scopes]) as string[],
    tokenAuth: 'body',
    userinfoMethod: 'GET',
    quotas: config.sandbox.quotas,
    listing: config.sandbox.listing,
  });
  return Object.freeze({ ...config, environments: Object.freeze({ ...config.environments, sandbox: environment }) });
}

/** CWS_SANDBOX_QUOTAS as the in-process sandbox's own limits: the demo's upstream enforces the budget the service keeps. */
export function sandboxQuotas(budgets: QuotaBudgets): SandboxQuotas {
  const limits: SandboxQuotas = {};
  for (const cls of ['read', 'write'] as const) {
    const budget = budgets[cls];
    if (budget) limits[cls] = { calls: budget.calls, windowSeconds: budget.windowMs / 1000 };
  }
  return limits;
}
