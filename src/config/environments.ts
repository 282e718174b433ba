import { AppError } from '../common/app-error.js';
import type { AppConfig } from './app-config.js';
import type { CwsEnvironment } from './environment-config.js';

/**
 * The upstream environments this service is configured for: which exist, with which URLs and OAuth client.
 * Connect, renewal, the facade and webhooks all ask here, and only here is an unknown one refused.
 */
export class Environments {
  constructor(private readonly byName: AppConfig['environments']) {}

  /** The environment `name`, or null when this service has none by that name (also for null and unknown names). */
  find(name: string | null | undefined): CwsEnvironment | null {
    if (!name || !Object.hasOwn(this.byName, name)) return null;
    return this.byName[name as keyof AppConfig['environments']] ?? null;
  }

  /** The environment `name`; 422 environment_not_configured when there is none. */
  get(name: string | null | undefined): CwsEnvironment {
    const env = this.find(name);
    if (!env) throw this.notConfigured(name);
    return env;
  }

  /** The one error for an environment this service cannot serve. */
  notConfigured(name: string | null | undefined): AppError {
    const variable = name ? ` (CWS_${name.toUpperCase()}_AUTH_URL)` : '';
    return new AppError('environment_not_configured', `The environment "${name ?? ''}" is not configured on this service${variable}.`);
  }

  all(): CwsEnvironment[] {
    return Object.values(this.byName).filter((e): e is CwsEnvironment => e !== undefined);
  }
}
