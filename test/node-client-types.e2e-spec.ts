import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { GENERATED_TYPES_FILE, REGENERATE_COMMAND, typesFromDocument } from '../packages/node-client/scripts/openapi-types.js';
import { ROOT } from './support/spawn-app.js';
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

/**
 * The same types in a partner's strict TypeScript project with openapi-fetch: a call with the fields the API
 * needs compiles, a call without one does not, and error answers carry the contract's error shape.
 */
describe("a strict openapi-fetch program on the node client's generated types", () => {
  const dir = mkdtempSync(join(tmpdir(), 'cws-openapi-client-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const client = `import createClient from 'openapi-fetch';
import type { paths, components } from 'cws-connect-openapi';

const api = createClient<paths>({ baseUrl: 'http://127.0.0.1:3000', headers: { authorization: 'Bearer cwsk_x' } });

export async function demo(): Promise<string> {
  // Only the required fields: design (it has a default) may be left out.
  const created = await api.POST('/v1/tenants', {
    body: { name: 'Acme Legal', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
  });
  if (created.error) {
    const failure: components['schemas']['ErrorResponseDto'] = created.error;
    return failure.error.code;
  }
  const session = await api.POST('/v1/tenants/{tenantId}/connect-sessions', {
    params: { path: { tenantId: created.data.id } },
    body: { kind: 'user', userId: 'u-alice', returnUrl: 'http://localhost:5173/done' },
  });
  const events = await api.GET('/v1/tenants/{tenantId}/events', { params: { path: { tenantId: 'acme' }, query: { limit: 10 } } });
  const connection = await api.GET('/v1/tenants/{tenantId}/connections/{connectionId}', {
    params: { path: { tenantId: 'acme', connectionId: '00000000-0000-4000-8000-000000000000' } },
  });
  if (connection.error) return connection.error.error.requestId;
  return [session.data?.connectUrl, events.data?.next, connection.data.status].join(' ');
}
`;

  it('compiles a typed call, and refuses one without a required field or reading a field errors lack', () => {
    const variants = {
      'client.mts': client,
      'missing-field.mts': client.replace("name: 'Acme Legal', ", ''),
      'wrong-error.mts': client.replace('connection.error.error.requestId', 'connection.error.error.traceId'),
    };
    for (const [file, source] of Object.entries(variants)) writeFileSync(join(dir, file), source);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          target: 'ES2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          lib: ['ES2023', 'DOM'],
          types: [],
          skipLibCheck: true,
          paths: {
            'openapi-fetch': [join(ROOT, 'node_modules/openapi-fetch/dist/index.d.mts')],
            'cws-connect-openapi': [fileURLToPath(GENERATED_TYPES_FILE)],
          },
        },
        files: Object.keys(variants),
      }),
    );
    const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(dir, 'tsconfig.json')], {
      cwd: dir,
      encoding: 'utf8',
    });
    // One diagnostic per entry: its first line names the file, indented lines continue it.
    const diagnostics = tsc.stdout.split(/\n(?! )/).filter((d) => d.trim() !== '');
    const errors = (file: string) => diagnostics.filter((d) => d.startsWith(`${file}(`));

    expect(tsc.stderr).toBe('');
    expect(errors('client.mts')).toEqual([]);
    expect(errors('missing-field.mts')).toEqual([expect.stringMatching(/error TS\d+: [\s\S]*Property 'name' is missing/)]);
    expect(errors('wrong-error.mts')).toEqual([expect.stringMatching(/error TS\d+: Property 'traceId' does not exist/)]);
    expect(diagnostics).toHaveLength(2);
  });
});
