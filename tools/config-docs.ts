// npm run docs:config: writes the configuration table, made from src/config/variables.ts, into docs/configuration.md
// between its markers, formatted as prettier formats them (src/config/config-tables.spec.ts checks it).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as prettier from 'prettier';
import { configurationTable, TABLE_DOCUMENTS, withTable } from '../src/config/config-tables.js';

const root = join(import.meta.dirname, '..');
for (const document of TABLE_DOCUMENTS) {
  const file = join(root, document);
  const before = readFileSync(file, 'utf8');
  const options = (await prettier.resolveConfig(file)) ?? {};
  const after = await prettier.format(withTable(before, configurationTable()), { ...options, filepath: file });
  if (after !== before) writeFileSync(file, after);
  console.log(`${document}: ${after === before ? 'unchanged' : 'written'}`);
}
