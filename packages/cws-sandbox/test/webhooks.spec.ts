import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { SandboxServer } from '../src/sandbox-server.js';
import { call, waitFor } from './helpers.js';

interface Received {
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** A webhook target that answers the statuses queued in `script` (then 200). */
class Receiver {
  readonly received: Received[] = [];
  script: number[] = [];
  private server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.received.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> });
        res.writeHead(this.script.shift() ?? 200).end();
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks/cws`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}

describe('webhooks (spec 1 rule 5, 2.3, 5.2, 6)', () => {
  let sandbox: SandboxServer;
  let receiver: Receiver;
  let admin: string;
  let alice: string;
  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:9/cb'], webhookDeliveryRetries: 2 });
    receiver = new Receiver();
    await receiver.start();
    admin = sandbox.issueTokens('admin').access_token;
    alice = sandbox.issueTokens('alice').access_token;
  });
  afterAll(async () => {
    await sandbox.close();
    await receiver.close();
  });
  beforeEach(() => {
    receiver.received.length = 0;
    receiver.script = [];
  });

  const createHook = (token: string, json: unknown) => call<Record<string, unknown>>(sandbox.url, 'POST', '/webhooks', { token, json });

  it('refuses tokens of non-admin users with 403 on POST and GET', async () => {
    const post = await createHook(alice, { events: ['workflow_step_updated'], targetURL: receiver.url });
    expect([post.status, post.body.error]).toEqual([403, 'admin_required']);
    const get = await call<Record<string, unknown>>(sandbox.url, 'GET', '/webhooks', { token: alice });
    expect([get.status, get.body.error]).toEqual([403, 'admin_required']);
    expect((await call(sandbox.url, 'GET', '/webhooks')).status).toBe(401);
  });

  it('validates the creation payload strictly', async () => {
    const bad: unknown[] = [
      {},
      { events: [], targetURL: receiver.url },
      { events: 'workflow_step_updated', targetURL: receiver.url },
      { events: [''], targetURL: receiver.url },
      { events: ['workflow_step_updated', 'workflow_step_updated'], targetURL: receiver.url },
      { events: ['workflow_step_updated'] },
      { events: ['workflow_step_updated'], targetURL: '/relative' },
      { events: ['workflow_step_updated'], targetURL: 'ftp://example.com/x' },
      { events: ['workflow_step_updated'], targetURL: receiver.url, headers: { Authorization: 42 } },
      { events: ['workflow_step_updated'], targetURL: receiver.url, headers: { 'X-Bad': 'a\r\nInjected: 1' } },
      { events: ['workflow_step_updated'], targetURL: receiver.url, headers: { 'Bad Name': 'x' } },
      { events: ['workflow_step_updated'], targetURL: receiver.url, headers: { Host: 'evil' } },
      { events: ['workflow_step_updated'], targetURL: receiver.url, headers: { authorization: 'a', Authorization: 'b' } },
      { events: ['workflow_step_updated'], targetURL: receiver.url, headers: ['x'] },
      { events: ['workflow_step_updated'], targetURL: receiver.url, secret: 'x' },
    ];
    for (const json of bad) {
      const answer = await createHook(admin, json);
      expect([JSON.stringify(json), answer.status]).toEqual([JSON.stringify(json), 400]);
    }
  });

  it('answers 201 and lists webhooks with every Authorization value redacted', async () => {
    const created = await createHook(admin, {
      events: ['workflow_step_updated'],
      targetURL: receiver.url,
      headers: { Authorization: 'Bearer hook-secret-1', 'X-Tenant': 't-1' },
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^wh_/),
      events: ['workflow_step_updated'],
      targetURL: receiver.url,
      headers: { Authorization: '[REDACTED]', 'X-Tenant': 't-1' },
      createdAt: expect.any(String),
    });
    await createHook(admin, { events: ['workflow_attribute_updated'], targetURL: receiver.url, headers: { authorization: 'api-key-2' } });
    const list = await call<{ webhooks: Array<{ headers: Record<string, string> }> }>(sandbox.url, 'GET', '/webhooks', { token: admin });
    expect(list.status).toBe(200);
    expect(list.body.webhooks.map((w) => w.headers)).toEqual([
      { Authorization: '[REDACTED]', 'X-Tenant': 't-1' },
      { authorization: '[REDACTED]' },
    ]);
    expect(list.text).not.toContain('hook-secret-1');
    expect(list.text).not.toContain('api-key-2');
  });

  it('delivers workflow_step_updated with the configured headers and the transition', async () => {
    const wf = sandbox.issueTokens('bob').access_token;
    const created = await call<{ id: string }>(sandbox.url, 'POST', '/workflows', { token: wf, json: { name: 'Hooked' } });
    sandbox.setWorkflowStep(created.body.id, 'Review');
    const got = await waitFor(() => (receiver.received.length ? receiver.received[0] : undefined));
    expect(got.headers.authorization).toBe('Bearer hook-secret-1');
    expect(got.headers['x-tenant']).toBe('t-1');
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.body).toEqual({
      id: expect.stringMatching(/^dlv_/),
      event: 'workflow_step_updated',
      occurredAt: expect.any(String),
      companyId: 'company-1',
      workflowId: created.body.id,
      transition: 'Review',
      // A step change is a new lastModified at the same version.
      workflow: expect.objectContaining({ id: created.body.id, name: 'Hooked', step: 'Review', versionNumber: 1 }),
    });
    // The attribute webhook is not subscribed to step changes.
    await new Promise((r) => setTimeout(r, 50));
    expect(receiver.received).toHaveLength(1);
  });

  it('delivers workflow_attribute_updated to its subscriber, the API key as the whole Authorization value', async () => {
    const created = await call<{ id: string }>(sandbox.url, 'POST', '/workflows', {
      token: sandbox.issueTokens('carol').access_token,
      json: { name: 'Attr' },
    });
    sandbox.setWorkflowAttribute(created.body.id, 'value', { amount: 10 });
    const got = await waitFor(() => receiver.received.find((r) => r.body.event === 'workflow_attribute_updated'));
    expect(got.headers.authorization).toBe('api-key-2');
    expect(got.body).toMatchObject({ workflowId: created.body.id, attribute: { name: 'value', value: { amount: 10 } } });
    expect(got.body.transition).toBeUndefined();
  });

  it('retries a failed delivery under the same delivery id', async () => {
    const created = await call<{ id: string }>(sandbox.url, 'POST', '/workflows', { token: admin, json: { name: 'Retry' } });
    receiver.script = [500, 503];
    sandbox.setWorkflowStep(created.body.id, 'Sign');
    await waitFor(() => (receiver.received.length >= 3 ? true : undefined));
    const ids = receiver.received.map((r) => r.body.id);
    expect(new Set(ids).size).toBe(1);
    const delivery = await waitFor(() => sandbox.deliveries().find((d) => d.id === ids[0] && d.state === 'delivered'));
    expect(delivery).toMatchObject({ attempts: 3, lastStatus: 200, event: 'workflow_step_updated' });
  });

  it('gives up after webhookDeliveryRetries retries', async () => {
    const created = await call<{ id: string }>(sandbox.url, 'POST', '/workflows', { token: admin, json: { name: 'Fails' } });
    receiver.script = [500, 500, 500, 500];
    sandbox.setWorkflowStep(created.body.id, 'Archive');
    const delivery = await waitFor(() => sandbox.deliveries().find((d) => d.workflowId === created.body.id && d.state === 'failed'));
    expect(delivery.attempts).toBe(3);
    expect(receiver.received).toHaveLength(3);
    expect(JSON.stringify(sandbox.deliveries())).not.toContain('hook-secret-1');
  });
});
