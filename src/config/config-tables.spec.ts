import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { configurationTable, declaredVariables, normalised, TABLE_DOCUMENTS, tableIn } from './config-tables.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('the configuration tables', () => {
  it.each(TABLE_DOCUMENTS)('%s holds the table made from the declaration (else: npm run docs:config)', (document) => {
    const text = readFileSync(join(ROOT, document), 'utf8');
    expect(tableIn(text)).toBe(normalised(configurationTable()));
  });

  it('name every variable once, each with a meaning', () => {
    const rows = declaredVariables();
    expect(new Set(rows.map((r) => r.name)).size).toBe(rows.length);
    for (const { name, variable } of rows) expect([name, variable.meaning.trim().length > 0]).toEqual([name, true]);
  });

  it('.env.example names the same variables (CWS_NA_ standing for CWS_<ENV>_)', () => {
    const example = readFileSync(join(ROOT, '.env.example'), 'utf8');
    const named = [...example.matchAll(/^#? ?([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1].replace(/^CWS_NA_/, 'CWS_<ENV>_'));
    expect([...new Set(named)].sort()).toEqual(
      declaredVariables()
        .map((r) => r.name)
        .sort(),
    );
  });
});
