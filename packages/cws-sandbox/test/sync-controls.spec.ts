// The controls a workflow sync needs to meet every case: paging, visibility, content changes, lost webhooks, bulk.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SandboxServer } from '../src/sandbox-server.js';
import type { SandboxDelivery, SandboxStats } from '../src/types.js';
import { call, multipartBody, waitFor, type Answer } from './helpers.js';

interface Wf {
  id: string;
  name: string;
  step: string;
  versionNumber: number;
  lastModified: string;
  Author: { type: string };
}

/** GET /workflows, paged or not. */
interface Page {
  workflows: Wf[];
}

const REDIRECT = ['http://127.0.0.1:9/cb'];

/** The `rel="next"` target of a Link header (RFC 8288), or null. */
function nextLink(answer: Answer): string | null {
  const link = answer.headers.get('link');
  if (link === null) return null;
  const m = /^<([^>]+)>; rel="next"$/.exec(link);
  if (!m) throw new Error(`unexpected Link header ${link}`);
  return m[1];
}

/** Follows the Link headers from GET /workflows; returns the pages' ids. */
async function walk(sandbox: SandboxServer, token: string, first = '/workflows'): Promise<string[][]> {
  const pages: string[][] = [];
  let url: string | null = sandbox.url + first;
  while (url !== null) {
    const answer: Answer<Page> = await call<Page>(url, 'GET', '', { token });
    if (answer.status !== 200) throw new Error(`page ${pages.length + 1} answered ${answer.status}`);
    expect(Array.isArray(answer.body.workflows)).toBe(true);
    pages.push(answer.body.workflows.map((w) => w.id));
    url = nextLink(answer);
    if (url !== null) expect(url.startsWith(`${sandbox.url}/workflows?page=`)).toBe(true);
  }
  return pages;
}

