import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { ROOT } from './support/spawn-app.js';

const CHECK = resolve(ROOT, 'tools/check-migrations.mjs');
const temps: string[] = [];

function temp(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}

/** tools/check-migrations.mjs on this checkout's migrations plus one new migration whose up() runs `statements`. */
function checkWith(statements: string[], comment = ''): { code: number | null; output: string } {
  const dir = temp('cws-migrations-');
  cpSync(resolve(ROOT, 'migrations'), dir, { recursive: true });
  writeFileSync(
    join(dir, '1899999999999-Candidate.ts'),
    `import type { MigrationInterface, QueryRunner } from 'typeorm';
${comment}
export class Candidate1899999999999 implements MigrationInterface {
  name = 'Candidate1899999999999';
  async up(q: QueryRunner): Promise<void> {
${statements.map((s) => `    await q.query(\`${s}\`);`).join('\n')}
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query(\`DROP TABLE IF EXISTS candidate\`);
  }
}
`,
  );
  const run = spawnSync(process.execPath, [CHECK, '--migrations', dir], { cwd: ROOT, encoding: 'utf8' });
  return { code: run.status, output: run.stdout + run.stderr };
}

describe('tools/check-migrations.mjs: migrations since the previous release only expand', () => {
  afterAll(() => temps.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it("passes this checkout's migrations", () => {
    const run = spawnSync(process.execPath, [CHECK], { cwd: ROOT, encoding: 'utf8' });
    expect(run.stdout + run.stderr).toMatch(/since v0\.2\.0 \(cb056b7\), each expand-only/);
    expect(run.status).toBe(0);
  });

  it('passes expand steps: a nullable column, a new table with its index, an index built concurrently', () => {
    const run = checkWith([
      'ALTER TABLE connections ADD COLUMN note text',
      'ALTER TABLE events ADD COLUMN weight int NOT NULL DEFAULT 0',
      'CREATE TABLE candidate (id uuid PRIMARY KEY, at timestamptz NOT NULL)',
      'CREATE INDEX ix_candidate_at ON candidate (at)',
      'CREATE INDEX CONCURRENTLY ix_connections_note ON connections (note)',
    ]);
    expect(run.output).toMatch(/\d+ migration\(s\) added since .*each expand-only/);
    expect(run.code).toBe(0);
  });

  it.each([
    ['ALTER TABLE connections DROP COLUMN upstream_email', /drops a column/],
    ['DROP TABLE webhook_receivers', /drops a table/],
    ['ALTER TABLE connections RENAME COLUMN upstream_email TO email', /renames/],
    ['ALTER TABLE connections ALTER COLUMN upstream_email SET NOT NULL', /narrows a column to NOT NULL/],
    ['ALTER TABLE connections ALTER COLUMN scopes TYPE text', /changes a column's type/],
    ['ALTER TABLE connections ADD COLUMN region text NOT NULL', /adds a NOT NULL column without a default/],
    ['ALTER TABLE connections ADD CONSTRAINT region_check CHECK (status <> $$x$$)', /adds a constraint/],
    ['CREATE INDEX ix_connections_email ON connections (upstream_email)', /without CONCURRENTLY/],
  ])('fails %s', (sql, why) => {
    const run = checkWith([sql]);
    expect(run.output).toMatch(why);
    expect(run.output).toContain('1899999999999-Candidate.ts');
    expect(run.code).toBe(1);
  });

  it('allows a table swapped for one of the same name, not a rename that leaves the name gone', () => {
    const swap = checkWith([
      'ALTER TABLE webhook_receivers RENAME TO webhook_receivers_pre',
      'CREATE TABLE webhook_receivers (LIKE webhook_receivers_pre INCLUDING ALL)',
    ]);
    expect(swap.code).toBe(0);
    const gone = checkWith(['ALTER TABLE webhook_receivers RENAME TO receivers']);
    expect(gone.output).toMatch(/renames/);
    expect(gone.code).toBe(1);
  });

  it('allows a contract step only on a name the previous release no longer mentions', () => {
    const read = checkWith(['ALTER TABLE connections DROP COLUMN upstream_email'], '// contract-step: connections.upstream_email');
    expect(read.output).toMatch(/contract step on connections\.upstream_email, but v0\.2\.0 .* still mentions upstream_email in .*src\//);
    expect(read.code).toBe(1);
    const unread = checkWith(['ALTER TABLE connections DROP COLUMN legacy_region'], '// contract-step: connections.legacy_region');
    expect(unread.code).toBe(0);
  });

  it('finds the previous release from CHANGELOG.md when the tags did not travel with the clone', async () => {
    const clone = temp('cws-notags-');
    expect(spawnSync('git', ['clone', '--quiet', '--no-tags', '--no-checkout', ROOT, clone]).status).toBe(0);
    expect(spawnSync('git', ['checkout', '--quiet', 'HEAD', '--', 'CHANGELOG.md'], { cwd: clone }).status).toBe(0);
    expect(spawnSync('git', ['tag', '--list'], { cwd: clone, encoding: 'utf8' }).stdout).toBe('');
    const { previousRelease } = (await import(pathToFileURL(resolve(ROOT, 'tools/previous-release.mjs')).href)) as {
      previousRelease(root: string): { version: string; commit: string | null } | null;
    };
    expect(previousRelease(clone)).toEqual({ version: '0.2.0', commit: 'cb056b7845c5948cd146f4f3f8d64d9cfccaee9f' });
  });
});
