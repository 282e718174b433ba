import { expect } from '@jest/globals';
import type { TestApp } from './test-app.js';

interface OpenApiOperation {
  summary?: string;
  security?: unknown[];
  responses: Record<string, { content?: { 'application/json'?: { schema?: { properties?: { error?: unknown } } } } }>;
}

/** The operation is documented as the contract asks: a summary, bearer security, and each 4xx with the error schema. */
export async function expectDocumented(t: TestApp, path: string, method: string, statuses: string[]): Promise<void> {
  const doc = await t.request<{ paths: Record<string, Record<string, OpenApiOperation>>; security?: unknown[] }>('GET', '/docs-json', { key: null });
  const op = doc.body.paths[path]?.[method];
  expect([path, method, typeof op?.summary]).toEqual([path, method, 'string']);
  expect(op.security ?? doc.body.security).toEqual(expect.arrayContaining([{ bearer: [] }]));
  for (const status of statuses) expect([path, method, status, op.responses[status]?.content?.['application/json']?.schema?.properties?.error]).toEqual([path, method, status, expect.anything()]);
}
