import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SandboxServer } from '../src/sandbox-server.js';
import { call, multipartBody, waitFor } from './helpers.js';

interface WorkflowBody {
  id: string;
  name: string;
  step: string;
  creator: { id: string; email: string; name: string };
  approvers: Array<{ userId: string; status: string; approvedAt?: string; comment?: string }>;
  documents: Array<{ name: string; size: number | null; sha256: string | null; contentType: string | null; url?: string }>;
  signedDocuments: Array<{ name: string; size: number; sha256: string; contentType: string }>;
  attributes: Record<string, unknown>;
  versionNumber: number;
  lastModified: string;
  Author: { type: string; id?: string; name: string };
  createdAt: string;
  error?: string;
}

describe('workflows (spec 1 rule 4, 2.4, 3, 4.2)', () => {
  let sandbox: SandboxServer;
  const token: Record<string, string> = {};
  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:9/cb'] });
    for (const user of sandbox.users()) token[user.id] = sandbox.issueTokens(user.id).access_token;
  });
  afterAll(() => sandbox.close());

  const as = <T = WorkflowBody>(
    userId: string,
    method: string,
    path: string,
    init: { json?: unknown; body?: Buffer; headers?: Record<string, string> } = {},
  ) => call<T>(sandbox.url, method, path, { token: token[userId], ...init });
  const create = async (userId: string, json: unknown) => {
    const answer = await as(userId, 'POST', '/workflows', { json });
    expect(answer.status).toBe(201);
    return answer.body;
  };

  describe('POST /workflows', () => {
    it('launches with the token user as creator and the document properties', async () => {
      const wf = await create('alice', {
        name: 'NDA Globex',
        approvers: ['bob'],
        attributes: { value: 1200 },
        documents: [{ url: 'https://files.example/nda.pdf' }],
      });
      expect(wf).toMatchObject({
        name: 'NDA Globex',
        step: 'Create',
        creator: { id: 'alice', email: 'alice@acme.example', name: 'Alice Archer' },
        approvers: [{ userId: 'bob', status: 'pending' }],
        documents: [{ name: 'nda.pdf', url: 'https://files.example/nda.pdf', size: null, sha256: null, contentType: null }],
        signedDocuments: [],
        attributes: { value: 1200 },
        versionNumber: 1,
        Author: { type: 'user', id: 'alice', email: 'alice@acme.example', name: 'Alice Archer' },
      });
      expect(wf.id).toMatch(/^wf_/);
      expect(new Date(wf.lastModified).toISOString()).toBe(wf.lastModified);
      expect(wf.createdAt).toBe(wf.lastModified);
      expect(sandbox.records().at(-1)).toMatchObject({ tokenUserId: 'alice', bodyFormat: 'json', status: 201 });
    });

    it.each(['creator', 'creatorId', 'createdBy', 'owner', 'CreatorID', 'created_by'])(
      'refuses a creator-like field %s (no creator is supplied)',
      async (field) => {
        const answer = await as('alice', 'POST', '/workflows', { json: { name: 'x', [field]: 'bob' } });
        expect([answer.status, answer.body.error]).toEqual([400, 'creator_not_allowed']);
      },
    );

    it('validates the rest strictly', async () => {
      const cases: Array<[unknown, string]> = [
        [{ approvers: [] }, 'invalid_name'],
        [{ name: '' }, 'invalid_name'],
        [{ name: 'x', approvers: ['zed'] }, 'unknown_approver'],
        [{ name: 'x', approvers: ['bob', 'bob'] }, 'invalid_approvers'],
        [{ name: 'x', approvers: 'bob' }, 'invalid_approvers'],
        [{ name: 'x', documents: [{ url: 'ftp://x/y' }] }, 'invalid_documents'],
        [{ name: 'x', documents: [{ url: 'https://x/y', size: 3 }] }, 'invalid_documents'],
        [{ name: 'x', attributes: [1] }, 'invalid_attributes'],
        [{ name: 'x', templateId: 't' }, 'unknown_field'],
        [[], 'invalid_body'],
      ];
      for (const [json, error] of cases) {
        const answer = await as('alice', 'POST', '/workflows', { json });
        expect([answer.status, answer.body.error, JSON.stringify(json)]).toEqual([400, error, JSON.stringify(json)]);
      }
      const text = await as('alice', 'POST', '/workflows', { body: Buffer.from('name=x'), headers: { 'content-type': 'text/plain' } });
      expect(text.status).toBe(415);
    });

    it('accepts multipart with name, approvers fields and streamed file parts', async () => {
      const pdf = randomBytes(300_000);
      const { body, contentType } = multipartBody([
        { name: 'name', value: 'Lease' },
        { name: 'approvers', value: 'bob' },
        { name: 'approvers', value: 'carol' },
        { name: 'attributes', value: '{"region":"EU"}' },
        { name: 'file', fileName: 'lease.pdf', contentType: 'application/pdf', data: pdf },
        { name: 'file', fileName: 'annex.txt', contentType: 'text/plain', data: Buffer.from('annex') },
      ]);
      const answer = await as('alice', 'POST', '/workflows', { body, headers: { 'content-type': contentType } });
      expect(answer.status).toBe(201);
      expect(answer.body.approvers.map((a) => a.userId)).toEqual(['bob', 'carol']);
      expect(answer.body.attributes).toEqual({ region: 'EU' });
      expect(answer.body.documents).toEqual([
        { name: 'lease.pdf', size: pdf.length, sha256: createHash('sha256').update(pdf).digest('hex'), contentType: 'application/pdf' },
        { name: 'annex.txt', size: 5, sha256: createHash('sha256').update('annex').digest('hex'), contentType: 'text/plain' },
      ]);
      expect(sandbox.records().at(-1)?.bodyFormat).toBe('multipart');
    });

    it('refuses a creator field in a multipart body too', async () => {
      const { body, contentType } = multipartBody([
        { name: 'name', value: 'Lease' },
        { name: 'file', fileName: 'a.pdf', contentType: 'application/pdf', data: randomBytes(1000) },
        { name: 'createdBy', value: 'bob' },
      ]);
      const answer = await as('alice', 'POST', '/workflows', { body, headers: { 'content-type': contentType } });
      expect([answer.status, answer.body.error]).toEqual([400, 'creator_not_allowed']);
    });

    it('POST /workflows/async answers 202 {id, status} and the workflow appears shortly after', async () => {
      const answer = await as<{ id: string; status: string }>('bob', 'POST', '/workflows/async', { json: { name: 'Async one' } });
      expect(answer.status).toBe(202);
      expect(answer.body).toEqual({ id: expect.stringMatching(/^wf_/), status: 'accepted' });
      const wf = await waitFor(async () => {
        const got = await as('bob', 'GET', `/workflows/${answer.body.id}`);
        return got.status === 200 ? got.body : undefined;
      });
      expect(wf.creator.id).toBe('bob');
      const refused = await as('bob', 'POST', '/workflows/async', { json: { name: 'x', owner: 'alice' } });
      expect(refused.status).toBe(400);
    });
  });

  describe('visibility', () => {
    let mine: WorkflowBody;
    beforeAll(async () => {
      mine = await create('carol', { name: 'Carol private', approvers: ['dave'] });
    });
    const ids = async (userId: string, query = '') =>
      (await as<{ workflows: WorkflowBody[] }>(userId, 'GET', `/workflows${query}`)).body.workflows.map((w) => w.id);

    it('lists only what the user may see: creator, approver, or the company admin', async () => {
      expect(await ids('carol')).toContain(mine.id);
      expect(await ids('dave')).toContain(mine.id);
      expect(await ids('admin')).toContain(mine.id);
      expect(await ids('alice')).not.toContain(mine.id);
      expect(await ids('bob')).not.toContain(mine.id);
    });

    it('GET /workflows/{id} is 404 when it exists but is not visible, as when it does not exist', async () => {
      const hidden = await as('alice', 'GET', `/workflows/${mine.id}`);
      const missing = await as('alice', 'GET', '/workflows/wf_nope');
      expect([hidden.status, missing.status]).toEqual([404, 404]);
      expect(hidden.body).toEqual(missing.body);
      const seen = await as('dave', 'GET', `/workflows/${mine.id}`);
      expect(seen.status).toBe(200);
      expect(seen.body.versionNumber).toBe(1);
    });

    it('filters by ?step= and ignores unknown parameters', async () => {
      sandbox.setWorkflowStep(mine.id, 'Review');
      expect(await ids('carol', '?step=Review&foo=bar')).toEqual([mine.id]);
      expect(await ids('carol', '?step=Sign')).toEqual([]);
      expect(await ids('carol', '?page=2')).toContain(mine.id);
      expect((await as('carol', 'GET', '/workflows?step=review')).status).toBe(400);
    });
  });

  describe('PATCH /workflows/{id}/approvals', () => {
    let wf: WorkflowBody;
    beforeAll(async () => {
      wf = await create('alice', { name: 'To approve', approvers: ['bob', 'carol'] });
    });
    const approve = (userId: string, json?: unknown) =>
      as(userId, 'PATCH', `/workflows/${wf.id}/approvals`, json === undefined ? {} : { json });

    it('is refused to a user who cannot see the workflow (404) and to one without a pending approval (403)', async () => {
      expect((await approve('dave')).status).toBe(404);
      const creator = await approve('alice');
      expect([creator.status, creator.body.error]).toEqual([403, 'no_pending_approval']);
      const admin = await approve('admin');
      expect(admin.status).toBe(403);
      expect((await as('bob', 'PATCH', '/workflows/wf_missing/approvals')).status).toBe(404);
    });

    it('refuses a body that names an approver (no approver is supplied)', async () => {
      for (const field of ['approver', 'approverId', 'userId']) {
        const answer = await approve('bob', { [field]: 'carol' });
        expect([answer.status, answer.body.error]).toEqual([400, 'approver_not_allowed']);
      }
      expect((await approve('bob', { comment: 1 })).status).toBe(400);
      expect((await approve('bob', { note: 'x' })).status).toBe(400);
    });

    it('approves on behalf of the token user only, bumps the version, and does not move the step', async () => {
      const answer = await approve('bob', { comment: 'fine by me' });
      expect(answer.status).toBe(200);
      expect(answer.body.approvers).toEqual([
        { userId: 'bob', status: 'approved', approvedAt: expect.any(String), comment: 'fine by me' },
        { userId: 'carol', status: 'pending' },
      ]);
      expect(answer.body.versionNumber).toBe(2);
      expect(answer.body.Author).toMatchObject({ type: 'user', id: 'bob' });
      expect((await approve('bob')).status).toBe(403);
      const last = await approve('carol');
      expect(last.status).toBe(200);
      expect(last.body.approvers.every((a) => a.status === 'approved')).toBe(true);
      expect(last.body.step).toBe('Create');
      expect(last.body.versionNumber).toBe(3);
    });
  });

  describe('POST /workflows/{id}/upload-signed', () => {
    let wf: WorkflowBody;
    beforeAll(async () => {
      wf = await create('alice', { name: 'To sign', approvers: ['bob'] });
    });
    const signed = (data: Buffer) => multipartBody([{ name: 'file', fileName: 'signed.pdf', contentType: 'application/pdf', data }]);
    const upload = (userId: string, part = signed(Buffer.from('%PDF-signed'))) =>
      as(userId, 'POST', `/workflows/${wf.id}/upload-signed`, { body: part.body, headers: { 'content-type': part.contentType } });

    it('is refused unless the workflow is in the Sign step (409)', async () => {
      for (const step of ['Create', 'Review', 'Archive'] as const) {
        sandbox.setWorkflowStep(wf.id, step);
        const answer = await upload('alice');
        expect([answer.status, answer.body.error]).toEqual([409, 'workflow_not_in_sign_step']);
      }
    });

    it('takes multipart only (415), from users who can see the workflow (404)', async () => {
      sandbox.setWorkflowStep(wf.id, 'Sign');
      expect((await as('alice', 'POST', `/workflows/${wf.id}/upload-signed`, { json: { url: 'https://x/y.pdf' } })).status).toBe(415);
      expect((await upload('dave')).status).toBe(404);
      const withField = multipartBody([
        { name: 'note', value: 'x' },
        { name: 'file', fileName: 's.pdf', contentType: 'application/pdf', data: Buffer.from('x') },
      ]);
      expect((await upload('alice', withField)).status).toBe(400);
      expect((await upload('alice', multipartBody([]))).status).toBe(400);
      const broken = await as('alice', 'POST', `/workflows/${wf.id}/upload-signed`, {
        body: Buffer.from('x'),
        headers: { 'content-type': 'multipart/form-data' },
      });
      expect(broken.status).toBe(400);
    });

    it('stores name, size and sha256 of the streamed file and bumps the version', async () => {
      sandbox.setWorkflowStep(wf.id, 'Sign');
      const before = (await as('bob', 'GET', `/workflows/${wf.id}`)).body.versionNumber;
      const data = randomBytes(2 * 1024 * 1024 + 17);
      const answer = await upload('bob', signed(data));
      expect(answer.status).toBe(200);
      expect(answer.body.signedDocuments.at(-1)).toEqual({
        name: 'signed.pdf',
        size: data.length,
        sha256: createHash('sha256').update(data).digest('hex'),
        contentType: 'application/pdf',
      });
      expect(answer.body.versionNumber).toBe(before + 1);
      expect(answer.body.Author).toMatchObject({ type: 'user', id: 'bob' });
    });

    it('streams a 1 GiB upload without holding it in memory, and its sha256 is right', async () => {
      sandbox.setWorkflowStep(wf.id, 'Sign');
      const size = 1024 * 1024 * 1024;
      const upload = streamingUpload(size);
      const rssBefore = process.memoryUsage().rss;
      const res = await fetch(`${sandbox.url}/workflows/${wf.id}/upload-signed`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token.alice}`, 'content-type': upload.contentType },
        body: upload.body,
        duplex: 'half',
      });
      const body = (await res.json()) as WorkflowBody;
      expect(res.status).toBe(200);
      expect(body.signedDocuments.at(-1)).toEqual({
        name: 'big.bin',
        size,
        sha256: upload.sha256,
        contentType: 'application/octet-stream',
      });
      expect(process.memoryUsage().rss - rssBefore).toBeLessThan(256 * 1024 * 1024);
    }, 60_000);
  });
});

/** A multipart body of `size` bytes of file content, produced chunk by chunk (never whole in memory). */
export function streamingUpload(size: number): { body: ReadableStream<Uint8Array>; contentType: string; sha256: string } {
  const boundary = '----sandbox-stream-boundary-7d1f0c';
  const chunk = randomBytes(1024 * 1024);
  const hash = createHash('sha256');
  for (let sent = 0; sent < size; sent += chunk.length) hash.update(chunk.subarray(0, Math.min(chunk.length, size - sent)));
  let sent = 0;
  let stage: 'head' | 'data' | 'done' = 'head';
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (stage === 'head') {
        controller.enqueue(
          Buffer.from(
            `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
          ),
        );
        stage = 'data';
      } else if (stage === 'data' && sent < size) {
        const n = Math.min(chunk.length, size - sent);
        // The same bytes every time, so the one chunk can be enqueued again without a copy.
        controller.enqueue(n === chunk.length ? chunk : chunk.subarray(0, n));
        sent += n;
      } else if (stage === 'data') {
        controller.enqueue(Buffer.from(`\r\n--${boundary}--\r\n`));
        stage = 'done';
      } else {
        controller.close();
      }
    },
  });
  return { body, contentType: `multipart/form-data; boundary=${boundary}`, sha256: hash.digest('hex') };
}
