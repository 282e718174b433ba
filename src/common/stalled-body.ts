import type { IncomingMessage, ServerResponse } from 'node:http';
import { requestIdOf } from './request-id.js';
import { setAnswerHeaders } from './security-headers.js';
import { hasBody } from './request-body.js';

interface Watched {
  req: IncomingMessage;
  res: ServerResponse;
  bytesRead: number;
  since: number;
}

/**
 * Cuts a request whose body stops arriving (docs/security.md, "Timeouts"): no new byte from the client for
 * `timeoutMs` while the service waits for one. The server's own timeouts do not catch it: the whole-request
 * timeout must let a long upload through, and the idle timeout counts the answer's traffic too. An upload that
 * keeps progressing is never cut, however long; nor is one that waits on the service (bytes it has not read
 * yet: a slow upstream applying backpressure), since the stall is then not the client's. One timer for all
 * requests, ticking every `min(1 s, timeoutMs / 4)`.
 */
export class StalledBodies {
  private readonly watched = new Set<Watched>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly timeoutMs: number) {}

  /**
   * Watches a request that announces a body, until the body has all arrived or the request is gone. A request
   * whose body has arrived leaves the set when its answer closes, not at the next tick: held up to a second past
   * its answer, each outlived the young generation, and at thousands of POSTs a second they filled the old one
   * (bench/agents.ts).
   */
  watch(req: IncomingMessage, res: ServerResponse): void {
    if (!hasBody(req)) return;
    const watched: Watched = { req, res, bytesRead: req.socket.bytesRead, since: Date.now() };
    this.watched.add(watched);
    res.on('close', () => {
      // An answer given before its body arrived (a refusal) leaves the body to the watch: it still must not stall.
      if (req.complete || req.destroyed || req.socket.destroyed) this.watched.delete(watched);
    });
    if (this.timer === null) {
      this.timer = setInterval(() => this.tick(), Math.max(10, Math.min(1000, Math.floor(this.timeoutMs / 4))));
      this.timer.unref();
    }
  }

  /** How many requests are watched now. */
  get size(): number {
    return this.watched.size;
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.watched.clear();
  }

  private tick(): void {
    const now = Date.now();
    for (const w of this.watched) {
      const { req, res } = w;
      if (req.complete || req.destroyed || req.socket.destroyed) {
        this.watched.delete(w);
        continue;
      }
      const bytesRead = req.socket.bytesRead;
      if (bytesRead !== w.bytesRead || req.readableLength > 0) {
        w.bytesRead = bytesRead;
        w.since = now;
        continue;
      }
      if (now - w.since < this.timeoutMs) continue;
      this.watched.delete(w);
      cut(req, res);
    }
    if (this.watched.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }
}

/**
 * `408` in the contract's shape when nothing was answered yet, then the request destroyed with an error, so
 * whatever reads its body (a facade upload's upstream call, the JSON parser) fails and lets go at once; the
 * connection closes with it.
 */
function cut(req: IncomingMessage, res: ServerResponse): void {
  const stop = () => req.destroy(new Error('The request body stopped arriving.'));
  if (res.headersSent) {
    stop();
    return;
  }
  const requestId = requestIdOf(req, res);
  // A facade call sets them with its answer (edge/front-door.ts): none was written yet.
  if (!res.hasHeader('x-request-id')) setAnswerHeaders(res, requestId);
  const json = JSON.stringify({ error: { code: 'request_timeout', message: 'The request body stopped arriving.', requestId } });
  res.writeHead(408, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(json),
    connection: 'close',
  });
  res.end(json, stop);
  setTimeout(stop, 1000).unref(); // the answer could not be flushed: close anyway
}
