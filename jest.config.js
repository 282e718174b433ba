// NestJS 12 is ESM-only, so jest runs in ESM mode (node --experimental-vm-modules, see package.json).
import { requireSupportedRuntime } from './tools/runtime.mjs';

requireSupportedRuntime();
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
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': swc },
  testEnvironment: 'node',
  // The workspace packages are imported by name and run from their TypeScript source (see their package.json).
  testEnvironmentOptions: { customExportConditions: ['node', 'node-addons', 'cws-connect-source'] },
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
