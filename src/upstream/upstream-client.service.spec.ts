import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { AppConfig } from '../config/app-config.js';
import type { CwsEnvironment } from '../config/environment-config.js';
import { UpstreamClient } from './upstream-client.service.js';
import { TokenEndpointError, UpstreamTimeoutError, UpstreamUnavailableError } from './upstream.errors.js';

/** The token call against a real HTTP server whose answer each test decides. */
type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

let handler: Handler = (_req, _body, res) => res.end();
let server: Server;
let client: UpstreamClient;
let env: CwsEnvironment;

const upstream: AppConfig['upstream'] = {
  connectTimeoutMs: 1000,
  headersTimeoutMs: 1000,
  bodyTimeoutMs: 1000,
  tokenTimeoutMs: 300,
  retries: 0,
};

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handler(req, Buffer.concat(chunks).toString('utf8'), res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  env = {
    name: 'sandbox',
    authUrl: base,
    apiUrl: base,
    clientId: 'client-1',
    clientSecret: 'not-a-real-secret',
    scopes: [],
    tokenAuth: 'body',
    userinfoMethod: 'GET',
    quotas: {},
  };
  client = new UpstreamClient({ upstream, refresh: { concurrency: 2 } } as AppConfig);
});

afterEach(() => {
  handler = (_req, _body, res) => res.end();
});

afterAll(async () => {
  await client.onModuleDestroy();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

async function failureOf(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected the call to fail');
}

describe('UpstreamClient token calls', () => {
  it('posts the refresh as JSON with the client credentials and reads an answer that arrives in several chunks', async () => {
    let seen: { method?: string; url?: string; type?: string; body?: unknown } = {};
    handler = (req, body, res) => {
      seen = { method: req.method, url: req.url, type: req.headers['content-type'], body: JSON.parse(body) };
      res.writeHead(200, { 'content-type': 'application/json' });
      const text = JSON.stringify({
        access_token: 'at-new',
        refresh_token: 'rt-new',
        expiresIn: 21600,
        token_type: 'Bearer',
        pad: 'x'.repeat(40_000),
      });
      res.write(text.slice(0, 10));
      setTimeout(() => res.end(text.slice(10)), 20);
    };
    const tokens = await client.refresh(env, 'rt-old');
    expect(tokens).toMatchObject({ accessToken: 'at-new', refreshToken: 'rt-new', expiresIn: 21600 });
    expect(seen).toEqual({
      method: 'POST',
      url: '/oauth/token',
      type: 'application/json',
      body: { grant_type: 'refresh_token', refresh_token: 'rt-old', client_id: 'client-1', client_secret: 'not-a-real-secret' },
    });
  });

  it('invalid_grant is told apart from a transient 503, whose Retry-After comes along', async () => {
    handler = (_req, _body, res) => json(res, 400, { error: 'invalid_grant' });
    const rejected = await failureOf(client.refresh(env, 'rt'));
    expect(rejected).toBeInstanceOf(TokenEndpointError);
    expect((rejected as TokenEndpointError).isInvalidGrant).toBe(true);

    handler = (_req, _body, res) => json(res, 503, { error: 'temporarily_unavailable' }, { 'retry-after': '7' });
    const busy = (await failureOf(client.refresh(env, 'rt'))) as TokenEndpointError;
    expect(busy).toBeInstanceOf(TokenEndpointError);
    expect([busy.status, busy.isTransient, busy.isInvalidGrant, busy.retryAfterSeconds]).toEqual([503, true, false, 7]);
  });

  it('an answer past 64 KiB is not kept: it fails as a malformed token response, the status still decides', async () => {
    const huge = JSON.stringify({ access_token: 'a'.repeat(100_000), refresh_token: 'r', expiresIn: 60 });
    handler = (_req, _body, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(huge);
    const e = (await failureOf(client.refresh(env, 'rt'))) as TokenEndpointError;
    expect([e.constructor, e.status, e.error]).toEqual([TokenEndpointError, 200, 'invalid_token_response']);

    handler = (_req, _body, res) => res.writeHead(502, { 'content-type': 'text/html' }).end(`<html>${'x'.repeat(100_000)}</html>`);
    const bad = (await failureOf(client.refresh(env, 'rt'))) as TokenEndpointError;
    expect([bad.status, bad.isTransient, bad.error]).toEqual([502, true, null]);
  });

  it("the scheduler's calls share as many sockets as its concurrency, and interactive calls never queue behind them", async () => {
    const sockets = new Set<unknown>();
    let inFlight = 0;
    let most = 0;
    let held: Array<() => void> = [];
    handler = (req, body, res) => {
      sockets.add(req.socket);
      most = Math.max(most, ++inFlight);
      const answer = () => {
        inFlight--;
        json(res, 200, { access_token: 'a', refresh_token: 'r', expiresIn: 60 });
      };
      if ((JSON.parse(body) as { refresh_token: string }).refresh_token === 'hold') held.push(answer);
      else setTimeout(answer, 20);
    };
    const background = await Promise.all(Array.from({ length: 10 }, () => client.refresh(env, 'rt', { background: true })));
    expect(background).toHaveLength(10);
    expect([sockets.size, most]).toEqual([2, 2]);

    // Both background sockets busy: a third background call waits, an interactive one goes out at once.
    held = [];
    const waiting = [0, 1, 2].map(() => client.refresh(env, 'hold', { background: true }));
    for (let i = 0; i < 100 && held.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    await expect(client.refresh(env, 'rt')).resolves.toMatchObject({ accessToken: 'a' });
    expect(held).toHaveLength(2);
    // Answering the held calls one by one lets the third go out on a freed socket.
    for (let answered = 0, i = 0; answered < 3 && i < 300; i++) {
      const answer = held.shift();
      if (answer) {
        answer();
        answered++;
      } else {
        await new Promise((r) => setTimeout(r, 10));
      }
    }
    await expect(Promise.all(waiting)).resolves.toHaveLength(3);
    expect(sockets.size).toBe(3);
  });

  it('no answer within the token timeout is an UpstreamTimeoutError; a socket cut mid-answer and a refused connection are UpstreamUnavailableError', async () => {
    handler = (_req, _body, res) => setTimeout(() => json(res, 200, {}), 1000);
    expect(await failureOf(client.refresh(env, 'rt'))).toBeInstanceOf(UpstreamTimeoutError);

    handler = (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"access_token":');
      setTimeout(() => res.socket?.destroy(), 10);
    };
    expect(await failureOf(client.refresh(env, 'rt'))).toBeInstanceOf(UpstreamUnavailableError);

    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const nowhere = { ...env, authUrl: `http://127.0.0.1:${port}` };
    expect(await failureOf(client.refresh(nowhere, 'rt'))).toBeInstanceOf(UpstreamUnavailableError);
  });
});
