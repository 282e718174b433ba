import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from '@jest/globals';
import { trace } from '@opentelemetry/api';
import { connectionAttributes, startClientSpan } from './client-spans.js';
import { annotate, contextOf, currentTraceparent, inSpan, traceRenewal } from './operation-spans.js';
import { traceRequest } from './request-tracing.js';
import { tracingOn } from './tracing.js';

describe('tracing while off (no OTEL_EXPORTER_OTLP_ENDPOINT)', () => {
  it('starts nothing and makes no span objects', async () => {
    expect(tracingOn()).toBe(false);
    expect(trace.getActiveSpan()).toBeUndefined();
    expect(startClientSpan('GET upstream', 'GET', 'http://upstream/x', null)).toBeNull();
    expect(connectionAttributes('acme', 'c1', 'sandbox', false)).toBeNull();
    expect(currentTraceparent()).toBeNull();
    expect(contextOf('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01')).toBeUndefined();
    annotate({ 'tenant.id': 'acme' });
    expect(await inSpan('work', {}, async () => 7)).toBe(7);
    expect(await traceRenewal({ id: 'c1', tenantId: 'acme' }, 'sandbox', 'scheduled', async () => 'renewed')).toBe('renewed');
  });

  it('serves a request directly, adding no listener to it', () => {
    const req = Object.assign(new EventEmitter(), {
      headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
      url: '/x',
    }) as unknown as IncomingMessage;
    const res = new EventEmitter() as unknown as ServerResponse;
    let served = 0;
    traceRequest(req, res, 'req-1', () => served++);
    expect(served).toBe(1);
    expect((res as unknown as EventEmitter).listenerCount('close')).toBe(0);
  });
});
