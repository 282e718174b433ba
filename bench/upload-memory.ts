// What a large streamed upload costs the service in memory: each instance is started fresh, warmed with a 4 MiB
// upload, then sent one multipart upload of UPLOAD_MIB through the facade (`POST /workflows`), its resident size
// sampled every 50 ms (and its high-water mark read after); the figure is the peak's growth over the resident size
// just before. Instances alternate between the variants, ROUNDS times.
//   npx tsx bench/upload-memory.ts
// Env: UPLOAD_MIB (1024), ROUNDS (2), UPLOAD_RUNTIMES (node binaries, comma-separated; default this process's),
// UPLOAD_VARIANTS (node flags per variant, e.g. V8's heap flags, separated by `|`; default one variant, none).
// Not part of `npm test` (test/facade-upload.e2e-spec.ts holds the bound).
import { writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { memoryOf, uploadMultipart } from '../test/support/multipart-upload.js';
import { finish, median, withStack, type Stack } from './harness.js';

const MIB = 1024 * 1024;
const SIZE = Number(process.env.UPLOAD_MIB ?? 1024) * MIB;
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const RUNTIMES = (process.env.UPLOAD_RUNTIMES ?? process.execPath).split(',').filter(Boolean);
const VARIANTS = (process.env.UPLOAD_VARIANTS ?? '').split('|');

async function measure(stack: Stack, key: string, node: string, nodeOptions: string): Promise<number> {
  const { url, proc } = await stack.startApp(nodeOptions.split(' ').filter(Boolean), node);
  const pid = proc.pid ?? 0;
  try {
    const target = `${url}/v1/tenants/big/workflows`;
    const headers = { authorization: `Bearer ${key}`, 'x-user-id': 'u-alice' };
    if ((await uploadMultipart(target, headers, 4 * MIB)).status !== 201) throw new Error('the warm-up upload failed');
    await new Promise((r) => setTimeout(r, 300));
    const before = memoryOf(pid);
    writeFileSync(`/proc/${pid}/clear_refs`, '5'); // resets VmHWM to the current RSS
    let peak = before.rss;
    const sampler = setInterval(() => (peak = Math.max(peak, memoryOf(pid).rss)), 50);
    const started = Date.now();
    const result = await uploadMultipart(target, headers, SIZE).finally(() => clearInterval(sampler));
    if (result.status !== 201) throw new Error(`the upload answered ${result.status}: ${result.text}`);
    peak = Math.max(peak, memoryOf(pid).hwm);
    const grew = (peak - before.rss) / MIB;
    console.log(
      `  ${label(node, nodeOptions)}: ${SIZE / MIB} MiB in ${((Date.now() - started) / 1000).toFixed(1)} s, RSS ${(before.rss / MIB).toFixed(0)} MiB before, +${grew.toFixed(1)} MiB at the peak`,
    );
    return grew;
  } finally {
    proc.kill('SIGKILL');
  }
}

function label(node: string, nodeOptions: string): string {
  const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  return `Node ${version}${nodeOptions ? ` ${nodeOptions}` : ''}`;
}

async function run(stack: Stack): Promise<void> {
  const key = await stack.tenant('big');
  stack.appProc.kill('SIGTERM'); // the stack's own instance served the set-up; each variant gets a fresh one
  const results = new Map<string, number[]>();
  for (let round = 1; round <= ROUNDS; round++) {
    console.log(`round ${round}`);
    for (const node of RUNTIMES)
      for (const options of VARIANTS) {
        const grew = await measure(stack, key, node, options);
        const name = label(node, options);
        results.set(name, [...(results.get(name) ?? []), grew]);
      }
  }
  console.log(`\ngrowth of the resident size during one ${SIZE / MIB} MiB upload (median of ${ROUNDS}; each round):`);
  for (const [name, values] of results)
    console.log(`  ${name.padEnd(60)} ${median(values).toFixed(1).padStart(6)} MiB  (${values.map((v) => v.toFixed(1)).join(', ')})`);
}

finish(withStack({}, run));
