import { badRequest, isPlainObject, parseHttpUrl, readJson, SandboxHttpError, sendJson } from './http-io.js';
import { authenticate, type Principal } from './resource-auth.js';
import type { SandboxCall, SandboxRuntime } from './sandbox-runtime.js';
import { redactedView } from './webhook-store.js';

const SCOPE = 'webhooks.manage';
const WEBHOOK_FIELDS = new Set(['events', 'targetURL', 'headers']);
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
// Hop-by-hop and framing headers are the sender's business; a webhook may not configure them.
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'connection',
  'transfer-encoding',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'proxy-connection',
]);

/** Spec 1 rule 5: webhook endpoints take company admin tokens only (403 is the sandbox's choice of status). */
function adminOnly(call: SandboxCall, rt: SandboxRuntime): Principal | null {
  const principal = authenticate(call, rt, SCOPE);
  if (!principal) return null;
  if (!principal.user.isAdmin)
    throw new SandboxHttpError(403, 'admin_required', 'Webhook endpoints take tokens of a company administrator only');
  return principal;
}

export async function handleCreateWebhook(call: SandboxCall, rt: SandboxRuntime): Promise<void> {
  if (!adminOnly(call, rt)) return;
  const body = await readJson(call.req);
  const input = webhookInput(body);
  const webhook = rt.webhooks.create(input);
  call.record.outcome = 'ok';
  sendJson(call.res, 201, redactedView(webhook));
}

export function handleListWebhooks(call: SandboxCall, rt: SandboxRuntime): void {
  if (!adminOnly(call, rt)) return;
  call.record.outcome = 'ok';
  sendJson(call.res, 200, { webhooks: rt.webhooks.list().map(redactedView) });
}

/** Spec 2.3, validated strictly: events (non-empty, strings), targetURL (absolute http(s)), headers (name → string). */
function webhookInput(body: unknown): { events: string[]; targetURL: string; headers: Record<string, string> } {
  if (!isPlainObject(body)) throw badRequest('invalid_body', 'The body must be a JSON object');
  for (const key of Object.keys(body)) if (!WEBHOOK_FIELDS.has(key)) throw badRequest('unknown_field', `${key} is not a known field`);

  const { events, targetURL, headers } = body;
  if (
    !Array.isArray(events) ||
    events.length === 0 ||
    !events.every((e): e is string => typeof e === 'string' && e.length > 0 && e.length <= 200)
  ) {
    throw badRequest('invalid_events', 'events must be a non-empty array of event kind names');
  }
  if (new Set(events).size !== events.length) throw badRequest('invalid_events', 'events holds a duplicate');
  if (typeof targetURL !== 'string' || !parseHttpUrl(targetURL))
    throw badRequest('invalid_target_url', 'targetURL must be an absolute http(s) URL');

  const configured: Record<string, string> = {};
  if (headers !== undefined) {
    if (!isPlainObject(headers)) throw badRequest('invalid_headers', 'headers must be an object of header name to string value');
    const seen = new Set<string>();
    for (const [name, value] of Object.entries(headers)) {
      const lower = name.toLowerCase();
      if (!HEADER_NAME.test(name) || RESERVED_HEADERS.has(lower))
        throw badRequest('invalid_headers', `${name} is not a header a webhook may set`);
      if (seen.has(lower)) throw badRequest('invalid_headers', `${name} is given more than once`);
      if (typeof value !== 'string' || !HEADER_VALUE.test(value))
        throw badRequest('invalid_headers', `The value of ${name} must be a string without control characters`);
      seen.add(lower);
      configured[name] = value;
    }
  }
  return { events, targetURL, headers: configured };
}
