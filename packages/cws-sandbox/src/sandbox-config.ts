import { systemClock } from './clock.js';
import { SandboxHttpError } from './http-io.js';
import { parseQuotas } from './quota-meter.js';
import { randomToken } from './random-tokens.js';
import { parseListing } from './workflow-listing.js';
import { DEFAULT_SCOPES, defaultUsers } from './seed.js';
import type { SandboxConfig, SandboxOptions } from './types.js';

// The spec only says scopes have a dotted shape (5.1); this is the sandbox's reading of it.
const DOTTED_SCOPE = /^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)+$/;

/** Defaults a host of the sandbox may need to know before starting it (the client id it registers, its scopes, the token life). */
export const SANDBOX_DEFAULTS: Readonly<{ clientId: string; accessTokenTtlSeconds: number; scopes: readonly string[] }> = Object.freeze({
  clientId: 'cws-connect-sandbox',
  accessTokenTtlSeconds: 21600,
  scopes: DEFAULT_SCOPES,
});

export class SandboxConfigError extends Error {
  constructor(option: string, problem: string) {
    super(`sandbox option ${option} ${problem}`);
    this.name = 'SandboxConfigError';
  }
}

/** Applies defaults and refuses options that would make the emulator behave unlike the spec. */
export function resolveSandboxConfig(options: SandboxOptions): SandboxConfig {
  const clientId = options.clientId ?? SANDBOX_DEFAULTS.clientId;
  // A colon would make the Basic credentials ambiguous (client_id:client_secret).
  if (!clientId || clientId.includes(':')) throw new SandboxConfigError('clientId', 'must be non-empty and contain no colon');
  const clientSecret = options.clientSecret ?? randomToken(32);
  if (!clientSecret) throw new SandboxConfigError('clientSecret', 'must be non-empty');

  if (!Array.isArray(options.redirectUris) || options.redirectUris.length === 0) {
    throw new SandboxConfigError('redirectUris', 'must list at least one redirect URI');
  }
  for (const uri of options.redirectUris) {
    let parsed: URL;
    try {
      parsed = new URL(uri);
    } catch {
      throw new SandboxConfigError('redirectUris', `holds ${JSON.stringify(uri)}, which is not an absolute URI`);
    }
    // RFC 6749 3.1.2: the redirection endpoint URI must not include a fragment.
    if (parsed.hash || uri.includes('#'))
      throw new SandboxConfigError('redirectUris', `holds ${JSON.stringify(uri)}, which has a fragment`);
  }

  const scopes = [...(options.scopes ?? DEFAULT_SCOPES)];
  if (scopes.length === 0) throw new SandboxConfigError('scopes', 'must list at least one scope');
  for (const scope of scopes) {
    if (!DOTTED_SCOPE.test(scope))
      throw new SandboxConfigError('scopes', `holds ${JSON.stringify(scope)}, which is not a dotted scope name`);
  }
  if (new Set(scopes).size !== scopes.length) throw new SandboxConfigError('scopes', 'holds a duplicate');

  const users = (options.users ?? defaultUsers()).map((u) => ({ ...u }));
  const ids = new Set<string>();
  for (const user of users) {
    if (!user.id || ids.has(user.id)) throw new SandboxConfigError('users', `holds an empty or duplicate id ${JSON.stringify(user.id)}`);
    ids.add(user.id);
  }

  return Object.freeze({
    host: options.host ?? '127.0.0.1',
    port: wholeNumber('port', options.port ?? 0, 0, 65535),
    clientId,
    clientSecret,
    clientName: options.clientName ?? 'cws-connect',
    redirectUris: new Set(options.redirectUris),
    scopes: Object.freeze(scopes),
    scopeSet: new Set(scopes),
    accessTokenTtlSeconds: wholeNumber(
      'accessTokenTtlSeconds',
      options.accessTokenTtlSeconds ?? SANDBOX_DEFAULTS.accessTokenTtlSeconds,
      1,
      10 * 365 * 86400,
    ),
    codeTtlSeconds: wholeNumber('codeTtlSeconds', options.codeTtlSeconds ?? 60, 1, 86400),
    users: Object.freeze(users),
    recordLimit: wholeNumber('recordLimit', options.recordLimit ?? 10000, 0, 10_000_000),
    webhookDeliveryRetries: wholeNumber('webhookDeliveryRetries', options.webhookDeliveryRetries ?? 3, 0, 20),
    seedWorkflows: options.seedWorkflows ?? false,
    clock: options.clock ?? systemClock,
    quotas: quotasOption(options.quotas),
    listing: listingOption(options.listing),
  });
}

function wholeNumber(option: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new SandboxConfigError(option, `must be a whole number from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}

function quotasOption(quotas: SandboxOptions['quotas']): SandboxConfig['quotas'] {
  try {
    return Object.freeze(parseQuotas(quotas ?? {}, 'quotas'));
  } catch (e) {
    if (e instanceof SandboxHttpError) throw new SandboxConfigError('quotas', e.description.replace(/^quotas /, ''));
    throw e;
  }
}

function listingOption(listing: SandboxOptions['listing']): SandboxConfig['listing'] {
  try {
    return Object.freeze(parseListing(listing ?? { pageSize: null }, 'listing'));
  } catch (e) {
    if (e instanceof SandboxHttpError) throw new SandboxConfigError('listing', e.description.replace(/^listing\.?/, ''));
    throw e;
  }
}
