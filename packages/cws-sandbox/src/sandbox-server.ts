import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CallRecorder, redactQuery } from './call-recorder.js';
import type {
  SandboxCallRecord,
  SandboxFault,
  SandboxListing,
  SandboxListingFailure,
  SandboxOptions,
  SandboxQuotas,
  SandboxRefreshCalls,
  SandboxStats,
  SandboxUserSeed,
} from './types.js';
import { handleControl } from './control-routes.js';
import { FaultController } from './fault-controller.js';
import { bodyFormatOf, hasBody, mediaTypeOf, SandboxHttpError, sendError, sendJson } from './http-io.js';
import { handleAuthorizeGet, handleAuthorizePost } from './oauth-authorize.js';
import { TokenEndpoint } from './oauth-token.js';
import { PendingAuthorizations } from './pending-authorizations.js';
import { QuotaMeter } from './quota-meter.js';
import { resolveSandboxConfig } from './sandbox-config.js';
import { SandboxControls } from './sandbox-controls.js';
import type { SandboxCall, SandboxRuntime } from './sandbox-runtime.js';
import { DEMO_WORKFLOWS, SANDBOX_COMPANY } from './seed.js';
import { TokenStore } from './token-store.js';
import { UserDirectory } from './user-directory.js';
import { handleUserinfo } from './userinfo.js';
import { WebhookDispatcher } from './webhook-dispatcher.js';
import type { SandboxDelivery } from './types.js';
import { handleCreateWebhook, handleListWebhooks } from './webhook-routes.js';
import { WebhookStore } from './webhook-store.js';
import { handleApprove, handleCreateWorkflow, handleGetWorkflow, handleListWorkflows, handleUploadSigned } from './workflow-routes.js';
import { WorkflowListing } from './workflow-listing.js';
import { WorkflowStore } from './workflow-store.js';

/** An emulator of the upstream Contract Workflow Service on plain node:http. See README.md beside this file. */
export class SandboxServer {
  readonly url: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly scopes: string[];

  private readonly controls: SandboxControls;
  private readonly tokenEndpoint: TokenEndpoint;
  private readonly slowTimers = new Set<NodeJS.Timeout>();

  private constructor(
    private readonly server: Server,
    private readonly rt: SandboxRuntime,
    url: string,
  ) {
    this.url = url;
    this.clientId = rt.config.clientId;
    this.clientSecret = rt.config.clientSecret;
    this.scopes = [...rt.config.scopes];
    this.controls = new SandboxControls(rt);
    this.tokenEndpoint = new TokenEndpoint(rt);
    rt.listing.baseUrl = url;
    server.on('request', (req: IncomingMessage, res: ServerResponse) => void this.onRequest(req, res));
  }

  static async start(options: SandboxOptions): Promise<SandboxServer> {
    const config = resolveSandboxConfig(options);
    const { clock } = config;
    const webhooks = new WebhookStore(clock);
    const recorder = new CallRecorder(config.recordLimit);
    const dispatcher = new WebhookDispatcher(webhooks, config.webhookDeliveryRetries, SANDBOX_COMPANY.id, clock, () => {
      recorder.stats.deliveriesDropped++;
    });
    const rt: SandboxRuntime = {
      config,
      users: new UserDirectory(config.users),
      tokens: new TokenStore(config.accessTokenTtlSeconds * 1000, config.codeTtlSeconds * 1000, config.scopeSet, clock),
      workflows: new WorkflowStore(clock, (event) => dispatcher.dispatch(event)),
      webhooks,
      dispatcher,
      recorder,
      faults: new FaultController(),
      authorizations: new PendingAuthorizations(clock),
      quotas: new QuotaMeter(config.quotas, clock),
      listing: new WorkflowListing(config.listing),
    };
    if (config.seedWorkflows) seedDemoWorkflows(rt);

    // requestTimeout 0: a large upload over a slow link must not be cut off by the server.
    const server = createServer({ requestTimeout: 0, keepAliveTimeout: 5000 });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const { port } = server.address() as AddressInfo;
    return new SandboxServer(server, rt, `http://${urlHost(config.host)}:${port}`);
  }

  records(): SandboxCallRecord[] {
    return this.rt.recorder.records();
  }

