import { createServer, type IncomingMessage, type Server } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { sha256 } from '../common/hash.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { bearerOf } from '../auth/api-keys.service.js';
import { MetricsService } from '../telemetry/metrics.service.js';

/**
 * Who may read /metrics (docs/security.md, "Metrics"), which shows the Node version and process figures.
 * METRICS_PORT: a server of its own on that port serves them (with METRICS_TOKEN when set too), and the
 * service's port does not. METRICS_TOKEN alone: the service's port serves them to that bearer only. Neither:
 * open outside production (local use as before), `404` in production.
 */
@Injectable()
export class MetricsAccess implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Metrics');
  private readonly tokenHash: Buffer | null;
  private server: Server | null = null;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly metrics: MetricsService,
  ) {
    const token = config.security.metricsToken;
    this.tokenHash = token === null ? null : sha256(token);
  }

  /** Throws the answer a request to the service's own /metrics gets when it may not read them. */
  checkMainPort(req: IncomingMessage): void {
    const { metricsPort } = this.config.security;
    if (metricsPort !== null || (this.tokenHash === null && this.config.production))
      throw new AppError('route_not_found', 'Cannot GET /metrics');
    this.checkToken(req);
  }

  async onApplicationBootstrap(): Promise<void> {
    const port = this.config.security.metricsPort;
    if (port === null) return;
    const server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if (req.method !== 'GET' || path !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
        return;
      }
      try {
        this.checkToken(req);
      } catch {
        res.writeHead(401, { 'content-type': 'text/plain; charset=utf-8', 'www-authenticate': 'Bearer' }).end('unauthorized\n');
        return;
      }
      this.metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': this.metrics.registry.contentType, 'cache-control': 'no-store' }).end(text),
        () => res.writeHead(500).end(),
      );
    });
    server.headersTimeout = 10_000;
    server.requestTimeout = 30_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, this.config.security.metricsHost, () => resolve());
    });
    this.server = server;
    const address = server.address();
    this.logger.log(`metrics on port ${typeof address === 'object' && address ? address.port : port}`);
  }

  /** The port the metrics server listens on (METRICS_PORT=0 picks one), or null. */
  port(): number | null {
    const address = this.server?.address();
    return typeof address === 'object' && address ? address.port : null;
  }

  async onModuleDestroy(): Promise<void> {
    const server = this.server;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private checkToken(req: IncomingMessage): void {
    if (this.tokenHash === null) return;
    const presented = bearerOf(req.headers.authorization);
    if (presented === null || !timingSafeEqual(sha256(presented), this.tokenHash))
      throw new AppError('unauthorized', 'The metrics need METRICS_TOKEN: Authorization: Bearer <token>.');
  }
}
