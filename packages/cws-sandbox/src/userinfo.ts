import { sendJson } from './http-io.js';
import { authenticate } from './resource-auth.js';
import type { SandboxCall, SandboxRuntime } from './sandbox-runtime.js';

/**
 * GET or POST /userinfo (spec 2.6; the method is not shown, so both are accepted). The field names are
 * the sandbox's own: the spec lists the content (id, e-mail, username, profile, scopes), not the names.
 */
export function handleUserinfo(call: SandboxCall, rt: SandboxRuntime): void {
  const principal = authenticate(call, rt, 'userinfo.read');
  if (!principal) return;
  const { user } = principal;
  call.record.outcome = 'ok';
  sendJson(call.res, 200, {
    id: user.id,
    email: user.email,
    username: user.username,
    name: user.name,
    companyId: user.companyId,
    scopes: principal.scopes,
  });
}
