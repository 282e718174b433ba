import { ENVIRONMENT_VARIABLES } from './environment-variables.js';
import { TRACING_VARIABLES } from './tracing-variables.js';
import type { Declaration, Section, Variable } from './variable.js';
import { SERVICE_VARIABLES } from './variables.js';

// The configuration table of docs/configuration.md (docs/api.md links to it), made from the declaration (variables.ts and its two
// families): `npm run docs:config` writes them between the markers, config-tables.spec.ts fails when they differ.

export const TABLE_START = '<!-- configuration table: made by `npm run docs:config` from src/config/variables.ts; do not edit by hand -->';
export const TABLE_END = '<!-- end of configuration table -->';

/** The documents holding the table, relative to the repository root. */
export const TABLE_DOCUMENTS = ['docs/configuration.md'] as const;

const SECTIONS: readonly Section[] = [
  'the service',
  'database',
  'secrets',
  'upstream environments',
  'the built-in sandbox',
  'renewal',
  'upstream HTTP',
  'this HTTP server',
  'guessing, internal targets, exposure',
  'shutdown',
  'events to the partner',
  'audit trail',
  'agents (MCP)',
  'synced records',
  'traces',
];

interface Row {
  name: string;
  variable: Variable<unknown>;
}

/** Every declared variable, as its table row names it, grouped by section in the order above. */
export function declaredVariables(): Row[] {
  const rows = [...rowsOf(SERVICE_VARIABLES, ''), ...rowsOf(ENVIRONMENT_VARIABLES, 'CWS_<ENV>_'), ...rowsOf(TRACING_VARIABLES, '')];
  return SECTIONS.flatMap((section) => rows.filter((row) => row.variable.section === section));
}

function rowsOf(declaration: Declaration, prefix: string): Row[] {
  return Object.entries(declaration).map(([name, variable]) => ({ name: prefix + name, variable }));
}

/** The table, one row per variable (unpadded: prettier pads the columns in the documents). */
export function configurationTable(): string {
  const lines = ['| variable | meaning | default | in production |', '| --- | --- | --- | --- |'];
  for (const { name, variable } of declaredVariables()) {
    const cells = [`\`${name}\``, variable.meaning, variable.defaultText ?? shown(variable.fallback), variable.production ?? ''].map(
      linked,
    );
    lines.push(`| ${cells.map((c) => c.replaceAll('|', '\\|')).join(' | ')} |`);
  }
  return lines.join('\n');
}

/** A page of docs/ named in a cell (`docs/renewal.md`) as a link from docs/configuration.md, beside it. */
function linked(cell: string): string {
  return cell.replace(/`docs\/([a-z-]+\.md)`/g, '[$1]($1)');
}

function shown(value: unknown): string {
  if (value === undefined) return 'unset';
  if (typeof value === 'boolean') return value ? '`on`' : '`off`';
  if (Array.isArray(value)) return value.length ? `\`${value.join(',')}\`` : 'empty';
  if (typeof value === 'object' && value !== null) return Object.keys(value).length ? `\`${JSON.stringify(value)}\`` : 'none';
  return `\`${String(value)}\``;
}

/** `document` with its table replaced by `table`; an error when the markers are missing. */
export function withTable(document: string, table: string): string {
  const start = document.indexOf(TABLE_START);
  const end = document.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`the configuration table's markers are missing (${TABLE_START} … ${TABLE_END})`);
  return `${document.slice(0, start + TABLE_START.length)}\n\n${table}\n\n${document.slice(end)}`;
}

/** The table between the markers of `document`, each row's cells trimmed (prettier's padding removed), or null without markers. */
export function tableIn(document: string): string | null {
  const start = document.indexOf(TABLE_START);
  const end = document.indexOf(TABLE_END);
  if (start < 0 || end < start) return null;
  return normalised(document.slice(start + TABLE_START.length, end));
}

/** A markdown table with its padding and the lengths of its separator dashes taken out. */
export function normalised(table: string): string {
  return table
    .trim()
    .split('\n')
    .map((line) =>
      line
        .trim()
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim().replace(/^-{3,}$/, '---'))
        .join('|'),
    )
    .join('\n');
}
