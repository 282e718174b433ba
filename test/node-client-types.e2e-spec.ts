import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { GENERATED_TYPES_FILE, REGENERATE_COMMAND, typesFromDocument } from '../packages/node-client/scripts/openapi-types.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** packages/node-client's types are generated from the service's OpenAPI document and must follow it. */
describe("the node client's generated types", () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp({ sandbox: false });
  });
  afterAll(async () => t?.close());

  it('are what the generator makes of the live /docs-json', async () => {
    const document = (await (await fetch(`${t.url}/docs-json`)).json()) as object;
    const expected = await typesFromDocument(document);
    const committed = readFileSync(GENERATED_TYPES_FILE, 'utf8');
    if (committed !== expected) {
      const a = committed.split('\n');
      const b = expected.split('\n');
      const line = a.findIndex((l, i) => l !== b[i]);
      throw new Error(
        `packages/node-client/src/generated/openapi.ts does not match the service's OpenAPI document (first difference at line ${line + 1}:\n` +
          `  committed: ${a[line] ?? '(end of file)'}\n  expected:  ${b[line] ?? '(end of file)'}).\n` +
          `The API changed: run \`${REGENERATE_COMMAND}\`, then \`npm run typecheck\` (the client's hand-written face may need to follow), and commit both.`,
      );
    }
    expect(committed).toBe(expected);
  });
});
