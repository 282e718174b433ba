// The module rules of docs/architecture.md ("Modules and their floors"), checked by `npm run lint:deps` in CI,
// made from the one declaration in tools/module-rules.cjs. The files at the top of src/ (main, service,
// app.module, drain, ...) assemble the app and may import any module; no module imports them.
const { MODULES, EVERYWHERE } = require('./tools/module-rules.cjs');
const ALL = [...Object.keys(MODULES), ...EVERYWHERE];

const moduleRules = Object.entries(MODULES).map(([name, allowed]) => {
  const forbidden = ALL.filter((m) => m !== name && !allowed.includes(m) && !EVERYWHERE.includes(m));
  return {
    name: `${name}-imports`,
    comment: `${name} may import ${[...allowed, ...EVERYWHERE].join(', ')} (docs/architecture.md)`,
    severity: 'error',
    from: { path: `^src/${name}/` },
    to: { path: forbidden.length ? `^src/(${forbidden.join('|')})/` : '^$' },
  };
});

module.exports = {
  forbidden: [
    ...moduleRules,
    {
      name: 'common-stands-alone',
      comment: 'common holds what every module may use and uses nothing of the product',
      severity: 'error',
      from: { path: '^src/common/' },
      to: { path: '^src/(?!common/)' },
    },
    {
      name: 'config-stands-low',
      comment: 'configuration uses only common',
      severity: 'error',
      from: { path: '^src/config/' },
      to: { path: '^src/(?!common/|config/)' },
    },
    {
      name: 'no-module-imports-the-assembly',
      comment: 'the files at the top of src/ assemble the app; no module imports them',
      severity: 'error',
      from: { path: '^src/[^/]+/' },
      to: { path: '^src/[^/]+\\.ts$' },
    },
    {
      name: 'every-folder-is-declared',
      comment: 'a new folder of src/ gets its row in MODULES (and in docs/architecture.md) first',
      severity: 'error',
      from: { path: `^src/(?!(${ALL.join('|')})/)[^/]+/` },
      to: {},
    },
    {
      name: 'packages-import-nothing-of-the-service',
      comment: 'the workspace packages (packages/) are published on their own: they never import src/',
      severity: 'error',
      from: { path: '^packages/' },
      to: { path: '^src/' },
    },
    {
      name: 'only-the-bootstrap-starts-the-sandbox',
      comment: 'the CWS sandbox package is started by the files at the top of src/ (service.ts, sandbox-environment.ts), never by a module',
      severity: 'error',
      from: { path: '^src/[^/]+/' },
      to: { path: '^packages/cws-sandbox/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-unresolvable',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    includeOnly: '^(src|packages)/',
    exclude: { path: '^packages/[^/]+/(node_modules|dist)/' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: {
      extensions: ['.ts', '.js'],
      exportsFields: ['exports'],
      conditionNames: ['cws-connect-source', 'import', 'node', 'default'],
    },
  },
};
