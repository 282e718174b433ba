import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { typesFromDocument } from '../packages/node-client/scripts/openapi-types.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * A partner generates a client from the served OpenAPI document with either of the two common generators and
 * compiles a small program against it with `tsc --strict`: no error. The program also states what the types must
 * not allow (`@ts-expect-error`): reading a field that the answer may leave out, or lastError without its null.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(import.meta.url);
const HEY_API_CLI = join(dirname(require.resolve('@hey-api/openapi-ts/package.json')), 'bin', 'run.js');
const TSC = join(dirname(require.resolve('typescript/package.json')), 'bin', 'tsc');

/** What a partner writes with openapi-typescript's types and openapi-fetch. */
const OPENAPI_FETCH_PROGRAM = `
import createClient from 'openapi-fetch';
import type { paths } from './schema.js';

const client = createClient<paths>({ baseUrl: 'http://localhost:3000', headers: { authorization: 'Bearer key' } });

export async function partner(): Promise<string[]> {
  const seen: string[] = [];
  const list = await client.GET('/v1/tenants/{tenantId}/workflows', {
    params: { path: { tenantId: 'acme' }, header: { 'X-User-Id': 'u-alice' }, query: { upstreamQuery: { step: 'Review' } } },
    querySerializer: { object: { style: 'form', explode: true } },
  });
  if (list.data !== undefined) {
    for (const w of Array.isArray(list.data) ? list.data : []) {
      seen.push(String(w.versionNumber ?? 0), String(w.lastModified ?? ''));
      // @ts-expect-error the spec does not promise versionNumber on every answer
      const version: number = w.versionNumber;
      seen.push(String(version));
    }
  } else if (typeof list.error === 'object' && 'error' in list.error) {
    seen.push(JSON.stringify(list.error.error));
  }
  const hook = await client.POST('/v1/tenants/{tenantId}/webhooks', {
    params: { path: { tenantId: 'acme' } },
    body: { events: ['workflow_step_updated'] },
  });
  if (hook.data) {
    seen.push(...(hook.data.events ?? []), hook.data.targetURL ?? '', hook.data.headers?.Authorization ?? '');
    // @ts-expect-error targetURL is not promised either
    const target: string = hook.data.targetURL;
    seen.push(target);
  }
  const events = await client.GET('/v1/tenants/{tenantId}/events', { params: { path: { tenantId: 'acme' }, query: { limit: 10 } } });
  for (const e of events.data?.events ?? []) {
    const p = e.payload;
    if (typeof p === 'object' && p !== null && !Array.isArray(p)) seen.push(e.type, String(p.workflowId ?? ''));
    // @ts-expect-error a payload is any JSON value, not always an object
    seen.push(String(p.workflowId));
  }
  const connection = await client.GET('/v1/tenants/{tenantId}/connections/{connectionId}', {
    params: { path: { tenantId: 'acme', connectionId: '00000000-0000-4000-8000-000000000000' } },
  });
  if (connection.data) {
    const last = connection.data.lastError;
    seen.push(last === null ? 'healthy' : \`\${last.code} at \${last.at}\`);
    // @ts-expect-error lastError is null when the connection is healthy
    seen.push(connection.data.lastError.code);
  }
  const proxied = await client.GET('/v1/tenants/{tenantId}/proxy/{path}/{path2}', {
    params: { path: { tenantId: 'acme', path: 'workflows', path2: 'wf_1' } },
  });
  seen.push(String(proxied.response.status));
  return seen;
}
`;