  clearRecords(): void {
    this.rt.recorder.clear();
  }

  stats(): SandboxStats {
    return this.rt.recorder.snapshot();
  }

  users(): SandboxUserSeed[] {
    return this.rt.users.seeds();
  }

  issueTokens(
    userId: string,
    scopes?: string[],
  ): { access_token: string; refresh_token: string; expiresIn: number; scope: string[]; family: string } {
    return this.controls.issueTokens(userId, scopes);
  }

  expireAccessTokens(filter?: { userId?: string; accessToken?: string }): number {
    return this.controls.expireAccessTokens(filter);
  }

  revokeUser(userId: string): number {
    return this.controls.revokeUser(userId);
  }

  setFault(fault: SandboxFault | null): void {
    this.controls.setFault(fault);
  }

  /** A company's rate limits (the sandbox's one company by default); null: back to the `quotas` option. */
  setQuotas(quotas: SandboxQuotas | null, companyId = SANDBOX_COMPANY.id): void {
    this.rt.quotas.set(companyId, quotas);
  }

  setWorkflowStep(workflowId: string, step: 'Create' | 'Review' | 'Sign' | 'Archive'): void {
    this.controls.setWorkflowStep(workflowId, step);
  }

  setWorkflowAttribute(workflowId: string, name: string, value: unknown): void {
    this.controls.setWorkflowAttribute(workflowId, name, value);
  }

  /** Paging of GET /workflows from now on (`{pageSize: null}`: not paged); answers the state as read back. */
  setListing(listing: SandboxListing): { pageSize: number | null; fail: SandboxListingFailure | null } {
    return this.controls.setListing(listing);
  }

  /** The user sees the workflow (true) or not (false) from now on, whatever the creator/approver/admin rule says. */
  setWorkflowVisibility(workflowId: string, userId: string, visible: boolean): void {
    this.controls.setWorkflowVisibility(workflowId, userId, visible);
  }

  /** That share (0..1) of the webhook deliveries from now on is dropped: never sent, state `dropped`, counted in stats. */
  setWebhookDropRate(rate: number): void {
    this.controls.setWebhookDropRate(rate);
  }

  /** `count` (1..200000) workflows created by the user at once; no event. */
  bulkCreateWorkflows(userId: string, count: number): { created: number; firstId: string; lastId: string; total: number } {
    return this.controls.bulkCreateWorkflows(userId, count);
  }

  refreshLog(): Array<{ at: number; family: string; userId: string; usedRefreshTokenHash: string }> {
    return this.rt.tokens.refreshLog();
  }

  /** The refresh_token grant calls that presented a refresh token of this family, granted and refused. */
  refreshCalls(family: string): SandboxRefreshCalls {
    return this.rt.tokens.refreshCallsOf(family);
  }

  /** Every token value issued so far, for tests that assert no token appears where it must not. In-process only. */
  issuedTokenValues(): string[] {
    return this.rt.tokens.issuedTokenValues();
  }

  /** Webhook deliveries and their state (last 1000), for tests that wait for a delivery. */
  deliveries(): SandboxDelivery[] {
    return this.rt.dispatcher.deliveries();
  }

  async close(): Promise<void> {
    for (const timer of this.slowTimers) clearTimeout(timer);
    this.slowTimers.clear();
    await this.rt.dispatcher.close();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const rawQuery = q < 0 ? '' : url.slice(q + 1);
    const mediaType = mediaTypeOf(req);
    const contentType = req.headers['content-type'] ?? null;
    const record: SandboxCallRecord = {
      at: this.rt.config.clock(),
      method: req.method ?? '',
      path,
      query: redactQuery(rawQuery),
      contentType,
      clientAuth: null,
      bodyFormat: bodyFormatOf(mediaType, hasBody(req)),
      headerNames: Object.keys(req.headers),
      status: 0,
    };
    const call: SandboxCall = { req, res, path, rawQuery, mediaType, record };
    const control = path.startsWith('/_sandbox/');
    if (!control) this.rt.recorder.add(record);
    try {
      if (control) {
        await handleControl(call, this.rt, this.controls);
      } else if (await this.applyFault(call)) {
        await this.route(call);
      }
    } catch (e) {
      this.fail(call, e);
    }
    // Every handler has answered (or dropped the connection) by the time it settles.
    if (res.headersSent) record.status = res.statusCode;
  }

