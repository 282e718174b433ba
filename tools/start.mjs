// `npm start`: build when a source changed (tools/build.mjs), then run the service in this same process,
// so that signals (Ctrl-C, a container's SIGTERM) reach the service itself.
import { enableCompileCache, flushCompileCache } from 'node:module';
import { fileURLToPath } from 'node:url';
import { build } from './build.mjs';
import { requireSupportedRuntime } from './runtime.mjs';

requireSupportedRuntime();
// V8's compiled code of every module the service loads (its own and its dependencies'), kept between starts:
// the second start reads it instead of compiling again (a third of a start's CPU is compiling). Node checks
// each entry against its file's contents; a directory it cannot write to only costs the cache.
enableCompileCache(fileURLToPath(new URL('../node_modules/.cache/cws-connect-compile', import.meta.url)));
await build();
await import('../dist/src/main.js');
// The modules loaded so far are the service's; written now rather than at exit, which a SIGKILL never reaches.
flushCompileCache();
