import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { profileTop } from './harness.js';
const dir = process.argv[2];
console.log(profileTop(dir, Number(process.argv[3] ?? 3872), 40).join('\n'));
// by package
const self = new Map<string, number>(); let total = 0;
for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
  const p = JSON.parse(readFileSync(join(dir, file), 'utf8'));
  const byId = new Map(p.nodes.map((n: any) => [n.id, n.callFrame]));
  for (const id of p.samples) { const f: any = byId.get(id); if (!f || f.functionName === '(idle)') continue;
    const m = /node_modules\/((@[^/]+\/)?[^/]+)/.exec(f.url); const k = m ? m[1] : f.url.includes('/dist/') ? 'app:' + f.url.replace(/^.*\/dist\//, '').split('/')[1] : f.url ? f.url.split('/').slice(0,3).join('/') : '(native) ' + f.functionName;
    self.set(k, (self.get(k) ?? 0) + 1); total++; } }
console.log([...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30).map(([k, v]) => `${(100 * v / total).toFixed(1)}% ${k}`).join('\n'));
