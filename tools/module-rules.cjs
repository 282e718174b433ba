// The modules of src/ and what each may import: the one declaration behind .dependency-cruiser.cjs (the CI check)
// and the picture in docs/architecture.md (test/architecture.e2e-spec.ts holds the two equal). Every module may
// also use `common` and `config`; common uses nothing of the product, config only common.
/** @type {Record<string, string[]>} */
const MODULES = {
  telemetry: [],
  vault: ['audit', 'telemetry'],
  database: [],
  changes: [],
  quota: ['changes', 'database', 'telemetry'],
  upstream: ['telemetry'],
  auth: ['changes', 'database'],
  cli: ['database', 'vault', 'tenants'],
  audit: ['auth', 'database'],
  tenants: ['audit', 'auth', 'changes', 'database', 'quota', 'vault'],
  events: ['audit', 'auth', 'database', 'telemetry', 'tenants', 'vault'],
  connections: ['audit', 'database', 'events', 'tenants', 'upstream', 'vault'],
  connect: ['audit', 'auth', 'connections', 'tenants', 'upstream'],
  refresh: ['connections', 'events', 'telemetry', 'upstream', 'vault'],
  routing: ['changes', 'connections', 'quota', 'refresh', 'telemetry', 'tenants', 'upstream'],
  records: ['connections', 'events', 'quota', 'routing', 'telemetry', 'tenants', 'upstream', 'vault'],
  retention: ['agents', 'audit', 'auth', 'connect', 'connections', 'database', 'events', 'tenants'],
  webhooks: ['audit', 'database', 'events', 'records', 'routing', 'telemetry', 'upstream', 'vault'],
  console: ['audit', 'auth', 'telemetry'],
  facade: ['auth', 'routing', 'telemetry', 'upstream'],
  agents: [
    'audit',
    'auth',
    'changes',
    'connect',
    'connections',
    'facade',
    'records',
    'routing',
    'telemetry',
    'tenants',
    'upstream',
    'webhooks',
  ],
  edge: ['agents', 'facade', 'telemetry', 'webhooks'],
  ops: ['auth', 'database', 'telemetry', 'upstream', 'vault'],
};
const EVERYWHERE = ['common', 'config'];

module.exports = { MODULES, EVERYWHERE };
