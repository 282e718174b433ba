import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { accessSync, constants, readFileSync, realpathSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { ROOT } from './support/spawn-app.js';

/**
 * The project's runtime: `npm ci` installs Node (package.json's node-<os>-<cpu> optional dependencies) as
 * node_modules/.bin/node, and npm puts that directory first on every script's PATH, so `npm start` and
 * `npm test` run on it even where the system's node is older. CI's second line points it at another Node for
 * the whole run; either way the scripts and this test process run on one and the same binary.
 */
describe('the runtime the npm scripts use', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    engines: { node: string };
    optionalDependencies: Record<string, string>;
  };
  const floor = Number(/^>=\s*(\d+)/.exec(pkg.engines.node)?.[1]);

  it('is at least the floor package.json states, and the platform packages all pin one version of it', () => {
    expect(floor).toBeGreaterThanOrEqual(24);
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(floor);
    const runtimes = Object.entries(pkg.optionalDependencies).filter(([name]) => /^node-(linux|darwin|win)-/.test(name));
    expect(runtimes.length).toBeGreaterThan(0);
    expect(new Set(runtimes.map(([, version]) => version))).toEqual(new Set([runtimes[0][1]]));
    expect(Number(runtimes[0][1].split('.')[0])).toBe(floor);
  });

  it('is the node an npm script finds first on its PATH, even with the system node first on the caller’s', () => {
    // What npm gives a script (`npm run env` prints a script's environment), called with /usr/bin ahead of all.
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: ['/usr/local/bin', '/usr/bin', '/bin', process.env.PATH ?? ''].join(delimiter) };
    for (const k of Object.keys(env)) if (/^npm_/i.test(k)) delete env[k];
    const printed = execFileSync('npm', ['run', '--silent', 'env'], { cwd: ROOT, env, encoding: 'utf8' });
    const scriptPath = /^PATH=(.*)$/m.exec(printed)?.[1] ?? '';
    const node = scriptPath
      .split(delimiter)
      .map((dir) => join(dir, 'node'))
      .find((file) => executable(file));
    expect(node).toBe(join(ROOT, 'node_modules', '.bin', 'node'));
    expect(realpathSync(node as string)).toBe(realpathSync(process.execPath));
  });
});

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
