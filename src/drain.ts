import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { AppConfig } from './config/app-config.js';
import { EventDeliveryService } from './events/event-delivery.service.js';
import { HealthService } from './ops/health.service.js';
import { RefreshScheduler } from './refresh/refresh-scheduler.service.js';

/** How often, once the listener is closed, connections that became idle are closed. */
const IDLE_SWEEP_MS = 100;

/**
 * The connections of the HTTP server, watched from its start: at a drain, the ones whose request is still
 * being answered are told `Connection: close`, and the idle ones are closed. One listener per connection,
 * nothing per request.
 */
export class ConnectionWatch {
  private readonly sockets = new Set<Socket>();

  constructor(private readonly server: Server) {
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  get open(): number {
    return this.sockets.size;
  }

  /** Connections with a request being answered (Node keeps the answer in progress on its socket). */
  get busy(): number {
    let n = 0;
    for (const socket of this.sockets) if (answerOf(socket)) n++;
    return n;
  }

  /** From now on every answer says `Connection: close`, so keep-alive clients reconnect (elsewhere, once the balancer knows). */
  closeAfterEachAnswer(): void {
    for (const socket of this.sockets) {
      const res = answerOf(socket);
      if (res && !res.headersSent) res.setHeader('connection', 'close');
    }
    this.server.prependListener('request', (_req, res) => res.setHeader('connection', 'close'));
  }
}

interface InProgress {
  headersSent: boolean;
  setHeader(name: string, value: string): unknown;
}

function answerOf(socket: Socket): InProgress | null {
  return (socket as Socket & { _httpMessage?: InProgress | null })._httpMessage ?? null;
}

/**
 * The drain on SIGTERM/SIGINT (docs/operations.md, "Stopping: the drain"): readiness 503 at once while requests are still
 * served for SHUTDOWN_DELAY_MS; then the listener closes, requests in flight finish (until SHUTDOWN_TIMEOUT_MS
 * after the delay, when the rest are cut), idle keep-alive connections are closed; the scheduler stops
 * claiming, lets its renewals commit and releases every lease this instance holds; event delivery finishes its
 * attempts in flight or fails them back to pg-boss's queue; then `close` (the app, the upstream client, the
 * database). One log line per step.
 */
export async function drain(
  app: NestExpressApplication,
  watch: ConnectionWatch,
  config: AppConfig,
  log: (msg: string) => void,
  close: () => Promise<void>,
): Promise<void> {
  const started = performance.now();
  const { delayMs, timeoutMs } = config.shutdown;
  const elapsed = () => Math.round(performance.now() - started);
  app.get(HealthService).beginShutdown();
  const scheduler = app.get(RefreshScheduler, { strict: false });
  // Due connections go to the other instances from now on; renewals on demand still serve requests.
  scheduler.stopClaiming();
  watch.closeAfterEachAnswer();
  log(`drain: /health/ready answers 503; serving requests for ${delayMs} ms (SHUTDOWN_DELAY_MS) while load balancers catch up`);
  await new Promise((r) => setTimeout(r, delayMs));

  const server = app.getHttpServer() as Server;
  const closed = new Promise<void>((r) => server.close(() => r()));
  server.closeIdleConnections();
  log(`drain: no longer accepting connections; ${watch.busy} requests in flight, ${watch.open} connections open`);
  const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
  let timer: NodeJS.Timeout | undefined;
  const timedOut = await Promise.race([
    closed.then(() => false),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(true), timeoutMs))),
  ]);
  clearInterval(sweep);
  clearTimeout(timer);
  if (timedOut) {
    log(`drain: SHUTDOWN_TIMEOUT_MS (${timeoutMs} ms) reached with ${watch.busy} requests in flight; closing their connections`);
    server.closeAllConnections();
  } else log(`drain: every request finished and every connection closed, ${elapsed()} ms after the signal`);

  // A step that fails (the database unreachable) is logged and the drain goes on: what it would have handed
  // back is recovered by the other instances anyway (leases lapse after REFRESH_LEASE_MS, jobs expire).
  try {
    log(`drain: renewals stopped; ${await scheduler.stop()} renewal leases released`);
  } catch (e) {
    log(`drain: renewals stopped; leases not released (${reason(e)}): they lapse after REFRESH_LEASE_MS`);
  }
  const budget = Math.max(1000, delayMs + timeoutMs - elapsed());
  try {
    const returned = await app.get(EventDeliveryService, { strict: false }).stop(budget);
    log(`drain: event delivery stopped; ${returned} deliveries in flight returned to the queue`);
  } catch (e) {
    log(`drain: event delivery stopped (${reason(e)}); jobs in flight are retried once they expire`);
  }
  await close();
  log(`drain: done in ${elapsed()} ms; exiting 0`);
}

function reason(e: unknown): string {
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' ? code : e instanceof Error ? e.name : 'unknown error';
}