describe('paged GET /workflows', () => {
  let sandbox: SandboxServer;
  let alice: string;
  let bob: string;
  let created: string[];
  const control = <T = unknown>(method: string, path: string, json?: unknown) =>
    call<T>(sandbox.url, method, `/_sandbox/${path}`, json === undefined ? {} : { json });
  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: REDIRECT, listing: { pageSize: 2 } });
    alice = sandbox.issueTokens('alice').access_token;
    bob = sandbox.issueTokens('bob').access_token;
    created = [];
    for (let i = 0; i < 5; i++) {
      const wf = await call<Wf>(sandbox.url, 'POST', '/workflows', { token: alice, json: { name: `W${i}` } });
      created.push(wf.body.id);
    }
    // Not visible to alice: the pages skip it without leaving a short page behind.
    await call(sandbox.url, 'POST', '/workflows', { token: bob, json: { name: 'Bob only' } });
  });
  afterAll(() => sandbox.close());

  it('answers arrays of at most pageSize in creation order, with a Link rel="next" while more remain (option listing)', async () => {
    expect(await walk(sandbox, alice)).toEqual([created.slice(0, 2), created.slice(2, 4), created.slice(4)]);
    expect((await control('GET', 'listing')).body).toEqual({ pageSize: 2, fail: null });
  });

  it('keeps the order stable when workflows are created during a walk: they come on a later page', async () => {
    const first = await call<Page>(sandbox.url, 'GET', '/workflows', { token: alice });
    const late = await call<Wf>(sandbox.url, 'POST', '/workflows', { token: alice, json: { name: 'Late' } });
    const rest = await walk(sandbox, alice, nextLink(first)!.slice(sandbox.url.length));
    expect([first.body.workflows.map((w) => w.id), ...rest].flat()).toEqual([...created, late.body.id]);
    created.push(late.body.id);
  });

  it('carries the step filter in the token; a step that contradicts it, or a bad token, is 400', async () => {
    sandbox.setWorkflowStep(created[1], 'Review');
    sandbox.setWorkflowStep(created[3], 'Review');
    sandbox.setWorkflowStep(created[4], 'Review');
    expect(await walk(sandbox, alice, '/workflows?step=Review')).toEqual([[created[1], created[3]], [created[4]]]);
    const first = await call<Page>(sandbox.url, 'GET', '/workflows?step=Review', { token: alice });
    const next = nextLink(first)!;
    expect((await call(next + '&step=Review', 'GET', '', { token: alice })).status).toBe(200);
    const token = new URL(next).searchParams.get('page')!;
    for (const bad of [
      `page=${token}&step=Sign`,
      `page=${token}&page=${token}`,
      'page=',
      'page=abc',
      `page=${token}=`,
      `page=${Buffer.from('1.0.').toString('base64url')}`,
      `page=${Buffer.from('2.99999.').toString('base64url')}`,
      `page=${Buffer.from('2.0.Done').toString('base64url')}`,
    ]) {
      const answer = await call<{ error: string }>(sandbox.url, 'GET', `/workflows?${bad}`, { token: alice });
      expect([bad, answer.status, answer.body.error]).toEqual([bad, 400, 'invalid_page']);
    }
    expect((await call(sandbox.url, 'GET', '/workflows?page=abc')).status).toBe(401);
  });

  it('fails the k-th page `times` times, then answers it normally', async () => {
    const set = await control('POST', 'listing', { pageSize: 3, fail: { page: 2, status: 503, times: 2 } });
    expect(set.body).toEqual({ pageSize: 3, fail: { page: 2, status: 503, times: 2 } });
    const first = await call<Page>(sandbox.url, 'GET', '/workflows', { token: alice });
    expect([first.status, first.body.workflows.length]).toEqual([200, 3]);
    const second = nextLink(first)!;
    const failed = await call<{ error: string }>(second, 'GET', '', { token: alice });
    expect([failed.status, failed.body.error]).toEqual([503, 'sandbox_fault']);
    expect((await control('GET', 'listing')).body).toEqual({ pageSize: 3, fail: { page: 2, status: 503, times: 1 } });
    expect((await call(second, 'GET', '', { token: alice })).status).toBe(503);
    const ok = await call<Page>(second, 'GET', '', { token: alice });
    expect([ok.status, ok.body.workflows.map((w) => w.id)]).toEqual([200, created.slice(3, 6)]);
    expect(nextLink(ok)).toBeNull();
    expect((await control('GET', 'listing')).body).toEqual({ pageSize: 3, fail: null });
    expect(sandbox.records().filter((r) => r.outcome === 'listing_fault')).toHaveLength(2);
  });

  it('validates the listing control strictly', async () => {
    for (const bad of [
      null,
      [],
      {},
      { pageSize: 0 },
      { pageSize: 1.5 },
      { pageSize: '2' },
      { pageSize: 10001 },
      { pageSize: 2, extra: 1 },
      { pageSize: null, fail: { page: 1, status: 500, times: 1 } },
      { pageSize: 2, fail: { page: 0, status: 500, times: 1 } },
      { pageSize: 2, fail: { page: 1, status: 200, times: 1 } },
      { pageSize: 2, fail: { page: 1, status: 500, times: 0 } },
      { pageSize: 2, fail: { page: 1, status: 500 } },
      { pageSize: 2, fail: { page: 1, status: 500, times: 1, delay: 1 } },
      { pageSize: 2, fail: 'yes' },
    ]) {
      const answer = await control<{ error: string }>('POST', 'listing', bad);
      expect([JSON.stringify(bad), answer.status]).toEqual([JSON.stringify(bad), 400]);
    }
    expect(() => sandbox.setListing({ pageSize: -1 })).toThrow();
    await expect(SandboxServer.start({ redirectUris: REDIRECT, listing: { pageSize: 0 } })).rejects.toThrow(/listing/);
  });

  it('without pageSize answers {"workflows": [...]} and ignores ?page= as before', async () => {
    expect((await control('POST', 'listing', { pageSize: null })).body).toEqual({ pageSize: null, fail: null });
    const all = await call<{ workflows: Wf[] }>(sandbox.url, 'GET', '/workflows?page=abc', { token: alice });
    expect(all.status).toBe(200);
    expect(all.headers.get('link')).toBeNull();
    expect(all.body.workflows.map((w) => w.id)).toEqual(created);
  });

  it('answers an empty list and no Link for a user who sees nothing', async () => {
    sandbox.setListing({ pageSize: 2 });
    const dave = sandbox.issueTokens('dave').access_token;
    const answer = await call<Page>(sandbox.url, 'GET', '/workflows', { token: dave });
    expect([answer.status, answer.body, answer.headers.get('link')]).toEqual([200, { workflows: [] }, null]);
  });
});

