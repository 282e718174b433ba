import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';

/**
 * A token endpoint answer is a few hundred bytes. Past this much the rest is read and dropped, not kept: the
 * cut text then fails to parse like any other malformed answer, and the status still decides what happens.
 */
const TOKEN_RESPONSE_LIMIT = 64 * 1024;

export interface SmallResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * One request whose answer is read whole into a string, through undici's handler API (`dispatch`) rather than
 * `request`: no body stream, no consumer promise chain per call, for the thousands of token calls a second the
 * scheduler makes. Errors (connect, timeouts, a socket
 * closed mid-answer) reject with undici's own error classes, exactly as `request` would.
 */
export function postSmall(agent: Dispatcher, options: Dispatcher.DispatchOptions): Promise<SmallResponse> {
  return new Promise((resolve, reject) => {
    let status = 0;
    let headers: IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    let size = 0;
    agent.dispatch(options, {
      onRequestStart() {},
      onResponseStart(_controller, statusCode, responseHeaders) {
        status = statusCode;
        headers = responseHeaders;
      },
      onResponseData(_controller, chunk) {
        size += chunk.length;
        if (size <= TOKEN_RESPONSE_LIMIT) chunks.push(chunk);
      },
      onResponseEnd() {
        resolve({ status, headers, body: (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)).toString('utf8') });
      },
      onResponseError(_controller, error) {
        reject(error);
      },
    });
  });
}
