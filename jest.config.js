// NestJS 12 is ESM-only, so jest runs in ESM mode (node --experimental-vm-modules, see package.json).
const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: false },
      target: 'es2022',
    },
    module: { type: 'es6' },
  },
];
const common = {
  extensionsToTreatAsEsm: ['.ts'],
  // The sandbox package from its sources (its package.json points a plain import at its built dist/).
  moduleNameMapper: {
    '^(\\.{1,2}/.*)\\.js$': '$1',
    '^cws-sandbox$': '<rootDir>/packages/cws-sandbox/src/index.ts',
    '^cws-sandbox/testing$': '<rootDir>/packages/cws-sandbox/test/helpers.ts',
  },
  transform: { '^.+\\.ts$': swc },
  testEnvironment: 'node',
};
export default {
  // Per-project testTimeout is ignored by jest 30: it is a global option.
  testTimeout: 60000,
  projects: [
    '<rootDir>/packages/cws-sandbox',
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/src/**/*.spec.ts'] },
    {
      ...common,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.mjs',
      globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
    },
  ],
};
