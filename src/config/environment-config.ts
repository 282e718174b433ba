import { ConfigError } from './config-error.js';
import { ENVIRONMENT_VARIABLES } from './environment-variables.js';
import type { QuotaBudgets } from './quota-budgets.js';
import { stripSlash } from './value-formats.js';
import { readVariables, type Env, type Values } from './variable.js';

// The upstream environments (CWS_<ENV>_*, environment-variables.ts) as the typed config reads them: one family of
// variables per name, read again under each name's prefix.

export const ENVIRONMENT_NAMES = ['na', 'eu', 'demo', 'sandbox'] as const;
export type EnvironmentName = (typeof ENVIRONMENT_NAMES)[number];

export interface CwsEnvironment {
  name: EnvironmentName;
  /** {base_url} of the authorize and token calls. */
  authUrl: string;
  /** Base address of resource calls; may carry a path prefix. No trailing slash. */
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  scopes: string[];
  tokenAuth: 'body' | 'header';
  userinfoMethod: 'GET' | 'POST';
  quotas: QuotaBudgets; // CWS_<ENV>_QUOTAS: each company's budget per class (docs/quotas.md); empty: none
  /** How synced records read GET /workflows' answer (CWS_<ENV>_WORKFLOWS_*; the spec shows neither fields nor paging). */
  listing?: WorkflowListing;
}

/** GET /workflows as synced records read it (docs/records.md). */
export interface WorkflowListing {
  /** Sent as the query string, without `?`; empty: none. */
  query: string;
  /** The property of the answer holding the list; empty: a top-level array (or an object's `workflows`). */
  items: string;
  idField: string;
}

/** The environment `name` from its CWS_<ENV>_* family, or null when its AUTH_URL is unset. */
export function readEnvironment(env: Env, name: EnvironmentName, production: boolean): CwsEnvironment | null {
  const p = `CWS_${name.toUpperCase()}_`;
  const e = readVariables(env, ENVIRONMENT_VARIABLES, production, p);
  if (!e.AUTH_URL) return null;
  if (!e.CLIENT_ID) throw new ConfigError(`${p}CLIENT_ID`, `is required when ${p}AUTH_URL is set`);
  if (!e.CLIENT_SECRET) throw new ConfigError(`${p}CLIENT_SECRET`, `is required when ${p}AUTH_URL is set`);
  return {
    name,
    authUrl: stripSlash(e.AUTH_URL),
    apiUrl: stripSlash(e.API_URL ?? e.AUTH_URL),
    clientId: e.CLIENT_ID,
    clientSecret: e.CLIENT_SECRET,
    scopes: e.SCOPES,
    tokenAuth: e.TOKEN_AUTH,
    userinfoMethod: e.USERINFO_METHOD,
    quotas: e.QUOTAS,
    listing: listingOf(e),
  };
}

export function listingOf(e: Values<typeof ENVIRONMENT_VARIABLES>): WorkflowListing {
  return { query: e.WORKFLOWS_QUERY.replace(/^\?/, ''), items: e.WORKFLOWS_ITEMS, idField: e.WORKFLOW_ID_FIELD };
}
