import { quotaBudgets } from './quota-budgets.js';
import { scopeList } from './value-formats.js';
import { optional, variable } from './variable.js';
import { httpUrl, oneOf, parsedBy, text } from './variable-types.js';

/** One family per upstream environment, CWS_<ENV>_ before each name (ENV: NA, EU, DEMO, SANDBOX). */
export const ENVIRONMENT_VARIABLES = {
  AUTH_URL: optional(
    'upstream environments',
    httpUrl(),
    "{base_url} of that environment's authorize and token calls (`<ENV>` = `NA`, `EU`, `DEMO`)",
    {
      defaultText: 'unset: the environment is not configured',
    },
  ),
  API_URL: optional('upstream environments', httpUrl(), "base address of that environment's resource calls (may carry a path prefix)", {
    defaultText: 'same as `CWS_<ENV>_AUTH_URL`',
  }),
  CLIENT_ID: optional('upstream environments', text(), 'the id of the client application registered in that environment', {
    defaultText: 'required when the environment is configured',
  }),
  CLIENT_SECRET: optional('upstream environments', text(), 'the secret of the client application registered in that environment', {
    defaultText: 'required when the environment is configured',
  }),
  SCOPES: variable('upstream environments', parsedBy(scopeList), [], "the application's registered scopes, space separated", {
    defaultText: 'empty',
  }),
  TOKEN_AUTH: variable(
    'upstream environments',
    oneOf(['body', 'header']),
    'body',
    'how client credentials reach the token endpoint: `body` (JSON body) or `header` (`Authorization: Basic base64(id:secret)`)',
  ),
  USERINFO_METHOD: variable(
    'upstream environments',
    oneOf(['GET', 'POST']),
    'GET',
    'the method of `/userinfo` (the spec does not show it): `GET` or `POST`',
  ),
  QUOTAS: variable(
    'upstream environments',
    parsedBy(quotaBudgets),
    {},
    "each company's budget of resource calls: `<class>=<calls>/<window>` pairs, comma separated, e.g. `read=400/60s,write=40/60s` (`read`: `GET`/`HEAD`, `write`: the others; see `docs/quotas.md`)",
    { defaultText: "unset: no budget is enforced (the upstream's `429`s are still honoured)" },
  ),
  WORKFLOWS_QUERY: variable(
    'upstream environments',
    text(0),
    '',
    'query string synced records send with `GET /workflows` (the spec shows no parameters), without `?`; see `docs/records.md`',
    { defaultText: 'empty' },
  ),
  WORKFLOWS_ITEMS: variable(
    'upstream environments',
    text(0),
    '',
    "where the list is in `GET /workflows`' answer (not shown by the spec): empty for a top-level JSON array (or an object's `workflows` array), else the name of the property holding it",
    { defaultText: 'empty' },
  ),
  WORKFLOW_ID_FIELD: variable(
    'upstream environments',
    text(),
    'id',
    "a workflow's id in the upstream's answers (not shown by the spec), read by synced records",
  ),
} as const;
