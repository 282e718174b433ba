import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { Readable, type Writable } from 'node:stream';
import { errors, type Dispatcher } from 'undici';

/** Past this much, dump() closes the connection rather than reading the rest (undici's own `dump` limit). */
const DUMP_LIMIT = 128 * 1024;

/** Who takes a body's chunks (one per body): `pipe`, `dump`, `text` or an async iteration. */
interface Consumer {
  data(chunk: Buffer): void;
  end(): void;
  error(error: Error): void;
}

/**
 * An answer's body as it arrives through undici's handler API: chunks are handed to the one consumer that
 * attaches (`pipe` writes them straight into the destination, pausing the upstream socket while it is full),
 * and held until one does. Not a stream: undici's `request` wraps every answer in a Readable, and piping it
 * added a third to a proxied call's instructions (bench/proxy.ts). An async iteration gets a Readable made on
 * demand. Emits 'error' (a failure after the headers, when someone listens) and 'close' (once, at the end,
 * failure or destroy).
 */
export class UpstreamBody extends EventEmitter {
  /** Set by the handler once the request is dispatched. */
  controller: Dispatcher.DispatchController | null = null;
  private held: Buffer[] = [];
  private consumer: Consumer | null = null;
  private ended = false;
  private failure: Error | null = null;
  private closed = false;

  /** Writes the body into `destination` and ends it; a failure mid-body is this body's 'error'. */
  pipe<T extends Writable>(destination: T): T {
    const resume = () => this.controller?.resume();
    this.attach({
      data: (chunk) => {
        if (destination.write(chunk)) return;
        this.controller?.pause();
        destination.once('drain', resume);
      },
      end: () => destination.end(),
      error: (error) => {
        if (this.listenerCount('error') > 0) this.emit('error', error);
      },
    });
    return destination;
  }

  /** Reads and drops the rest (a connection to reuse); past DUMP_LIMIT the connection is closed instead. */
  dump(): Promise<void> {
    return new Promise((resolve) => {
      let size = 0;
      this.attach({
        data: (chunk) => {
          size += chunk.length;
          if (size > DUMP_LIMIT) this.destroy();
        },
        end: resolve,
        error: () => resolve(),
      });
    });
  }

  /** The whole body as UTF-8. */
  text(): Promise<string> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      this.attach({
        data: (chunk) => chunks.push(chunk),
        end: () => resolve(Buffer.concat(chunks).toString('utf8')),
        error: reject,
      });
    });
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    const stream = new Readable({ read: () => this.controller?.resume() });
    stream.once('close', () => this.destroy()); // the reader broke off (a no-op once the body has ended)
    this.attach({
      data: (chunk) => {
        if (!stream.push(chunk)) this.controller?.pause();
      },
      end: () => stream.push(null),
      error: (error) => stream.destroy(error),
    });
    return stream[Symbol.asyncIterator]();
  }

  /** Stops the exchange: the request is aborted unless the answer has all arrived; the body closes. */
  destroy(error?: Error): void {
    if (this.closed) return;
    const reason = error ?? new errors.RequestAbortedError();
    const inFlight = !this.ended && this.failure === null;
    if (inFlight && this.controller !== null && !this.controller.aborted) this.controller.abort(reason);
    this.held = [];
    if (inFlight) this.fail(reason); // a no-op when the abort was reported at once
    this.close();
  }

  /** The handler's side. */
  push(chunk: Buffer): void {
    if (this.consumer !== null) this.consumer.data(chunk);
    else this.held.push(chunk);
  }

  finish(): void {
    this.ended = true;
    if (this.consumer === null) return;
    this.consumer.end();
    this.close();
  }

  fail(error: Error): void {
    if (this.closed) return;
    this.failure = error;
    if (this.consumer === null) return;
    this.consumer.error(error);
    this.close();
  }

  private attach(consumer: Consumer): void {
    if (this.consumer !== null) throw new Error('an upstream body is read once');
    this.consumer = consumer;
    const held = this.held;
    this.held = [];
    for (const chunk of held) consumer.data(chunk);
    if (this.failure !== null) {
      consumer.error(this.failure);
      this.close();
    } else if (this.ended) {
      consumer.end();
      this.close();
    }
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    this.emit('close');
  }
}

export interface StreamedResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: UpstreamBody;
}

/**
 * A request's abort signal, cheaper per call than an AbortController (an EventTarget per call) or an
 * EventEmitter: `abort()` stops the request it was given to, at once if it has started, else as it starts.
 */
export class UpstreamAbort {
  private controller: Dispatcher.DispatchController | null = null;
  private aborted = false;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.controller?.abort(new errors.RequestAbortedError());
  }

  /** dispatchStreamed's side: the request has started, or (null) has ended. */
  bind(controller: Dispatcher.DispatchController | null): void {
    this.controller = controller;
    if (controller !== null && this.aborted) controller.abort(new errors.RequestAbortedError());
  }
}

/** Who learns how an exchange went, without a promise: its answer's status and headers (the body follows), or its failure before them. */
export interface Outcome<T> {
  answer(value: T): void;
  fail(error: unknown): void;
}

/**
 * One request through undici's handler API (`dispatch`), its status and headers handed to `outcome` as soon as
 * they arrive, the body following in an UpstreamBody: no promise on the way (the facade's proxied calls). Errors
 * before the headers are undici's own error classes, as `request` would give; `signal` (an AbortSignal or an
 * UpstreamAbort) aborts the exchange with undici's RequestAbortedError (an AbortError). `outcome.answer` must not
 * throw (it runs in undici's parser).
 */
export function dispatchStreamed(
  agent: Dispatcher,
  options: Dispatcher.DispatchOptions,
  signal: AbortSignal | UpstreamAbort | undefined,
  outcome: Outcome<StreamedResponse>,
): void {
  const body = new UpstreamBody();
  let answered = false;
  let onAbort: (() => void) | null = null;
  const unhook = () => {
    if (signal instanceof UpstreamAbort) signal.bind(null);
    else if (onAbort !== null && signal !== undefined) signal.removeEventListener('abort', onAbort);
    onAbort = null;
  };
  agent.dispatch(options, {
    onRequestStart(controller) {
      body.controller = controller;
      if (signal === undefined) return;
      if (signal instanceof UpstreamAbort) {
        signal.bind(controller);
        return;
      }
      if (signal.aborted) {
        controller.abort(new errors.RequestAbortedError());
        return;
      }
      onAbort = () => controller.abort(new errors.RequestAbortedError());
      signal.addEventListener('abort', onAbort, { once: true });
    },
    onResponseStart(_controller, statusCode, headers) {
      answered = true;
      outcome.answer({ statusCode, headers: headers as IncomingHttpHeaders, body });
    },
    onResponseData(_controller, chunk) {
      body.push(chunk);
    },
    onResponseEnd() {
      unhook();
      body.finish();
    },
    onResponseError(_controller, error) {
      unhook();
      if (answered) body.fail(error);
      else outcome.fail(error);
    },
  });
}
