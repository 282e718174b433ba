// The shape of docs/*.md (npm run lint:docs, with the link check): each page is short enough to read, and a figure
// measured on a given day lives in docs/benchmarks.md, not in the page that describes the feature.
//
// - a page is at most MAX_LINES lines (docs/benchmarks.md too: its history is kept short, the rest is in git);
// - a heading outside docs/benchmarks.md names no date (2026-11-28), no "round N", no "later the same day" and no
//   "re-measured": those are the headings of a measurement's history, which belongs on the benchmarks page.
// - docs/benchmarks.md opens with its table of current figures: its first section is "Current figures", whose first
//   table has a `command` column.
// - docs/troubleshooting.md names every error code of src/common/app-error.ts (ERROR_STATUS) as the first cell of
//   a table row (the code, its status, the cause, what to do), so a new code cannot ship without its entry.
// Headings inside fenced code blocks (a shell comment) are not headings.

export const MAX_LINES = 400;
export const FIGURES_PAGE = 'docs/benchmarks.md';
export const TROUBLESHOOTING_PAGE = 'docs/troubleshooting.md';
export const ERROR_CODES_SOURCE = 'src/common/app-error.ts';

const DATED = [/\b\d{4}-\d{2}-\d{2}\b/, /\bround \d+\b/i, /\blater the same day\b/i, /\bre-measured\b/i];

/** The markdown headings of a page, with their line numbers (1-based), fenced code left out. */
export function headings(text) {
  const found = [];
  let fence = null;
  text.split('\n').forEach((line, i) => {
    const opens = /^\s*(`{3,}|~{3,})/.exec(line);
    if (opens) {
      if (fence === null) fence = opens[1][0];
      else if (opens[1][0] === fence) fence = null;
      return;
    }
    if (fence === null && /^#{1,6}\s/.test(line)) found.push({ line: i + 1, text: line });
  });
  return found;
}

/** The number of lines of a page (a final newline ends the last line; it does not start another). */
export function lineCount(text) {
  return text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length;
}

/** The error codes of `ERROR_STATUS` in the text of src/common/app-error.ts, in their order there. */
export function errorCodesOf(source) {
  const start = source.indexOf('export const ERROR_STATUS = {');
  const end = source.indexOf('} as const;', start);
  if (start < 0 || end < 0) throw new Error(`${ERROR_CODES_SOURCE}: no \`export const ERROR_STATUS = { … } as const;\``);
  const body = source
    .slice(start, end)
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/.*$/gm, '');
  return [...body.matchAll(/^\s*([a-z][a-z0-9_]*)\s*:\s*\d{3}\s*,?\s*$/gm)].map((m) => m[1]);
}

/** The codes of `codes` that no table row of the troubleshooting page starts with (as `` | `code` | ``). */
export function missingErrorCodes(troubleshooting, codes) {
  const rows = new Set(
    troubleshooting
      .split('\n')
      .map((l) => /^\|\s*`([a-z][a-z0-9_]*)`\s*\|/.exec(l)?.[1])
      .filter((c) => c !== undefined),
  );
  return codes.filter((c) => !rows.has(c));
}

/**
 * What breaks the rules in `pages` (`{path, text}`, paths like `docs/x.md`), one sentence each; empty when none.
 * `errorCodes` (the codes of src/common/app-error.ts): each must have its row in docs/troubleshooting.md.
 */
export function docRuleViolations(pages, { errorCodes } = {}) {
  const problems = [];
  if (errorCodes !== undefined) {
    const page = pages.find((p) => p.path === TROUBLESHOOTING_PAGE);
    const missing = page === undefined ? errorCodes : missingErrorCodes(page.text, errorCodes);
    if (missing.length)
      problems.push(
        `${TROUBLESHOOTING_PAGE}: no row for the error code${missing.length > 1 ? 's' : ''} ${missing.map((c) => `\`${c}\``).join(', ')} of ${ERROR_CODES_SOURCE}: add its cause and what to do`,
      );
  }
  for (const { path, text } of pages) {
    const lines = lineCount(text);
    if (lines > MAX_LINES) problems.push(`${path}: ${lines} lines, more than ${MAX_LINES}: split it by the reader's task`);
    if (path === FIGURES_PAGE) {
      if (!opensWithCurrentFigures(text))
        problems.push(`${path}: its first section must be "## Current figures", a table with a \`command\` column`);
      continue;
    }
    for (const h of headings(text))
      if (DATED.some((re) => re.test(h.text)))
        problems.push(
          `${path}:${h.line}: a dated measurement heading (${h.text.trim()}): move the figures to ${FIGURES_PAGE} and link to its row`,
        );
  }
  return problems;
}

/** Whether the figures page's first section is "## Current figures" and its first table has a `command` column. */
export function opensWithCurrentFigures(text) {
  const first = headings(text).find((h) => /^##\s/.test(h.text));
  if (!first || first.text.trim() !== '## Current figures') return false;
  const after = text.split('\n').slice(first.line);
  const header = after.find((l) => l.startsWith('|'));
  const next = after.findIndex((l) => /^#{1,2}\s/.test(l));
  return (
    header !== undefined &&
    (next < 0 || after.indexOf(header) < next) &&
    header
      .split('|')
      .map((c) => c.trim())
      .includes('command')
  );
}