describe('POST /_sandbox/workflows/{id}/visibility', () => {
  let sandbox: SandboxServer;
  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: REDIRECT });
  });
  afterAll(() => sandbox.close());

  it('hides a workflow from one user (list and GET one answer as if it did not exist), then shows it again', async () => {
    const alice = sandbox.issueTokens('alice').access_token;
    const bob = sandbox.issueTokens('bob').access_token;
    const wf = await call<Wf>(sandbox.url, 'POST', '/workflows', { token: alice, json: { name: 'Shared', approvers: ['bob'] } });
    const other = await call<Wf>(sandbox.url, 'POST', '/workflows', { token: alice, json: { name: 'Other', approvers: ['bob'] } });
    const ids = async (token: string) =>
      (await call<{ workflows: Wf[] }>(sandbox.url, 'GET', '/workflows', { token })).body.workflows.map((w) => w.id);
    const hide = await call(sandbox.url, 'POST', `/_sandbox/workflows/${wf.body.id}/visibility`, {
      json: { userId: 'bob', visible: false },
    });
    expect([hide.status, hide.body]).toEqual([200, { workflowId: wf.body.id, userId: 'bob', visible: false }]);
    expect(await ids(bob)).toEqual([other.body.id]);
    expect(await ids(alice)).toEqual([wf.body.id, other.body.id]);
    const gone = await call<{ error: string }>(sandbox.url, 'GET', `/workflows/${wf.body.id}`, { token: bob });
    const missing = await call<{ error: string }>(sandbox.url, 'GET', '/workflows/wf_missing', { token: bob });
    expect([gone.status, gone.body]).toEqual([404, missing.body]);
    expect((await call(sandbox.url, 'PATCH', `/workflows/${wf.body.id}/approvals`, { token: bob })).status).toBe(404);
    // Not a change of the workflow.
    const seen = await call<Wf>(sandbox.url, 'GET', `/workflows/${wf.body.id}`, { token: alice });
    expect([seen.body.versionNumber, seen.body.lastModified]).toEqual([1, wf.body.lastModified]);

    sandbox.setWorkflowVisibility(wf.body.id, 'bob', true);
    expect(await ids(bob)).toEqual([wf.body.id, other.body.id]);
    expect((await call(sandbox.url, 'GET', `/workflows/${wf.body.id}`, { token: bob })).status).toBe(200);

    // visible: true also gives sight to a user the rule leaves out; the admin can lose sight too.
    const dave = sandbox.issueTokens('dave').access_token;
    sandbox.setWorkflowVisibility(other.body.id, 'dave', true);
    expect(await ids(dave)).toEqual([other.body.id]);
    sandbox.setWorkflowVisibility(other.body.id, 'admin', false);
    expect(await ids(sandbox.issueTokens('admin').access_token)).toEqual([wf.body.id]);
  });

  it('validates its body strictly', async () => {
    const alice = sandbox.issueTokens('alice').access_token;
    const wf = await call<Wf>(sandbox.url, 'POST', '/workflows', { token: alice, json: { name: 'V' } });
    const path = `/_sandbox/workflows/${wf.body.id}/visibility`;
    for (const bad of [
      {},
      { userId: 'bob' },
      { userId: 'bob', visible: 'no' },
      { userId: 'nobody', visible: false },
      { userId: 'bob', visible: true, x: 1 },
    ]) {
      expect([JSON.stringify(bad), (await call(sandbox.url, 'POST', path, { json: bad })).status]).toEqual([JSON.stringify(bad), 400]);
    }
    expect(
      (await call(sandbox.url, 'POST', '/_sandbox/workflows/wf_missing/visibility', { json: { userId: 'bob', visible: false } })).status,
    ).toBe(404);
    expect((await call(sandbox.url, 'GET', path)).status).toBe(404);
  });
});

