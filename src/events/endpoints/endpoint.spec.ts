import { describe, expect, it } from '@jest/globals';
import { endpointDisableAfter } from '../../config/value-formats.js';
import { typeMatches } from './endpoint.js';
import { endpointWebhookId } from './endpoint-delivery.service.js';

describe('event endpoints: types, webhook ids, ENDPOINT_DISABLE_AFTER', () => {
  it('matches exact names and prefix.* (the dot included), * and null taking everything', () => {
    expect(typeMatches(null, 'anything')).toBe(true);
    expect(typeMatches(['*'], 'anything')).toBe(true);
    expect(typeMatches(['record.*'], 'record.changed')).toBe(true);
    expect(typeMatches(['record.*'], 'records.changed')).toBe(false);
    expect(typeMatches(['record.*'], 'record')).toBe(false);
    expect(typeMatches(['workflow_step_updated'], 'workflow_step_updated')).toBe(true);
    expect(typeMatches(['workflow_step_updated'], 'workflow_step')).toBe(false);
    expect(typeMatches([], 'record.changed')).toBe(false);
  });

  it('gives one webhook-id per event and endpoint, the same every time', () => {
    const a = endpointWebhookId('11111111-1111-4111-8111-111111111111', '0190d6c4-0000-7000-8000-000000000001');
    expect(a).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(endpointWebhookId('11111111-1111-4111-8111-111111111111', '0190d6c4-0000-7000-8000-000000000001')).toBe(a);
    expect(endpointWebhookId('22222222-2222-4222-8222-222222222222', '0190d6c4-0000-7000-8000-000000000001')).not.toBe(a);
    expect(endpointWebhookId('11111111-1111-4111-8111-111111111111', '0190d6c4-0000-7000-8000-000000000002')).not.toBe(a);
  });

  it('reads ENDPOINT_DISABLE_AFTER as a duration from 10s to 365d', () => {
    expect(endpointDisableAfter('5d')).toBe(5 * 86_400_000);
    expect(endpointDisableAfter('10s')).toBe(10_000);
    expect(endpointDisableAfter('90m')).toBe(90 * 60_000);
    expect(endpointDisableAfter('36h')).toBe(36 * 3_600_000);
    for (const bad of ['9s', '366d', '5', 'five days', '1.5d', '-1d', '']) expect(() => endpointDisableAfter(bad)).toThrow();
  });
});
