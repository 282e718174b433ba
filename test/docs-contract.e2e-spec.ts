import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './support/spawn-app.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * docs/api.md and the OpenAPI document the service serves at /docs-json name the same routes. The rule, stated at
 * the top of docs/api.md: a route is named in docs/api.md by a code span `METHOD /path` (methods may be joined,
 * `GET/PATCH/DELETE`; `{ANY}` is every method) in the first column of a table headed `method, path`, or of the
 * facade's `facade route` table, whose paths are under the base its section names. Both sides are compared as
 * `METHOD /path` with the query string dropped and every `{parameter}` written `{}`. The console's own routes
 * (`/console/…`) are left out of the comparison: they serve the console page, not partners.
 */

const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options'];

// A rest parameter (`{path…}`) stands for one or more segments: the document spells such a path once per depth.
const normalise = (path: string) =>
  path
    .replace(/[?#].*$/, '')
    .replace(/\{[^}]*…\}/g, '{…}')
    .replace(/\{[^}…]*\}/g, '{}');
const restMatches = (documented: string, served: string) =>
  documented.endsWith('/{…}') && new RegExp(`^${escape(documented.slice(0, -4))}(/\\{\\})+$`).test(served);
const escape = (s: string) => s.replace(/[.*+?^$()|[\]\\{}]/g, '\\$&');

/** The routes docs/api.md names in its route tables, as `METHOD /path` (method `ANY` for `{ANY}`). */
function documentedRoutes(markdown: string): string[] {
  const routes: string[] = [];
  let base = '';
  let inTable: 'route' | 'other' | null = null;
  for (const line of markdown.split('\n')) {
    const named = /^Base `(\/[^`]+)`/.exec(line);
    if (named) base = named[1];
    if (/^## /.test(line)) base = '';
    if (!line.startsWith('|')) {
      inTable = null;
      continue;
    }
    const firstCell = line.split('|')[1].trim();
    if (inTable === null) {
      inTable = firstCell === 'method, path' || firstCell === 'facade route' ? 'route' : 'other';
      if (firstCell === 'facade route' && !base) throw new Error('the facade route table has no `Base` line before it');
      if (firstCell === 'method, path') base = '';
      continue;
    }
    if (inTable !== 'route' || /^-+$/.test(firstCell)) continue;
    for (const [, span] of firstCell.matchAll(/`([^`]+)`/g)) {
      const route = /^(\{ANY\}|[A-Z]+(?:\/[A-Z]+)*) (\/\S*)$/.exec(span);
      if (!route) continue;
      for (const method of route[1] === '{ANY}' ? ['ANY'] : route[1].split('/')) routes.push(`${method} ${normalise(base + route[2])}`);
    }
  }
  return routes;
}

interface OpenApiDocument {
  paths: Record<string, Record<string, unknown>>;
}

/** The operations of the OpenAPI document, as `METHOD /path`, without the console's. */
function servedRoutes(doc: OpenApiDocument): string[] {
  return Object.entries(doc.paths)
    .filter(([path]) => !path.startsWith('/console/'))
    .flatMap(([path, item]) =>
      Object.keys(item)
        .filter((m) => METHODS.includes(m))
        .map((m) => `${m.toUpperCase()} ${normalise(path)}`),
    );
}

describe('docs/api.md names the routes of the OpenAPI document', () => {
  const documented = documentedRoutes(readFileSync(join(ROOT, 'docs', 'api.md'), 'utf8'));
  let t: TestApp;
  let served: string[];

  beforeAll(async () => {
    t = await startTestApp({ sandbox: false });
    served = servedRoutes((await t.request<OpenApiDocument>('GET', '/docs-json', { key: null })).body);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('reads the route tables of docs/api.md (the operator, connection, facade, events and health tables)', () => {
    for (const route of [
      'POST /v1/tenants',
      'DELETE /v1/tenants/{}',
      'GET /v1/tenants/{}/workflows',
      'ANY /v1/tenants/{}/proxy/{…}',
      'GET /health/ready',
    ])
      expect(documented).toContain(route);
    expect(documented.filter((r) => r.startsWith('GET /workflows'))).toEqual([]);
  });

  it('every route docs/api.md names is served and in the document', () => {
    const pathsServed = new Set(served.map((r) => r.split(' ')[1]));
    const missing = documented.filter((r) => {
      const [method, path] = r.split(' ');
      const paths = [...pathsServed].filter((p) => p === path || restMatches(path, p));
      return method === 'ANY' ? paths.length === 0 : !paths.some((p) => served.includes(`${method} ${p}`));
    });
    expect(missing).toEqual([]);
  });

  it('every operation of the document is named in docs/api.md', () => {
    const anyPaths = documented.filter((r) => r.startsWith('ANY ')).map((r) => r.slice(4));
    const named = (r: string) => {
      const [method, path] = r.split(' ');
      return documented.some((d) => {
        const [dMethod, dPath] = d.split(' ');
        return (dMethod === method || dMethod === 'ANY') && (dPath === path || restMatches(dPath, path));
      });
    };
    const unnamed = served.filter((r) => !named(r) && !anyPaths.includes(r.split(' ')[1]));
    expect(unnamed).toEqual([]);
  });
});