describe('content changes', () => {
  it('an attribute change bumps versionNumber and lastModified; a step change only lastModified, even with a still clock', async () => {
    const at = Date.parse('2026-01-01T00:00:00.000Z');
    const sandbox = await SandboxServer.start({ redirectUris: REDIRECT, clock: () => at });
    try {
      const alice = sandbox.issueTokens('alice').access_token;
      const wf = await call<Wf>(sandbox.url, 'POST', '/workflows', { token: alice, json: { name: 'C' } });
      const read = async () => (await call<Wf>(sandbox.url, 'GET', `/workflows/${wf.body.id}`, { token: alice })).body;
      expect([wf.body.versionNumber, wf.body.lastModified]).toEqual([1, '2026-01-01T00:00:00.000Z']);
      sandbox.setWorkflowStep(wf.body.id, 'Review');
      expect(await read()).toMatchObject({ step: 'Review', versionNumber: 1, lastModified: '2026-01-01T00:00:00.001Z' });
      sandbox.setWorkflowAttribute(wf.body.id, 'value', 10);
      expect(await read()).toMatchObject({ versionNumber: 2, lastModified: '2026-01-01T00:00:00.002Z', Author: { type: 'system' } });
      sandbox.setWorkflowStep(wf.body.id, 'Review');
      expect(await read()).toMatchObject({ versionNumber: 2, lastModified: '2026-01-01T00:00:00.002Z' });
    } finally {
      await sandbox.close();
    }
  });
});

describe('POST /_sandbox/webhooks/drop', () => {
  let sandbox: SandboxServer;
  let receiver: Server;
  let received: string[];
  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: REDIRECT, webhookDeliveryRetries: 0 });
    received = [];
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string }).id);
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const admin = sandbox.issueTokens('admin').access_token;
    const targetURL = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const hook = await call(sandbox.url, 'POST', '/webhooks', {
      token: admin,
      json: { events: ['workflow_attribute_updated'], targetURL },
    });
    expect(hook.status).toBe(201);
  });
  afterAll(async () => {
    await sandbox.close();
    await new Promise<void>((resolve) => {
      receiver.close(() => resolve());
      receiver.closeAllConnections();
    });
  });

  it('drops that share of the deliveries, shown as dropped in the deliveries and counted in the stats', async () => {
    const alice = sandbox.issueTokens('alice').access_token;
    const wf = await call<Wf>(sandbox.url, 'POST', '/workflows', { token: alice, json: { name: 'Hooked' } });
    const set = await call(sandbox.url, 'POST', '/_sandbox/webhooks/drop', { json: { rate: 0.25 } });
    expect([set.status, set.body]).toEqual([200, { rate: 0.25 }]);
    expect((await call(sandbox.url, 'GET', '/_sandbox/webhooks/drop')).body).toEqual({ rate: 0.25 });
    for (let i = 0; i < 8; i++) sandbox.setWorkflowAttribute(wf.body.id, 'n', i);
    const deliveries = await waitFor(() => {
      const all = sandbox.deliveries();
      return all.length === 8 && all.every((d) => d.state !== 'pending') ? all : undefined;
    });
    const dropped = deliveries.filter((d: SandboxDelivery) => d.state === 'dropped');
    expect(deliveries.map((d) => d.state)).toEqual([
      'delivered',
      'delivered',
      'delivered',
      'dropped',
      'delivered',
      'delivered',
      'delivered',
      'dropped',
    ]);
    expect(dropped.every((d) => d.attempts === 0)).toBe(true);
    await waitFor(() => (received.length === 6 ? true : undefined));
    expect(new Set(received)).toEqual(new Set(deliveries.filter((d) => d.state === 'delivered').map((d) => d.id)));
    expect((await call<SandboxStats>(sandbox.url, 'GET', '/_sandbox/stats')).body.deliveriesDropped).toBe(2);

    sandbox.setWebhookDropRate(1);
    sandbox.setWorkflowAttribute(wf.body.id, 'n', 'all lost');
    expect(sandbox.deliveries().at(-1)?.state).toBe('dropped');
    sandbox.setWebhookDropRate(0);
    sandbox.setWorkflowAttribute(wf.body.id, 'n', 'kept');
    await waitFor(() => (received.length === 7 ? true : undefined));
    expect(sandbox.stats().deliveriesDropped).toBe(3);
  });

  it('validates its body strictly', async () => {
    for (const bad of [{}, { rate: -0.1 }, { rate: 1.5 }, { rate: '0.5' }, { rate: null }, { rate: 0.5, extra: 1 }, []]) {
      const answer = await call(sandbox.url, 'POST', '/_sandbox/webhooks/drop', { json: bad });
      expect([JSON.stringify(bad), answer.status]).toEqual([JSON.stringify(bad), 400]);
    }
    expect(() => sandbox.setWebhookDropRate(Number.NaN)).toThrow();
  });
});

