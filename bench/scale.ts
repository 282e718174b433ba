// How the service's costs move as stored data grows: the figures of issue 24 at each size, as ratios to the
// first (smallest) size, against the real service (compiled, its own process) on data seeded through SQL.
//
//   npx tsx bench/scale.ts
//
// Env: SCALE_SIZES (connections per size, comma-separated; default 1000,100000,1000000), SCALE_TENANTS (10000),
// SCALE_EVENTS (events stored at each size: a count, or `<k>x` for k per connection; default 1x), SCALE_DUE
// (400: the due batch), SCALE_BACKLOG (50000: overdue connections after an outage, capped at half of the size),
// SCALE_SECONDS (3: each load phase), SCALE_PAGE_ROUNDS (5), SCALE_NODE_OPTIONS (the service's V8 flags; default
// "--max-old-space-size=256 --max-semi-space-size=16", as the deploy examples; empty for none), DATABASE_URL (a
// PostgreSQL server; a database per size is created and dropped), BENCH_SKIP_BUILD=1, BENCH_VERBOSE=1 (children's
// stderr). Not part of `npm test`.
//
// The build comes first: the rest of the bench imports the compiled sandbox package.
import { buildApp } from '../test/support/spawn-app.js';

if (!process.env.BENCH_SKIP_BUILD) buildApp();
await import('./scale-run.js');
