import { describe, expect, it } from '@jest/globals';
import { REDACTED, redactAuthorization } from './redaction.js';

describe('redactAuthorization', () => {
  it('redacts Authorization values in any letter case and at any depth', () => {
    const answer = {
      webhooks: [
        { id: 'a', headers: { Authorization: 'Bearer x', 'X-Trace': 'keep' } },
        { id: 'b', headers: { authorization: 'key' }, nested: { AUTHORIZATION: { any: 'shape' } } },
      ],
    };
    expect(redactAuthorization(answer)).toEqual({
      webhooks: [
        { id: 'a', headers: { Authorization: REDACTED, 'X-Trace': 'keep' } },
        { id: 'b', headers: { authorization: REDACTED }, nested: { AUTHORIZATION: REDACTED } },
      ],
    });
  });

  it('removes a known secret wherever it is echoed', () => {
    expect(redactAuthorization({ note: 'got sekret-123 here', n: 1, ok: true, none: null }, ['sekret-123'])).toEqual({
      note: `got ${REDACTED} here`,
      n: 1,
      ok: true,
      none: null,
    });
  });
});
