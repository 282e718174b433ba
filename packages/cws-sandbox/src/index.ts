// The sandbox's public face: what a host (cws-connect, its tests and benchmarks) may use.
export { SandboxServer } from './sandbox-server.js';
export { SANDBOX_DEFAULTS, SandboxConfigError } from './sandbox-config.js';
export type * from './types.js';
