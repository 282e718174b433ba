// The modules of src/ and what each may import: the one declaration behind .dependency-cruiser.cjs (the CI check)
// and the picture in docs/architecture.md (test/architecture.e2e-spec.ts holds the two equal). Every module may
// also use `common` and `config`; common uses nothing of the product, config only common.
/** @type {Record<string, string[]>} */
const MODULES = {
  telemetry: [],
  vault: [],
  database: [],
  changes: [],
  upstream: ['telemetry'],
  auth: ['changes', 'database'],
  cli: ['database', 'vault'],
  audit: ['auth', 'database'],
  tenants: ['audit', 'auth', 'database', 'vault'],
  events: ['database', 'telemetry', 'tenants'],
  connections: ['audit', 'auth', 'database', 'events', 'tenants', 'upstream', 'vault'],
  refresh: ['connections', 'events', 'telemetry', 'upstream', 'vault'],
  routing: ['changes', 'connections', 'refresh', 'telemetry', 'tenants', 'upstream'],
  retention: ['audit', 'auth', 'connections', 'database', 'events', 'tenants'],
  webhooks: ['audit', 'database', 'events', 'routing', 'telemetry', 'upstream', 'vault'],
  console: ['audit', 'auth', 'telemetry'],
  facade: ['auth', 'routing', 'telemetry', 'upstream', 'webhooks'],
  ops: ['auth', 'database', 'telemetry', 'upstream', 'vault'],
};
const EVERYWHERE = ['common', 'config'];

module.exports = { MODULES, EVERYWHERE };
