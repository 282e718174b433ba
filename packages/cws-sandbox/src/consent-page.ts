import { escapeHtml } from './http-io.js';
import type { SandboxUser } from './user-directory.js';

export interface ConsentView {
  readonly clientName: string;
  readonly companyName: string;
  readonly scopes: readonly string[];
  readonly users: readonly SandboxUser[];
  /** Hidden fields posted back with the decision (the pending request id plus a copy of the request). */
  readonly hidden: ReadonlyArray<readonly [string, string]>;
  readonly selectedUserId?: string;
  readonly error?: string;
}

const STYLE = `body{font-family:system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1d2330}
h1{font-size:1.3rem}fieldset{border:1px solid #ccd;border-radius:6px;margin:1rem 0}
label{display:block;padding:.3rem 0}.admin{color:#8a4b00;font-size:.85em}
.error{background:#fde8e8;border:1px solid #e0a0a0;padding:.5rem;border-radius:6px}
button{font-size:1rem;padding:.5rem 1.2rem;margin-right:.6rem}.note{color:#667;font-size:.85em}`;

export function renderConsentPage(view: ConsentView): string {
  const scopes = view.scopes.map((s) => `<li><code>${escapeHtml(s)}</code></li>`).join('');
  const users = view.users
    .map((u) => {
      const checked = u.id === view.selectedUserId ? ' checked' : '';
      const admin = u.isAdmin ? ' <span class="admin">(company admin)</span>' : '';
      return `<label><input type="radio" name="user" value="${escapeHtml(u.id)}" required${checked}> ${escapeHtml(u.name)} &lt;${escapeHtml(u.email)}&gt;${admin}</label>`;
    })
    .join('\n');
  const hidden = view.hidden.map(([n, v]) => `<input type="hidden" name="${escapeHtml(n)}" value="${escapeHtml(v)}">`).join('\n');
  const error = view.error ? `<p class="error" role="alert">${escapeHtml(view.error)}</p>` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorize ${escapeHtml(view.clientName)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head>
<body>
<h1>Contract Workflow Service (sandbox)</h1>
<p><strong>${escapeHtml(view.clientName)}</strong> asks for access to your account at <strong>${escapeHtml(view.companyName)}</strong> with these scopes:</p>
<ul id="scopes">${scopes}</ul>
${error}
<form method="post" action="/oauth/authorize">
${hidden}
<fieldset><legend>Log in as</legend>
${users}
</fieldset>
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny" formnovalidate>Deny</button>
</form>
<p class="note">Sandbox: choosing a user stands in for logging in; there are no passwords.</p>
</body></html>`;
}

export function renderErrorPage(title: string, message: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title><style>${STYLE}</style></head>
<body><h1>${escapeHtml(title)}</h1><p class="error" id="error">${escapeHtml(message)}</p></body></html>`;
}
