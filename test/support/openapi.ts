import { expect } from '@jest/globals';
import type { TestApp } from './test-app.js';

interface Schema {
  $ref?: string;
  anyOf?: Schema[];
  properties?: Record<string, unknown>;
}

interface OpenApiOperation {
  summary?: string;
  security?: unknown[];
  responses: Record<string, { content?: { 'application/json'?: { schema?: Schema } } }>;
}

interface OpenApiDocument {
  paths: Record<string, Record<string, OpenApiOperation>>;
  security?: unknown[];
  components?: { schemas?: Record<string, Schema> };
}

/** A schema with its `$ref` (to `#/components/schemas/...`) followed. */
function resolve(doc: OpenApiDocument, schema: Schema | undefined): Schema | undefined {
  if (!schema?.$ref) return schema;
  return doc.components?.schemas?.[schema.$ref.replace('#/components/schemas/', '')];
}

/**
 * The operation is documented as the contract asks: a summary, bearer security, and each 4xx with the error schema
 * (on an operation that passes the upstream's answers through, as one of the two bodies it may carry).
 */
export async function expectDocumented(t: TestApp, path: string, method: string, statuses: string[]): Promise<void> {
  const doc = (await t.request<OpenApiDocument>('GET', '/docs-json', { key: null })).body;
  const op = doc.paths[path]?.[method];
  expect([path, method, typeof op?.summary]).toEqual([path, method, 'string']);
  expect(op.security ?? doc.security).toEqual(expect.arrayContaining([{ bearer: [] }]));
  for (const status of statuses) {
    const given = op.responses[status]?.content?.['application/json']?.schema;
    const ours = (given?.anyOf ?? [given]).map((s) => resolve(doc, s)).find((s) => s?.properties?.error !== undefined);
    expect([path, method, status, ours?.properties?.error]).toEqual([path, method, status, expect.anything()]);
  }
}
