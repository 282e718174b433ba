// The sandbox's own specs, runnable alone (`npm test -w packages/cws-sandbox`); the root jest config runs them too.
export default {
  testTimeout: 60000,
  displayName: 'cws-sandbox',
  testMatch: ['<rootDir>/test/**/*.spec.ts'],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'es6' } }] },
  testEnvironment: 'node',
};
