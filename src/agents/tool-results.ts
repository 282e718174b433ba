import { AppError, isContractFailure } from '../common/app-error.js';
import type { ReadAnswer } from '../upstream/upstream-answers.js';

/** A tool's result as MCP carries it (CallToolResult), and the status the audit row records. */
export interface ToolOutcome {
  result: { content: Array<{ type: 'text'; text: string }>; structuredContent?: Record<string, unknown>; isError?: boolean };
  status: number;
}

/** Codes that ask the caller to wait: this service's tenant bound, and the company's upstream budget (docs/quotas.md). */
const WAIT_CODES = new Set(['too_many_requests', 'quota_exhausted']);

/** The upstream answered: a success carries its body as structuredContent; a refusal is an error a model can act on. */
/** An upstream answer, read whole; `text` is its raw body when that is safe to show as is (never after a redaction). */
type Answer = Omit<ReadAnswer, 'text'> & { text?: string };

export function answerOutcome(answer: Answer): ToolOutcome {
  // The upstream's own text when it is what the body parses from (no second serialisation), else the body's JSON.
  const text =
    answer.text !== undefined && answer.body !== answer.text
      ? answer.text
      : typeof answer.body === 'string'
        ? answer.body
        : JSON.stringify(answer.body);
  if (answer.status < 400) {
    return {
      status: answer.status,
      result: {
        content: [{ type: 'text', text: text === '' ? `HTTP ${answer.status}` : text }],
        structuredContent: { status: answer.status, body: answer.body === '' ? null : answer.body },
      },
    };
  }
  return { status: answer.status, result: errorResult(refusalText(answer)) };
}

function refusalText(answer: Answer): string {
  const body = answer.body;
  let detail = '';
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const { error, error_description: description } = body as { error?: unknown; error_description?: unknown };
    const code = typeof error === 'string' ? error : error !== undefined ? JSON.stringify(error) : '';
    detail = [code, typeof description === 'string' ? description : ''].filter(Boolean).join(': ');
  } else if (typeof body === 'string') {
    detail = body.slice(0, 500);
  }
  const hint =
    answer.status === 401 || answer.status === 403
      ? ' The user may not do this in CWS (their own permissions apply).'
      : answer.status === 404
        ? ' Check the id: the user may not see it, or it does not exist.'
        : answer.status === 429
          ? ' The upstream asks to slow down: wait before trying again.'
          : answer.status >= 500
            ? ' The upstream failed: try again later.'
            : ' Check the arguments.';
  return `The upstream refused the call with HTTP ${answer.status}${detail ? ` (${detail})` : ''}.${hint}`;
}

/**
 * A failure before or around the upstream call, as a tool error (never a protocol error): what happened and what
 * to do. `connectUrl`: where the user connects (again), for `user_not_connected` and `reauth_required`.
 */
export function failureOutcome(e: unknown, connectUrl: string | null): ToolOutcome {
  if (e instanceof AppError) {
    const code: string = e.code;
    if (code === 'user_not_connected' || code === 'reauth_required') {
      const what =
        code === 'user_not_connected' ? 'The user has not connected their CWS account yet' : 'The user must authorize CWS access again';
      const how = connectUrl
        ? ` Ask them to open ${connectUrl} (valid 10 minutes) and finish signing in, then call the tool again.`
        : ' Ask the partner application to connect them, then call the tool again.';
      return { status: e.status, result: errorResult(`${what} (${code}).${how}`) };
    }
    if (WAIT_CODES.has(code)) {
      const seconds = e.retryAfterSeconds ?? 1;
      return {
        status: e.status,
        result: errorResult(`Too many calls right now (${code}): retry after ${seconds} second${seconds === 1 ? '' : 's'}. ${e.message}`),
      };
    }
    if (code === 'admin_not_connected')
      return { status: e.status, result: errorResult(`${e.message} This tool needs the company's admin connection (${code}).`) };
    if (code === 'upstream_unavailable' || code === 'upstream_timeout' || code === 'upstream_error')
      return { status: e.status, result: errorResult(`${e.message} (${code}). Try again in a little while.`) };
    return { status: e.status, result: errorResult(`${e.message} (${code})`) };
  }
  if (isContractFailure(e)) {
    const { status, code, message } = e.contractAnswer;
    return { status, result: errorResult(`${message} (${code}). Try again in a little while.`) };
  }
  return { status: 500, result: errorResult('The call failed inside cws-connect (internal_error). Try again later.') };
}

export function errorResult(text: string): ToolOutcome['result'] {
  return { content: [{ type: 'text', text }], isError: true };
}
