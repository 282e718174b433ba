import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { buildApp, ROOT } from './support/spawn-app.js';

const CHECK = resolve(ROOT, 'tools/check-design-files.mjs');
const NEST = resolve(ROOT, 'node_modules/@nestjs/cli/bin/nest.js');
const temps: string[] = [];

function temp(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}

afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

function check(root?: string): { code: number | null; lines: string[] } {
  const run = spawnSync(process.execPath, [CHECK, ...(root ? [root] : [])], { cwd: ROOT, encoding: 'utf8' });
  return { code: run.status, lines: (run.stdout + run.stderr).split('\n').filter(Boolean) };
}

/** A directory holding the design's files as this checkout has them (the directories empty). */
function designTree(): string {
  const dir = temp('cws-design-');
  for (const d of ['src', 'test', 'migrations']) mkdirSync(join(dir, d));
  for (const f of ['package.json', 'tsconfig.json', 'nest-cli.json', '.env.example', 'README.md'])
    writeFileSync(join(dir, f), readFileSync(join(ROOT, f)));
  return dir;
}

describe('tools/check-design-files.mjs (CI)', () => {
  it('passes on this checkout, listing the design files', () => {
    expect(check()).toEqual({
      code: 0,
      lines: ['8 design files present: package.json, tsconfig.json, nest-cli.json, src, test, migrations, .env.example, README.md'],
    });
  });

  it('fails naming each missing file, and a file where a directory belongs', () => {
    const dir = designTree();
    expect(check(dir).code).toBe(0);
    rmSync(join(dir, 'nest-cli.json'));
    rmSync(join(dir, '.env.example'));
    rmSync(join(dir, 'migrations'), { recursive: true });
    writeFileSync(join(dir, 'migrations'), '');
    expect(check(dir)).toEqual({
      code: 1,
      lines: ['design file nest-cli.json: missing', 'design file migrations: is not a directory', 'design file .env.example: missing'],
    });
  });

  it('fails a nest-cli.json that does not build with SWC from tools/swc-service.json', () => {
    const dir = designTree();
    writeFileSync(join(dir, 'nest-cli.json'), JSON.stringify({ sourceRoot: 'src', compilerOptions: { builder: 'tsc' } }));
    expect(check(dir)).toEqual({
      code: 1,
      lines: [expect.stringMatching(/^design file nest-cli\.json: compilerOptions\.builder must be SWC .*tools\/swc-service\.json/)],
    });
    writeFileSync(join(dir, 'nest-cli.json'), '{ not json');
    expect(check(dir).lines).toEqual([expect.stringMatching(/^design file nest-cli\.json: is not JSON/)]);
  });
});

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

describe('nest build (nest-cli.json)', () => {
  beforeAll(() => buildApp(), 120_000);

  it('compiles src/ and migrations/ to the same files as tools/build.mjs (what npm start runs)', () => {
    // nest-cli.json as it is, but into a scratch directory and without emptying dist/ first.
    const out = temp('cws-nest-build-');
    const config = JSON.parse(readFileSync(join(ROOT, 'nest-cli.json'), 'utf8')) as {
      compilerOptions: { deleteOutDir: boolean; builder: { options: Record<string, unknown> } };
    };
    config.compilerOptions.deleteOutDir = false;
    config.compilerOptions.builder.options.outDir = join(out, 'dist');
    const configFile = join(out, 'nest-cli.json');
    writeFileSync(configFile, JSON.stringify(config));
    // The Nest CLI reads -c relative to the working directory.
    const built = spawnSync(process.execPath, [NEST, 'build', '-c', relative(ROOT, configFile)], { cwd: ROOT, encoding: 'utf8' });
    expect([built.status, built.stderr]).toEqual([0, '']);

    const dist = join(ROOT, 'dist');
    const ours = filesUnder(join(out, 'dist'));
    // The compiler writes src/ and migrations/ only; dist/ also holds what others put there (tools/build.mjs's
    // fingerprint and the build's commit, the OpenAPI document `npm run lint:openapi` exports).
    const compiled = (f: string) => f.startsWith('src/') || f.startsWith('migrations/');
    expect(ours.filter((f) => !compiled(f))).toEqual([]);
    expect(ours).toEqual(filesUnder(dist).filter(compiled));
    expect(ours).toContain('src/main.js');
    expect(ours.some((f) => f.startsWith('migrations/'))).toBe(true);
    expect(ours.some((f) => f.endsWith('.spec.js'))).toBe(false);
    // The same code, file for file (source maps differ only in their relative paths to the sources).
    const differing = ours.filter((f) => f.endsWith('.js') && !readFileSync(join(out, 'dist', f)).equals(readFileSync(join(dist, f))));
    expect(differing).toEqual([]);
  }, 120_000);
});
