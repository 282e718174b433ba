#!/usr/bin/env node
// Two versions on one schema (docs/operations.md): a migration added since the previous release may only expand
// the schema, so that the previous release keeps running on it during a rolling upgrade. This fails a migration
// whose up() drops or renames a table or column (except a table swapped for one of the same name, see below), narrows a column (SET NOT NULL, a new type, a NOT NULL column
// without a default, a new constraint), or builds an index on an existing table without CONCURRENTLY.
//
// A contract step (dropping what nothing reads any more) is allowed when the migration says so in a comment,
// `contract-step: <table>.<column>` (or `<table>`), and the previous release's src/ does not mention that name.
//
//   node tools/check-migrations.mjs [--migrations <dir>] [--since <commit>]
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { previousRelease } from './previous-release.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const arg = (name) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const dir = resolve(arg('--migrations') ?? join(root, 'migrations'));
const git = (...args) => spawnSync('git', args, { cwd: root, encoding: 'utf8' });

let since = arg('--since');
let label = since;
if (!since) {
  const previous = previousRelease(root);
  if (!previous) {
    console.log('check-migrations: no previous release (no v* tag, no released version in CHANGELOG.md): nothing to compare');
    process.exit(0);
  }
  if (!previous.commit) {
    console.error(
      `check-migrations: the commit of ${previous.version} is not in this clone; fetch the full history (git fetch --unshallow)`,
    );
    process.exit(1);
  }
  since = previous.commit;
  label = `v${previous.version} (${previous.commit.slice(0, 7)})`;
}
const listed = git('ls-tree', '--name-only', since, 'migrations/');
if (listed.status !== 0) {
  console.error(`check-migrations: cannot list the migrations of ${since}: ${listed.stderr.trim()}`);
  process.exit(1);
}
const released = new Set(
  listed.stdout
    .split('\n')
    .filter(Boolean)
    .map((p) => basename(p)),
);
const added = readdirSync(dir)
  .filter((f) => f.endsWith('.ts') && !released.has(f))
  .sort();

/** The statements of up(): every template literal between `up(` and `down(`. */
function upStatements(source) {
  const start = source.search(/\bup\s*\(/);
  const end = source.search(/\bdown\s*\(/);
  const body = source.slice(start, end > start ? end : undefined);
  return [...body.matchAll(/`([^`]*)`/g)].map((m) => m[1].replace(/\s+/g, ' ').trim());
}

const RULES = [
  [/\bDROP\s+(TABLE|VIEW|TYPE|SCHEMA)\b/i, 'drops a table, view, type or schema'],
  [/\bDROP\s+COLUMN\b/i, 'drops a column'],
  [/\bRENAME\b/i, 'renames'],
  [/\bSET\s+NOT\s+NULL\b/i, 'narrows a column to NOT NULL'],
  [/\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b/i, "changes a column's type"],
  [/\bADD\s+(COLUMN\s+)?(?!CONSTRAINT)[^,]*\bNOT\s+NULL\b(?![^,]*\bDEFAULT\b)/i, 'adds a NOT NULL column without a default'],
  [/\bADD\s+(CONSTRAINT|CHECK|UNIQUE|FOREIGN\s+KEY|PRIMARY\s+KEY)\b/i, 'adds a constraint the previous release may not keep'],
];

const problems = [];
for (const file of added) {
  const source = readFileSync(join(dir, file), 'utf8');
  const markers = [...source.matchAll(/contract-step:\s*([\w.]+)/g)].map((m) => m[1]);
  const created = new Set([...source.matchAll(/CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"?(\w+)/gi)].map((m) => m[1].toLowerCase()));
  for (const sql of upStatements(source)) {
    // A table swap keeps its name: `ALTER TABLE t RENAME TO t_old` is expand-only when the same migration creates `t`
    // again (say, a partitioned parent that takes the old table as its first partition), so every statement of the
    // previous release still finds a table `t` with the columns it knows.
    const swapped = /^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?"?(\w+)"?\s+RENAME\s+TO\b/i.exec(sql);
    const broken = RULES.filter(
      ([rule, what]) => rule.test(sql) && !(what === 'renames' && swapped && created.has(swapped[1].toLowerCase())),
    ).map(([, what]) => what);
    const index = /\bCREATE\s+(UNIQUE\s+)?INDEX\b(?!\s+CONCURRENTLY)[^;]*?\bON\s+(?:ONLY\s+)?"?(\w+)/i.exec(sql);
    if (index && !created.has(index[2].toLowerCase())) broken.push('builds an index on an existing table without CONCURRENTLY');
    if (broken.length === 0) continue;
    const marker = markers.find((m) => new RegExp(`\\b${m.split('.').at(-1)}\\b`, 'i').test(sql));
    if (marker) {
      const name = marker.split('.').at(-1);
      const reads = git('grep', '-l', '-w', '-i', name, since, '--', 'src');
      if (reads.status === 0) {
        problems.push(
          `${file}: contract step on ${marker}, but ${label} still mentions ${name} in ${reads.stdout.trim().split('\n').join(', ')}`,
        );
      }
      continue;
    }
    problems.push(`${file}: ${broken.join('; ')}: ${sql.slice(0, 160)}`);
  }
}

if (problems.length > 0) {
  console.error(`check-migrations: ${problems.length} problem(s) in migrations added since ${label}:`);
  for (const p of problems) console.error(`  ${p}`);
  console.error(
    'Expand only (docs/operations.md, "Two versions on one schema"); a contract step names what it drops: contract-step: <table>.<column>',
  );
  process.exit(1);
}
console.log(`check-migrations: ${added.length} migration(s) added since ${label}, each expand-only`);