/** The same program with the SDK @hey-api/openapi-ts generates. */
const HEY_API_PROGRAM = `
import { client } from './hey/client.gen.js';
import { createWebhook, facadeListWorkflows, facadeProxy2Get, getConnection, listEvents } from './hey/sdk.gen.js';

client.setConfig({ baseUrl: 'http://localhost:3000', headers: { authorization: 'Bearer key' } });

export async function partner(): Promise<string[]> {
  const seen: string[] = [];
  const list = await facadeListWorkflows({
    path: { tenantId: 'acme' },
    headers: { 'X-User-Id': 'u-alice' },
    query: { upstreamQuery: { step: 'Review' } },
  });
  if (list.data !== undefined) {
    for (const w of Array.isArray(list.data) ? list.data : []) {
      seen.push(String(w.versionNumber ?? 0), String(w.lastModified ?? ''));
      // @ts-expect-error the spec does not promise versionNumber on every answer
      const version: number = w.versionNumber;
      seen.push(String(version));
    }
  } else if (typeof list.error === 'object' && list.error !== null && 'error' in list.error) {
    seen.push(JSON.stringify(list.error.error));
  }
  const hook = await createWebhook({ path: { tenantId: 'acme' }, body: { events: ['workflow_step_updated'] } });
  if (hook.data) {
    seen.push(...(hook.data.events ?? []), hook.data.targetURL ?? '', hook.data.headers?.Authorization ?? '');
    // @ts-expect-error targetURL is not promised either
    const target: string = hook.data.targetURL;
    seen.push(target);
  }
  const events = await listEvents({ path: { tenantId: 'acme' }, query: { limit: 10 } });
  for (const e of events.data?.events ?? []) {
    const p = e.payload;
    if (typeof p === 'object' && p !== null && !Array.isArray(p)) seen.push(e.type, String(p.workflowId ?? ''));
    // @ts-expect-error a payload is any JSON value, not always an object
    seen.push(String(p.workflowId));
  }
  const connection = await getConnection({ path: { tenantId: 'acme', connectionId: '00000000-0000-4000-8000-000000000000' } });
  if (connection.data) {
    const last = connection.data.lastError;
    seen.push(last === null ? 'healthy' : \`\${last.code} at \${last.at}\`);
    // @ts-expect-error lastError is null when the connection is healthy
    seen.push(connection.data.lastError.code);
  }
  const proxied = await facadeProxy2Get({ path: { tenantId: 'acme', path: 'workflows', path2: 'wf_1' } });
  seen.push(String(proxied.response?.status));
  return seen;
}
`;

const TSCONFIG = {
  compilerOptions: {
    strict: true,
    noEmit: true,
    target: 'es2022',
    module: 'esnext',
    moduleResolution: 'bundler',
    lib: ['es2022', 'dom', 'dom.iterable'],
    types: [],
    skipLibCheck: false,
  },
};

function run(args: string[], cwd: string): { status: number | null; output: string } {
  const got = spawnSync(process.execPath, args, { cwd, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  return { status: got.status, output: `${got.stdout}${got.stderr}` };
}

describe('clients generated from the OpenAPI document compile with --strict against a partner program', () => {
  let t: TestApp;
  let dir: string;
  let document: object;

  beforeAll(async () => {
    t = await startTestApp({ sandbox: false });
    document = (await t.request<object>('GET', '/docs-json', { key: null })).body;
    // A partner's project: its own directory, the workspace's packages as its node_modules.
    dir = mkdtempSync(join(tmpdir(), 'cws-clients-'));
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    writeFileSync(join(dir, 'openapi.json'), JSON.stringify(document));
  });

  afterAll(async () => {
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('openapi-typescript + openapi-fetch: 0 errors', async () => {
    const project = join(dir, 'openapi-fetch');
    mkdirSync(project);
    symlinkSync(join(ROOT, 'node_modules'), join(project, 'node_modules'), 'dir');
    writeFileSync(join(project, 'schema.ts'), await typesFromDocument(document));
    writeFileSync(join(project, 'partner.ts'), OPENAPI_FETCH_PROGRAM);
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify(TSCONFIG));
    const tsc = run([TSC, '-p', project], project);
    expect([tsc.status, tsc.output]).toEqual([0, '']);
  });

  it('@hey-api/openapi-ts (fetch client): 0 errors', () => {
    const project = join(dir, 'hey-api');
    mkdirSync(project);
    symlinkSync(join(ROOT, 'node_modules'), join(project, 'node_modules'), 'dir');
    const generated = run(
      [HEY_API_CLI, '-i', join(dir, 'openapi.json'), '-o', join(project, 'hey'), '-c', '@hey-api/client-fetch', '--no-log-file', '-s'],
      project,
    );
    expect([generated.status, generated.output]).toEqual([0, '']);
    writeFileSync(join(project, 'partner.ts'), HEY_API_PROGRAM);
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify(TSCONFIG));
    const tsc = run([TSC, '-p', project], project);
    expect([tsc.status, tsc.output]).toEqual([0, '']);
  });
});
