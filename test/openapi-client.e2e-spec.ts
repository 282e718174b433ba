import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './support/spawn-app.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * A partner generates a TypeScript client from the document at /docs-json (openapi-typescript, with
 * openapi-fetch) and it compiles: calls with the fields the API needs type-check, calls without them do
 * not, and the error answers are typed with the contract's error shape.
 */
describe('a TypeScript client generated from the OpenAPI document', () => {
  let t: TestApp;
  const dir = mkdtempSync(join(tmpdir(), 'cws-openapi-client-'));

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Type-checks `file` with the generated types, as a partner's strict TypeScript project would. */
  const typecheck = (file: string) => {
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
          paths: { 'openapi-fetch': [join(ROOT, 'node_modules/openapi-fetch/dist/index.d.mts')] },
        },
        files: [file, 'api.d.ts'],
      }),
    );
    return spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(dir, 'tsconfig.json')], { cwd: dir, encoding: 'utf8' });
  };

  it('is generated, compiles against typed calls, and refuses a call without a required field', async () => {
    const document = await (await fetch(`${t.url}/docs-json`)).text();
    writeFileSync(join(dir, 'openapi.json'), document);
    const cli = join(ROOT, 'tools/openapi-typescript/node_modules/openapi-typescript/bin/cli.js');
    const generated = spawnSync(process.execPath, [cli, join(dir, 'openapi.json'), '-o', join(dir, 'api.d.ts')], { cwd: dir, encoding: 'utf8' });
    expect(generated.stderr).not.toMatch(/error/i);
    expect(generated.status).toBe(0);
    const types = readFileSync(join(dir, 'api.d.ts'), 'utf8');
    expect(types).toContain('"/v1/tenants/{tenantId}/connections"');
    expect(types).toContain('ErrorResponseDto');

    writeFileSync(
      join(dir, 'client.mts'),
      `import createClient from 'openapi-fetch';
import type { paths, components } from './api.js';

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
`,
    );
    const ok = typecheck('client.mts');
    expect(ok.stdout + ok.stderr).toBe('');
    expect(ok.status).toBe(0);

    // The same client without a required field (name) must not compile: the types are the contract's.
    writeFileSync(join(dir, 'wrong.mts'), readFileSync(join(dir, 'client.mts'), 'utf8').replace("name: 'Acme Legal', ", ''));
    const wrong = typecheck('wrong.mts');
    expect(wrong.status).not.toBe(0);
    expect(wrong.stdout).toMatch(/wrong\.mts.*'name'/s);
  }, 120_000);
});
