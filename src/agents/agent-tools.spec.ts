import { describe, expect, it } from '@jest/globals';
import { toolsFromDocument } from './agent-tools.js';

const upstreamAnswer = (schema: object) => ({
  description: 'ok',
  headers: { 'x-upstream-status': { required: true } },
  content: { 'application/json': { schema } },
});

const document = {
  components: { schemas: { Thing: { type: 'object', properties: { id: { type: 'string' } } } } },
  paths: {
    '/v1/tenants/{tenantId}/things/{thingId}': {
      get: {
        operationId: 'getThing',
        summary: 'Read a thing',
        tags: ['facade'],
        parameters: [
          { name: 'tenantId', in: 'path', required: true },
          { name: 'thingId', in: 'path', required: true },
          { name: 'upstreamQuery', in: 'query' },
          { name: 'X-User-Id', in: 'header' },
        ],
        responses: { '200': upstreamAnswer({ $ref: '#/components/schemas/Thing' }) },
      },
    },
    '/v1/tenants/{tenantId}/things': {
      post: {
        operationId: 'uploadThing',
        tags: ['facade'],
        requestBody: { content: { 'multipart/form-data': { schema: { type: 'object' } } } },
        responses: { '201': upstreamAnswer({}) },
      },
    },
    '/v1/tenants/{tenantId}/hooks': {
      post: {
        operationId: 'createHook',
        summary: 'Make a hook',
        tags: ['webhooks'],
        requestBody: { required: true, content: { 'application/json': { schema: { type: 'object' } } } },
        responses: { '201': upstreamAnswer({}) },
      },
    },
    '/v1/tenants/{tenantId}/keys': { get: { operationId: 'listKeys', responses: { '200': { description: 'ours' } } } },
  },
};

describe('tools made from the OpenAPI document', () => {
  const { tools, skipped } = toolsFromDocument(document);

  it('makes a tool of each operation that passes an upstream answer, and says why the others are left out', () => {
    expect(tools.map((t) => [t.name, t.group])).toEqual([
      ['getThing', 'read'],
      ['createHook', 'admin'],
    ]);
    expect(skipped).toEqual([{ operationId: 'uploadThing', reason: expect.stringContaining('multipart') }]);
  });

  it('takes path parameters, the upstream query and the JSON body as input, never the tenant or the acting user', () => {
    const get = tools[0].definition;
    expect(Object.keys(get.inputSchema.properties as object)).toEqual(['thingId', 'query']);
    expect(get.inputSchema).toMatchObject({ required: ['thingId'], additionalProperties: false });
    expect(tools[1].definition.inputSchema).toMatchObject({ required: ['body'] });
    expect(tools[0].target).toEqual({
      kind: 'facade',
      method: 'GET',
      path: '/things/{thingId}',
      params: ['thingId'],
      query: true,
      body: false,
    });
  });

  it("answers the operation's schema as structured output, references resolved", () => {
    expect(tools[0].definition.outputSchema).toEqual({
      type: 'object',
      properties: {
        status: { type: 'integer', description: "The upstream's HTTP status." },
        body: { type: 'object', properties: { id: { type: 'string' } } },
      },
      required: ['status', 'body'],
    });
  });
});
