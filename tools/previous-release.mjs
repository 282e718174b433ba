// The previous release: the newest `v<semver>` tag on HEAD's history, else the newest version in CHANGELOG.md
// whose heading is followed by its commit ("Commit `<sha>`"), since tags do not always travel with a copy of the
// repository. Used by tools/check-migrations.mjs and the two-versions e2e test.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

function git(root, ...args) {
  const r = spawnSync('git', args, { cwd: root, encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** `{ version, commit }` of the previous release, or null; `commit` is only given when this checkout has it. */
export function previousRelease(root) {
  const head = git(root, 'rev-parse', 'HEAD');
  const tags = (git(root, 'tag', '--list', 'v*', '--merged', 'HEAD', '--sort=-v:refname') ?? '').split('\n').filter(Boolean);
  for (const tag of tags) {
    if (!/^v\d+\.\d+\.\d+$/.test(tag)) continue;
    const commit = git(root, 'rev-list', '-n', '1', tag);
    // A tag on HEAD itself is the release being made, not the previous one.
    if (commit && commit !== head) return { version: tag.slice(1), commit };
  }
  const changelog = readFileSync(join(root, 'CHANGELOG.md'), 'utf8');
  for (const m of changelog.matchAll(/^## \[(\d+\.\d+\.\d+)\][^\n]*\n+Commit `([0-9a-f]{7,40})`/gm)) {
    const commit = git(root, 'rev-parse', '--verify', '--quiet', `${m[2]}^{commit}`);
    if (commit && commit !== head) return { version: m[1], commit };
    if (!commit) return { version: m[1], commit: null };
  }
  return null;
}
