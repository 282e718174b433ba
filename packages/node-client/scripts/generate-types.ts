/**
 * Rewrites src/generated/openapi.ts from the service's live OpenAPI document, which
 * tools/openapi-document.mjs obtains (the same document `npm run lint:openapi` lints).
 *
 *   npm run client:generate                       builds the service, starts it on a throw-away database,
 *                                                 reads /docs-json, stops it
 *   npm run client:generate -- --url http://localhost:3000   reads a running service's /docs-json instead
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GENERATED_TYPES_FILE, typesFromDocument } from './openapi-types.js';

const DOCUMENT_SCRIPT = fileURLToPath(new URL('../../../tools/openapi-document.mjs', import.meta.url));

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'cws-connect-openapi-'));
  try {
    const documentFile = join(dir, 'openapi.json');
    const got = spawnSync(process.execPath, [DOCUMENT_SCRIPT, ...process.argv.slice(2), documentFile], { stdio: 'inherit' });
    if (got.status !== 0) throw new Error('no OpenAPI document (see above): the types are unchanged');
    const document = JSON.parse(readFileSync(documentFile, 'utf8')) as object;
    const file = fileURLToPath(GENERATED_TYPES_FILE);
    writeFileSync(file, await typesFromDocument(document));
    console.log(`wrote ${relative(process.cwd(), file)}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
});
