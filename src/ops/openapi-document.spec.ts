import { describe, expect, it } from '@jest/globals';
import type { OpenAPIObject } from '@nestjs/swagger';
import { upstreamAnswer } from '../upstream/upstream-openapi.js';
import { SHOWS_SECRET_EXTENSION } from '../common/api-docs.js';
import { finishDocument, withConsoleSessions } from './openapi-document.js';

const ERROR = {
  description: '`tenant_not_found`',
  content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponseDto' } } },
};

function doc(paths: Record<string, unknown>, schemas: Record<string, unknown> = {}): OpenAPIObject {
  return { openapi: '3.0.0', info: { title: 't', version: '1' }, paths, components: { schemas } } as OpenAPIObject;
}

describe('the document rules (openapi-document.ts)', () => {
  it('writes 3.0 nullable as JSON Schema 2020-12: a type with null, a reference in oneOf with null, null in an enum', () => {
    const out = finishDocument(
      doc(
        {},
        {
          A: {
            type: 'object',
            properties: {
              s: { type: 'string', nullable: true },
              r: { type: 'object', nullable: true, allOf: [{ $ref: '#/components/schemas/B' }], description: 'kept' },
              e: { type: 'string', enum: ['x'], nullable: true },
              o: { oneOf: [{ type: 'number' }], nullable: true },
              n: { type: 'string', nullable: false },
            },
          },
        },
      ),
    );
    expect(out.openapi).toBe('3.1.0');
    expect((out.components?.schemas?.A as { properties: unknown }).properties).toEqual({
      s: { type: ['string', 'null'] },
      r: { description: 'kept', oneOf: [{ $ref: '#/components/schemas/B' }, { type: 'null' }] },
      e: { type: ['string', 'null'], enum: ['x', null] },
      o: { oneOf: [{ type: 'number' }, { type: 'null' }] },
      n: { type: 'string' },
    });
  });

  it('lets a console session (cookie and CSRF header together) call guarded operations, except those that show a secret', () => {
    const out = withConsoleSessions(
      doc({
        '/a': { get: { security: [{ bearer: [] }], responses: {} } },
        '/b': { post: { security: [{ bearer: [] }], [SHOWS_SECRET_EXTENSION]: true, responses: {} } },
        '/c': { get: { security: [], responses: {} } },
      }),
    );
    const a = out.paths['/a'].get!;
    expect(a.security).toEqual([{ bearer: [] }, { consoleSession: [], consoleCsrf: [] }]);
    expect(Object.keys(a.responses)).toContain('403');
    expect(out.paths['/b'].post).toEqual({ security: [{ bearer: [] }], responses: {} });
    expect(out.paths['/c'].get!.security).toEqual([]);
  });

  it("gives a pass-through operation the upstream's answers: both bodies on our error statuses, and 2XX/3XX/4XX/5XX", () => {
    const out = finishDocument(
      doc({
        '/p': { get: { security: [{ bearer: [] }], responses: { '200': upstreamAnswer('It.', 'UpstreamObject'), '404': ERROR } } },
        '/q': { get: { security: [{ bearer: [] }], responses: { '200': { description: 'ours' }, '404': ERROR } } },
      }),
    );
    const p = out.paths['/p'].get!.responses as unknown as Record<string, Record<string, unknown>>;
    expect(Object.keys(p).sort()).toEqual(['200', '2XX', '3XX', '404', '429', '4XX', '503', '5XX']);
    expect(p['404'].content).toEqual({
      'application/json': {
        schema: { anyOf: [{ $ref: '#/components/schemas/ErrorResponseDto' }, { $ref: '#/components/schemas/UpstreamError' }] },
      },
      '*/*': expect.anything(),
    });
    expect(p['404'].headers).toEqual({ 'x-upstream-status': expect.objectContaining({ required: false }) });
    expect(p['5XX']).toEqual({ $ref: '#/components/responses/UpstreamError' });
    expect(out.components?.responses?.UpstreamError).toMatchObject({ headers: { 'x-upstream-status': { required: true } } });
    // An operation that answers for itself keeps its own answers (and the outage 503, the throttled 429).
    expect(Object.keys(out.paths['/q'].get!.responses).sort()).toEqual(['200', '404', '429', '503']);
  });
});
