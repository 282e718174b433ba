import { randomUUID } from 'node:crypto';
import type { Clock } from './types.js';

export interface Webhook {
  readonly id: string;
  readonly events: readonly string[];
  readonly targetURL: string;
  /** As configured, Authorization included: deliveries send them unchanged. Never answered unredacted. */
  readonly headers: Readonly<Record<string, string>>;
  readonly createdAt: string;
}

export const REDACTED = '[REDACTED]';

/** The company's webhooks (the sandbox has one company). */
export class WebhookStore {
  private readonly hooks = new Map<string, Webhook>();

  constructor(private readonly clock: Clock) {}

  create(input: { events: readonly string[]; targetURL: string; headers: Record<string, string> }): Webhook {
    const webhook: Webhook = {
      id: `wh_${randomUUID()}`,
      events: [...input.events],
      targetURL: input.targetURL,
      headers: { ...input.headers },
      createdAt: new Date(this.clock()).toISOString(),
    };
    this.hooks.set(webhook.id, webhook);
    return webhook;
  }

  list(): Webhook[] {
    return [...this.hooks.values()];
  }

  subscribedTo(kind: string): Webhook[] {
    return this.list().filter((w) => w.events.includes(kind));
  }
}

/** The webhook as answered by the API: every Authorization header value (any letter case) redacted (spec 2.3). */
export function redactedView(webhook: Webhook): Webhook {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(webhook.headers)) headers[name] = name.toLowerCase() === 'authorization' ? REDACTED : value;
  return { ...webhook, headers };
}
