import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Agent, type Dispatcher } from 'undici';
import { dispatchStreamed, UpstreamAbort, type StreamedResponse } from './streamed-request.js';

/** Each test decides the answer of a real HTTP server; `closed` settles when the server's side of the answer closes. */
let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end();
let server: Server;
let origin: string;
const agent = new Agent({ connections: 8, keepAliveTimeout: 1000 });

beforeAll(async () => {
  server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await agent.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** dispatchStreamed as a promise, resolved with the status and headers. */
function requestStreamed(agent: Dispatcher, options: Dispatcher.DispatchOptions, signal?: UpstreamAbort): Promise<StreamedResponse> {
  return new Promise((resolve, reject) => dispatchStreamed(agent, options, signal, { answer: resolve, fail: reject }));
}

const get = (path = '/', signal?: UpstreamAbort) => requestStreamed(agent, { origin, path, method: 'GET', headers: {} }, signal);

/** A destination that takes one chunk at a time, slowly (its buffer holds 1 KiB): the body must wait for it. */
function slowSink(): { sink: Writable; received: () => Buffer; finished: Promise<void> } {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    highWaterMark: 1024,
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk);
      setImmediate(done);
    },
  });
  const finished = new Promise<void>((resolve) => sink.once('finish', resolve));
  return { sink, received: () => Buffer.concat(chunks), finished };
}

/** A body of `size` bytes that no two runs of 256 repeat at the same place (a reordered chunk would show). */
function pattern(size: number): Buffer {
  const out = Buffer.alloc(size);
  for (let i = 0; i < size; i++) out[i] = (i * 7 + (i >> 8)) & 0xff;
  return out;
}

function serverSideClosed(res: ServerResponse): Promise<boolean> {
  return new Promise((resolve) => res.once('close', () => resolve(res.writableFinished)));
}

describe('requestStreamed', () => {
  it('resolves with the status and headers; a body that arrived before anyone read it is held, then piped whole', async () => {
    handler = (_req, res) => res.writeHead(201, { 'content-type': 'text/plain', 'x-a': '1' }).end('hello');
    const answer = await get();
    await new Promise((r) => setTimeout(r, 50)); // the body has arrived meanwhile
    expect(answer.statusCode).toBe(201);
    expect(answer.headers).toMatchObject({ 'content-type': 'text/plain', 'x-a': '1' });
    const { sink, received, finished } = slowSink();
    const closed = new Promise((resolve) => answer.body.once('close', resolve));
    answer.body.pipe(sink);
    await finished;
    await closed;
    expect(received().toString()).toBe('hello');
  });

  it('pipes a body larger than the destination takes at once, in order, pausing while the destination is full', async () => {
    const body = pattern(4 * 1024 * 1024);
    handler = (_req, res) => res.writeHead(200, { 'content-length': String(body.length) }).end(body);
    const answer = await get();
    const { sink, received, finished } = slowSink();
    let pausedWhileFull = 0;
    const write = sink.write.bind(sink);
    sink.write = ((chunk: Buffer) => {
      const more = write(chunk);
      queueMicrotask(() => (pausedWhileFull += !more && answer.body.controller?.paused === true ? 1 : 0));
      return more;
    }) as typeof sink.write;
    answer.body.pipe(sink);
    await finished;
    expect(received().equals(body)).toBe(true);
    expect(pausedWhileFull).toBeGreaterThan(0); // the upstream read was paused while the destination was full
  });

  it('reads the whole body as text, and reads it by async iteration', async () => {
    handler = (_req, res) => {
      res.write('one,');
      setTimeout(() => res.end('two'), 20);
    };
    expect(await (await get()).body.text()).toBe('one,two');
    const chunks: string[] = [];
    for await (const chunk of (await get()).body) chunks.push(chunk.toString());
    expect(chunks.join('')).toBe('one,two');
  });

  it('dump() reads a small rest and keeps the connection; past 128 KiB it closes the connection instead', async () => {
    let closedFinished: Promise<boolean> = Promise.resolve(false);
    handler = (_req, res) => {
      closedFinished = serverSideClosed(res);
      res.end('small');
    };
    await (await get()).body.dump();
    expect(await closedFinished).toBe(true);

    handler = (_req, res) => {
      closedFinished = serverSideClosed(res);
      res.writeHead(200, { 'content-length': String(8 * 1024 * 1024) });
      const block = Buffer.alloc(64 * 1024);
      let sent = 0;
      const pump = () => {
        while (sent < 8 * 1024 * 1024 && !res.destroyed) {
          sent += block.length;
          if (!res.write(block)) return void res.once('drain', pump);
        }
      };
      pump();
    };
    await (await get()).body.dump();
    expect(await closedFinished).toBe(false); // cut, not read to its end
  });

  it('destroy() aborts an answer in flight and closes the body once; an iteration broken off does too', async () => {
    let closedFinished: Promise<boolean> = Promise.resolve(true);
    handler = (_req, res) => {
      closedFinished = serverSideClosed(res);
      res.write('part');
    };
    const answer = await get();
    let closes = 0;
    answer.body.on('close', () => closes++);
    answer.body.destroy();
    answer.body.destroy();
    expect(await closedFinished).toBe(false);
    expect(closes).toBe(1);

    const iterated = await get();
    for await (const chunk of iterated.body) {
      expect(chunk.toString()).toBe('part');
      break;
    }
    expect(await closedFinished).toBe(false);
  });

  it("an upstream cut mid-body is the piped body's 'error'; an abort before the answer rejects with an AbortError", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('only part of it');
      setTimeout(() => res.destroy(), 20);
    };
    const answer = await get();
    const failed = new Promise<Error>((resolve) => answer.body.once('error', resolve));
    answer.body.pipe(slowSink().sink);
    expect(await failed).toBeInstanceOf(Error);

    handler = () => undefined; // never answers
    const signal = new UpstreamAbort();
    const pending = get('/', signal);
    setTimeout(() => signal.abort(), 20);
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
  });
});
