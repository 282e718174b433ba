import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { ROOT } from './support/spawn-app.js';
import { docRuleViolations, errorCodesOf, headings, lineCount, MAX_LINES, missingErrorCodes } from '../tools/doc-rules.mjs';

type Page = { path: string; text: string };
const violations = docRuleViolations;
const page = (path: string, text: string): Page => ({ path, text });
const FIGURES =
  '# Benchmarks\n\n## Current figures\n\n| question | figure | command |\n| --- | --- | --- |\n| facade | 1.09 | `npx tsx bench/proxy.ts` |\n';
const lines = (n: number) => Array.from({ length: n }, (_, i) => `line ${i + 1}`).join('\n') + '\n';

/** The shape rules of docs/*.md that `npm run lint:docs` enforces beside the link check (tools/doc-rules.mjs). */
describe('the rules of docs/*.md (npm run lint:docs)', () => {
  it('hold for the pages of this repository', () => {
    const pages = readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => page(`docs/${f}`, readFileSync(join(ROOT, 'docs', f), 'utf8')));
    expect(pages.length).toBeGreaterThan(10);
    expect(violations(pages, { errorCodes: errorCodesOf(readFileSync(join(ROOT, 'src/common/app-error.ts'), 'utf8')) })).toEqual([]);
  });

  it('want every error code of src/common/app-error.ts to have its row in docs/troubleshooting.md', () => {
    const codes = errorCodesOf(readFileSync(join(ROOT, 'src/common/app-error.ts'), 'utf8'));
    expect(codes).toEqual(expect.arrayContaining(['validation_failed', 'key_store_unavailable', 'cursor_expired', 'upstream_timeout']));
    expect(codes).not.toContain('ERROR_STATUS');
    const source = `/** x */\nexport const ERROR_STATUS = {\n  a_code: 400,\n  /** b_code: 500, in a comment */\n  // c_code: 404,\n  d_code: 503,\n} as const;\n`;
    expect(errorCodesOf(source)).toEqual(['a_code', 'd_code']);

    const table = '# Troubleshooting\n\n| code | status | cause | what to do |\n| --- | --- | --- | --- |\n| `a_code` | 400 | x | y |\n';
    const text = `${table}\nThe code \`d_code\` in prose is not a row.\n`;
    expect(missingErrorCodes(text, ['a_code', 'd_code'])).toEqual(['d_code']);
    expect(violations([page('docs/troubleshooting.md', text)], { errorCodes: ['a_code'] })).toEqual([]);
    expect(violations([page('docs/troubleshooting.md', text)], { errorCodes: ['a_code', 'd_code'] })).toEqual([
      expect.stringMatching(/^docs\/troubleshooting\.md: no row for the error code `d_code` of src\/common\/app-error\.ts/),
    ]);
    expect(violations([page('docs/other.md', table)], { errorCodes: ['a_code'] })).toEqual([
      expect.stringContaining('no row for the error code `a_code`'),
    ]);
    // The page as it is, with one row taken out, is refused.
    const real = readFileSync(join(ROOT, 'docs/troubleshooting.md'), 'utf8');
    const without = real.replace(/^\| `cursor_expired`.*\n/m, '');
    expect(without).not.toBe(real);
    expect(missingErrorCodes(without, codes)).toEqual(['cursor_expired']);
  });

  it('refuse a page over the limit, the benchmarks page included', () => {
    expect(MAX_LINES).toBe(400);
    expect(lineCount(lines(400))).toBe(400);
    expect(violations([page('docs/a.md', lines(400))])).toEqual([]);
    expect(violations([page('docs/a.md', lines(401))])).toEqual([expect.stringMatching(/^docs\/a\.md: 401 lines, more than 400/)]);
    expect(violations([page('docs/benchmarks.md', FIGURES + lines(401))])).toHaveLength(1);
  });

  it('refuse a dated heading outside docs/benchmarks.md', () => {
    for (const heading of [
      '### One run (2026-11-27 09:46 UTC)',
      '## Re-measured without the store',
      '### The statement prepared once (later the same day)',
      '#### Round 2',
    ]) {
      expect(violations([page('docs/webhooks.md', `# Webhooks\n\n${heading}\n\ntext\n`)])).toEqual([
        expect.stringContaining('docs/webhooks.md:3: a dated measurement heading'),
      ]);
      expect(violations([page('docs/benchmarks.md', `${FIGURES}\n${heading}\n`)])).toEqual([]);
    }
  });

  it('want docs/benchmarks.md to open with its table of current figures, a command beside each', () => {
    expect(violations([page('docs/benchmarks.md', FIGURES)])).toEqual([]);
    for (const text of [
      '# Benchmarks\n\n## Facade\n\n## Current figures\n\n| question | command |\n',
      '# Benchmarks\n\n## Current figures\n\n| question | figure |\n| --- | --- |\n',
      '# Benchmarks\n\n## Current figures\n\nsoon\n\n## Facade\n\n| question | command |\n',
    ])
      expect(violations([page('docs/benchmarks.md', text)])).toEqual([expect.stringContaining('must be "## Current figures"')]);
  });

  it('leave dates in prose, tables and code blocks alone, and read headings only outside fences', () => {
    const text =
      '# Upstream\n\n| 2024-01-09 | a version |\n\nSince 2026-11-27 the round 2 figures hold.\n\n```sh\n# 2026-11-28 a comment\n```\n\n## Versioning\n';
    expect(headings(text).map((h) => h.line)).toEqual([1, 11]);
    expect(violations([page('docs/upstream.md', text)])).toEqual([]);
  });
});
