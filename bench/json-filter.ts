// The event filter's evaluation (src/common/json-filter.ts): a 5-clause filter over delivered event bodies, against
// its floor measured in the same run: the same paths read and compared by hand (own-property lookups, no filter).
//
//   npx tsx bench/json-filter.ts
//
// Env: BENCH_BODIES (1000 distinct bodies, about a quarter of them matching), BENCH_BATCH (100 evaluations per timed
// batch), BENCH_BATCHES (20000 batches of each, alternated filter / floor after a warm-up).
//
// Figures per evaluation: p50 and p99 over the batches (a batch's time / its size), and p99 of single evaluations
// timed one by one (the timer's own cost included: an upper bound). Target: p99 <= 20 us. Not part of `npm test`.
import { performance } from 'node:perf_hooks';
import { compileJsonFilter } from '../src/common/json-filter.js';
import './harness.js'; // prints the runtime this bench runs on

const BODIES = Number(process.env.BENCH_BODIES ?? 1000);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const BATCHES = Number(process.env.BENCH_BATCHES ?? 20_000);
const TARGET_P99_US = 20;

/** Five clauses: a literal, $in, $gte, and an $or of $gt and an array-element $eq. */
const FILTER = {
  type: 'workflow.step_changed',
  'data.transition': { $in: ['Sign', 'Archive'] },
  'data.workflow.versionNumber': { $gte: 2 },
  $or: [{ 'data.workflow.attributes.priority': { $gt: 3 } }, { 'data.tags': 'urgent' }],
};

const { hasOwn } = Object;
type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const own = (o: unknown, k: string): unknown => (isObject(o) && hasOwn(o, k) ? o[k] : undefined);

/** The floor: the same five conditions read by hand, with the same own-property lookups and type checks. */
function byHand(body: unknown): boolean {
  if (own(body, 'type') !== 'workflow.step_changed') return false;
  const data = own(body, 'data');
  const transition = own(data, 'transition');
  if (transition !== 'Sign' && transition !== 'Archive') return false;
  const workflow = own(data, 'workflow');
  const version = own(workflow, 'versionNumber');
  if (typeof version !== 'number' || version < 2) return false;
  const priority = own(own(workflow, 'attributes'), 'priority');
  if (typeof priority === 'number' && priority > 3) return true;
  const tags = own(data, 'tags');
  return tags === 'urgent' || (Array.isArray(tags) && tags.includes('urgent'));
}

/** Bodies as the event endpoints deliver them, parsed from JSON text (as a delivery would be), varied. */
function bodies(n: number): unknown[] {
  const steps = ['Create', 'Review', 'Sign', 'Archive'];
  const out: unknown[] = [];
  for (let i = 0; i < n; i++) {
    const body = {
      type: i % 7 === 0 ? 'workflow.attribute_changed' : 'workflow.step_changed',
      timestamp: new Date(Date.UTC(2026, 10, 29, 0, 0, i)).toISOString(),
      data: {
        transition: steps[i % 4],
        tags: i % 3 === 0 ? ['legal', 'urgent'] : ['legal'],
        workflow: {
          id: `wf_${i}`,
          name: `Agreement ${i}`,
          versionNumber: (i % 5) + 1,
          lastModified: new Date(Date.UTC(2026, 10, 28, 0, 0, i)).toISOString(),
          attributes: { priority: i % 6, region: i % 2 === 0 ? 'EU' : 'US', owner: { team: 'legal' } },
        },
      },
    };
    out.push(JSON.parse(JSON.stringify(body)));
  }
  return out;
}

function percentile(sorted: Float64Array, q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function main(): void {
  const compileStarted = performance.now();
  const compiled = compileJsonFilter(FILTER);
  const compileUs = (performance.now() - compileStarted) * 1000;
  if (!compiled.ok) throw new Error(`the filter does not compile: ${compiled.path}: ${compiled.message}`);
  const { filter } = compiled;
  const list = bodies(BODIES);
  let matching = 0;
  for (const body of list) {
    const a = filter.matches(body);
    if (a !== byHand(body)) throw new Error(`the filter and the floor disagree on ${JSON.stringify(body)}`);
    if (a) matching++;
  }
  console.log(`${BODIES} bodies, ${matching} matching; compiled in ${compileUs.toFixed(0)} us (first call, cold)`);

  const evaluate = [(b: unknown) => filter.matches(b), byHand];
  const samples = [new Float64Array(BATCHES), new Float64Array(BATCHES)];
  let sink = 0;
  let cursor = 0;
  const batch = (k: number): number => {
    const run = evaluate[k];
    const started = performance.now();
    for (let i = 0; i < BATCH; i++) {
      if (run(list[cursor])) sink++;
      cursor = cursor + 1 === list.length ? 0 : cursor + 1;
    }
    return ((performance.now() - started) * 1000) / BATCH;
  };
  for (let w = 0; w < Math.min(2000, BATCHES); w++) batch(w % 2);
  for (let r = 0; r < BATCHES; r++) {
    // Alternate which goes first, so that neither always follows the other.
    const first = r % 2;
    samples[first][r] = batch(first);
    samples[1 - first][r] = batch(1 - first);
  }
  const singles = [new Float64Array(BATCHES), new Float64Array(BATCHES)];
  for (let r = 0; r < BATCHES; r++) {
    for (const k of [r % 2, 1 - (r % 2)]) {
      const body = list[r % list.length];
      const started = process.hrtime.bigint();
      if (evaluate[k](body)) sink++;
      singles[k][r] = Number(process.hrtime.bigint() - started) / 1000;
    }
  }
  for (const s of [...samples, ...singles]) s.sort();
  const [f, h] = samples;
  const row = (name: string, batched: Float64Array, single: Float64Array) =>
    `${name.padEnd(24)} p50 ${percentile(batched, 0.5).toFixed(3)} us   p99 ${percentile(batched, 0.99).toFixed(3)} us   ` +
    `single-call p99 ${percentile(single, 0.99).toFixed(3)} us`;
  console.log(row('filter (5 clauses)', f, singles[0]));
  console.log(row('floor (by hand)', h, singles[1]));
  const ratio50 = percentile(f, 0.5) / percentile(h, 0.5);
  const ratio99 = percentile(f, 0.99) / percentile(h, 0.99);
  console.log(`filter / floor: p50 ${ratio50.toFixed(2)}x, p99 ${ratio99.toFixed(2)}x`);
  const p99 = Math.max(percentile(f, 0.99), percentile(singles[0], 0.99));
  console.log(`target p99 <= ${TARGET_P99_US} us: ${p99 <= TARGET_P99_US ? 'met' : 'MISSED'} (${p99.toFixed(3)} us, the larger p99)`);
  if (sink < 0) console.log(sink);
}

main();