  /** Returns false when the fault answered (or dropped) the request. */
  private async applyFault(call: SandboxCall): Promise<boolean> {
    const fault = this.rt.faults.take(call.path);
    if (!fault) return true;
    if (fault.mode === 'down') {
      call.record.outcome = 'fault_down';
      call.req.socket.destroy();
      return false;
    }
    if (fault.mode === 'status') {
      call.record.outcome = 'fault_status';
      const headers = fault.retryAfterSeconds === undefined ? undefined : { 'retry-after': String(fault.retryAfterSeconds) };
      sendJson(call.res, fault.status, { error: 'sandbox_fault', error_description: `Injected fault: status ${fault.status}` }, headers);
      return false;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.slowTimers.delete(timer);
        resolve();
      }, fault.delayMs);
      timer.unref();
      this.slowTimers.add(timer);
    });
    return !call.res.destroyed;
  }

  private async route(call: SandboxCall): Promise<void> {
    const { rt } = this;
    const method = call.req.method;
    switch (call.path) {
      case '/workflows':
        if (method === 'GET') return handleListWorkflows(call, rt);
        if (method === 'POST') return handleCreateWorkflow(call, rt, false);
        return methodNotAllowed('GET, POST');
      case '/workflows/async':
        if (method === 'POST') return handleCreateWorkflow(call, rt, true);
        return methodNotAllowed('POST');
      case '/oauth/token':
        if (method === 'POST') return this.tokenEndpoint.handle(call);
        return methodNotAllowed('POST');
      case '/oauth/authorize':
        if (method === 'GET') return handleAuthorizeGet(call, rt);
        if (method === 'POST') return handleAuthorizePost(call, rt);
        return methodNotAllowed('GET, POST');
      case '/userinfo':
        if (method === 'GET' || method === 'POST') return handleUserinfo(call, rt);
        return methodNotAllowed('GET, POST');
      case '/webhooks':
        if (method === 'GET') return handleListWebhooks(call, rt);
        if (method === 'POST') return handleCreateWebhook(call, rt);
        return methodNotAllowed('GET, POST');
    }
    if (call.path.startsWith('/workflows/')) {
      const [rawId, action, ...rest] = call.path.slice('/workflows/'.length).split('/');
      const id = decodeSegment(rawId);
      if (id && rest.length === 0) {
        if (action === undefined) {
          if (method === 'GET') return handleGetWorkflow(call, rt, id);
          return methodNotAllowed('GET');
        }
        if (action === 'approvals') {
          if (method === 'PATCH') return handleApprove(call, rt, id);
          return methodNotAllowed('PATCH');
        }
        if (action === 'upload-signed') {
          if (method === 'POST') return handleUploadSigned(call, rt, id);
          return methodNotAllowed('POST');
        }
      }
    }
    throw new SandboxHttpError(404, 'not_found', 'No such endpoint');
  }

  private fail(call: SandboxCall, error: unknown): void {
    const { res, record } = call;
    if (error instanceof SandboxHttpError) {
      record.outcome ??= error.code;
      if (!res.headersSent && !res.destroyed) sendError(res, error);
      return;
    }
    record.outcome ??= 'internal_error';
    if (!res.headersSent && !res.destroyed)
      sendJson(res, 500, { error: 'internal_error', error_description: 'The sandbox failed to answer' });
    else res.destroy();
  }
}

function methodNotAllowed(allow: string): never {
  throw new SandboxHttpError(405, 'method_not_allowed', `Allowed: ${allow}`, { allow });
}

function decodeSegment(segment: string): string | null {
  try {
    return segment ? decodeURIComponent(segment) : null;
  } catch {
    return null;
  }
}

function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === '') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

function seedDemoWorkflows(rt: SandboxRuntime): void {
  for (const demo of DEMO_WORKFLOWS) {
    const creator = rt.users.get(demo.creator);
    if (!creator || !demo.approvers.every((id) => rt.users.has(id))) continue;
    const workflow = rt.workflows.create({ name: demo.name, approvers: demo.approvers, documents: [], attributes: {} }, creator);
    rt.workflows.setStep(workflow.id, demo.step);
  }
}
