import type { SandboxServer } from 'cws-sandbox';
import type { AppConfig, CwsEnvironment } from './config/app-config.js';

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
  });
  return Object.freeze({ ...config, environments: Object.freeze({ ...config.environments, sandbox: environment }) });
}
