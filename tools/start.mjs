// `npm start`: build when a source changed (tools/build.mjs), then run the service in this same process,
// so that signals (Ctrl-C, a container's SIGTERM) reach the service itself.
import { build } from './build.mjs';
import { requireSupportedRuntime } from './runtime.mjs';

requireSupportedRuntime();
build();
await import('../dist/src/main.js');
