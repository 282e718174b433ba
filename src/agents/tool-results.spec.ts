import { describe, expect, it } from '@jest/globals';
import { AppError, type ErrorCode } from '../common/app-error.js';
import { answerOutcome, failureOutcome } from './tool-results.js';

describe('tool results: what an agent reads when things are not fine', () => {
  it("passes a success on as structuredContent, and the upstream's refusal as an error with its status and description", () => {
    expect(answerOutcome({ status: 200, contentType: 'application/json', body: { id: 'w1' } }).result).toEqual({
      content: [{ type: 'text', text: '{"id":"w1"}' }],
      structuredContent: { status: 200, body: { id: 'w1' } },
    });
    const refused = answerOutcome({
      status: 403,
      contentType: 'application/json',
      body: { error: 'forbidden', error_description: 'Not yours' },
    });
    expect(refused.status).toBe(403);
    expect(refused.result.isError).toBe(true);
    expect(refused.result.content[0].text).toMatch(/HTTP 403 \(forbidden: Not yours\)/);
  });

  it('asks to wait the seconds given, for the tenant bound and for the company quota alike', () => {
    const limited = failureOutcome(new AppError('too_many_requests', 'Busy.', undefined, 1), null);
    expect(limited.result.content[0].text).toMatch(/too_many_requests.*retry after 1 second\b/);
    // The quota's code comes from the routing module (docs/quotas.md); its seconds come as Retry-After's.
    const quota = failureOutcome(new AppError('quota_exhausted' as ErrorCode, 'The budget is spent.', undefined, 12), null);
    expect(quota.result.isError).toBe(true);
    expect(quota.result.content[0].text).toMatch(/quota_exhausted.*retry after 12 seconds/);
  });

  it('names the connect link when the user must connect, and says what to do without one', () => {
    expect(failureOutcome(new AppError('user_not_connected', 'x'), 'http://h/connect/abc').result.content[0].text).toMatch(
      /open http:\/\/h\/connect\/abc/,
    );
    expect(failureOutcome(new AppError('reauth_required', 'x'), null).result.content[0].text).toMatch(/partner application/);
  });

  it('never shows an unknown failure', () => {
    const outcome = failureOutcome(new Error('secret detail'), null);
    expect(outcome.status).toBe(500);
    expect(outcome.result.content[0].text).not.toContain('secret detail');
  });
});