describe('POST /_sandbox/workflows/bulk', () => {
  let sandbox: SandboxServer;
  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: REDIRECT, webhookDeliveryRetries: 0 });
  });
  afterAll(() => sandbox.close());

  it('creates the largest count visible to the user, without events; a paged walk sees each once', async () => {
    const admin = sandbox.issueTokens('admin').access_token;
    await call(sandbox.url, 'POST', '/webhooks', {
      token: admin,
      json: { events: ['workflow_step_updated', 'workflow_attribute_updated'], targetURL: 'http://127.0.0.1:9/hook' },
    });
    const answer = await call<{ created: number; firstId: string; lastId: string; total: number }>(
      sandbox.url,
      'POST',
      '/_sandbox/workflows/bulk',
      { json: { userId: 'carol', count: 200_000 } },
    );
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      created: 200_000,
      firstId: expect.stringMatching(/^wf_/),
      lastId: expect.stringMatching(/^wf_/),
      total: 200_000,
    });
    expect(sandbox.deliveries()).toEqual([]);

    const carol = sandbox.issueTokens('carol').access_token;
    sandbox.setListing({ pageSize: 10_000 });
    const pages = await walk(sandbox, carol);
    expect(pages).toHaveLength(20);
    const ids = pages.flat();
    expect([ids.length, new Set(ids).size, ids[0], ids.at(-1)]).toEqual([200_000, 200_000, answer.body.firstId, answer.body.lastId]);
    const one = await call<Wf & { creator: { id: string } }>(sandbox.url, 'GET', `/workflows/${answer.body.lastId}`, { token: carol });
    expect(one.body).toMatchObject({ name: 'Bulk workflow 200000', step: 'Create', versionNumber: 1, creator: { id: 'carol' } });
    expect((await call<Page>(sandbox.url, 'GET', '/workflows', { token: sandbox.issueTokens('bob').access_token })).body).toEqual({
      workflows: [],
    });

    // They share their empty parts: a change to one is its own.
    sandbox.setWorkflowAttribute(answer.body.lastId, 'region', 'EU');
    sandbox.setWorkflowStep(answer.body.lastId, 'Sign');
    const upload = multipartBody([{ name: 'file', fileName: 'signed.pdf', contentType: 'application/pdf', data: Buffer.from('%PDF') }]);
    const signed = await call<{ signedDocuments: Array<{ name: string }> }>(
      sandbox.url,
      'POST',
      `/workflows/${answer.body.lastId}/upload-signed`,
      {
        token: carol,
        body: upload.body,
        headers: { 'content-type': upload.contentType },
      },
    );
    expect([signed.status, signed.body.signedDocuments.map((d) => d.name)]).toEqual([200, ['signed.pdf']]);
    const changed = await call<{ attributes: unknown; signedDocuments: unknown[] }>(
      sandbox.url,
      'GET',
      `/workflows/${answer.body.lastId}`,
      {
        token: carol,
      },
    );
    const untouched = await call<{ attributes: unknown; signedDocuments: unknown[] }>(
      sandbox.url,
      'GET',
      `/workflows/${answer.body.firstId}`,
      {
        token: carol,
      },
    );
    expect([changed.body.attributes, changed.body.signedDocuments.length]).toEqual([{ region: 'EU' }, 1]);
    expect([untouched.body.attributes, untouched.body.signedDocuments]).toEqual([{}, []]);
  });

  it('validates its body strictly', async () => {
    for (const bad of [
      {},
      { userId: 'carol' },
      { userId: 'carol', count: 0 },
      { userId: 'carol', count: 200_001 },
      { userId: 'carol', count: 1.5 },
      { userId: 'nobody', count: 1 },
      { userId: 'carol', count: 1, name: 'x' },
    ]) {
      const answer = await call(sandbox.url, 'POST', '/_sandbox/workflows/bulk', { json: bad });
      expect([JSON.stringify(bad), answer.status]).toEqual([JSON.stringify(bad), 400]);
    }
  });
});
