import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { ROOT } from './support/spawn-app.js';

/**
 * The picture of the modules in docs/architecture.md ("Modules and their floors") is the rule set that
 * `npm run lint:deps` enforces (tools/module-rules.cjs): the same modules, the same arrows, both ways.
 */
const { MODULES, EVERYWHERE } = createRequire(import.meta.url)(resolve(ROOT, 'tools/module-rules.cjs')) as {
  MODULES: Record<string, string[]>;
  EVERYWHERE: string[];
};

function pictureOf(markdown: string): { modules: Set<string>; arrows: Set<string> } {
  const block = /<!-- module-rules:start -->\s*```mermaid\n([\s\S]*?)```\s*<!-- module-rules:end -->/.exec(markdown);
  if (!block) throw new Error('docs/architecture.md has no module-rules picture');
  const modules = new Set<string>();
  const arrows = new Set<string>();
  for (const line of block[1].split('\n').map((l) => l.trim())) {
    if (line === '' || line.startsWith('flowchart')) continue;
    const arrow = /^([a-z]+) --> ([a-z]+)$/.exec(line);
    if (arrow) {
      arrows.add(`${arrow[1]} -> ${arrow[2]}`);
      modules.add(arrow[1]).add(arrow[2]);
    } else if (/^[a-z]+$/.test(line)) modules.add(line);
    else throw new Error(`not a module or an arrow: ${line}`);
  }
  return { modules, arrows };
}

describe('the module picture in docs/architecture.md', () => {
  const picture = pictureOf(readFileSync(resolve(ROOT, 'docs/architecture.md'), 'utf8'));

  it('draws every module the rules declare, and no other', () => {
    expect([...picture.modules].sort()).toEqual(Object.keys(MODULES).sort());
  });

  it('draws exactly the imports the rules allow', () => {
    const allowed = Object.entries(MODULES).flatMap(([from, to]) => to.map((t) => `${from} -> ${t}`));
    expect([...picture.arrows].sort()).toEqual(allowed.sort());
  });

  it('declares every folder of src/ and gives each its row in the module table', () => {
    const folders = readdirSync(resolve(ROOT, 'src'), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
    expect(folders.sort()).toEqual([...Object.keys(MODULES), ...EVERYWHERE].sort());
    const doc = readFileSync(resolve(ROOT, 'docs/architecture.md'), 'utf8');
    for (const name of folders) expect([name, new RegExp(`^\\| ${name}( \\(global\\))? +\\|`, 'm').test(doc)]).toEqual([name, true]);
  });
});
