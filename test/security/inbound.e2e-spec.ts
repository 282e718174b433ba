import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { AppError } from '../../src/common/app-error.js';
import { EventsRepository } from '../../src/events/events.repository.js';
import { InboundService } from '../../src/webhooks/inbound.service.js';
import { newTenant } from '../support/connect.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { count, deliver, expectError, nestedObjects, newReceiver, type ErrorBody, type Receiver } from './support.js';

/**
 * The inbound receiver under hostile deliveries: only `application/json` is taken, and a bad delivery
 * never fails the good ones committed in the same group (other tenants' included).
 */
describe('inbound deliveries: media type and failure isolation in the group commit', () => {
  let t: TestApp;
  let acme: Receiver;
  let beta: Receiver;

  beforeAll(async () => {
    t = await startTestApp();
    await newTenant(t, 'acme');
    await newTenant(t, 'beta');
    acme = await newReceiver(t, 'acme');
    beta = await newReceiver(t, 'beta');
  });
  afterAll(async () => {
    await t?.close();
  });

  const stored = (probe: string) => count(t, `SELECT 1 FROM events WHERE payload->>'probe' = $1`, [probe]);

  /** A delivery with exactly these headers (no content-type unless given). */
  async function raw(r: Receiver, body: string | Uint8Array, headers: Record<string, string>) {
    const res = await fetch(`${t.url}${r.path}`, { method: 'POST', headers: { authorization: r.authorization, ...headers }, body });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as unknown, text };
  }

  describe('only application/json is taken', () => {
    const refused: Array<{ label: string; contentType: string | null; body: (probe: string) => string }> = [
      { label: 'form-encoded', contentType: 'application/x-www-form-urlencoded', body: (p) => `event=workflow_step_updated&probe=${p}` },
      { label: 'form-encoded that looks like JSON', contentType: 'application/x-www-form-urlencoded', body: (p) => `{"probe":"${p}"}` },
      { label: 'text/plain holding JSON', contentType: 'text/plain', body: (p) => `{"probe":"${p}"}` },
      { label: 'text/json', contentType: 'text/json', body: (p) => `{"probe":"${p}"}` },
      { label: 'application/jsonx', contentType: 'application/jsonx', body: (p) => `{"probe":"${p}"}` },
      { label: 'application/json-seq', contentType: 'application/json-seq', body: (p) => `{"probe":"${p}"}` },
      { label: 'application/xml', contentType: 'application/xml', body: (p) => `<probe>${p}</probe>` },
      {
        label: 'multipart',
        contentType: 'multipart/form-data; boundary=b',
        body: (p) => `--b\r\ncontent-disposition: form-data; name="probe"\r\n\r\n${p}\r\n--b--\r\n`,
      },
      { label: 'octet-stream', contentType: 'application/octet-stream', body: (p) => `{"probe":"${p}"}` },
      { label: 'no content-type at all', contentType: null, body: (p) => `{"probe":"${p}"}` },
    ];

    it.each(refused.map((r) => [r.label, r] as const))('%s: 415 unsupported_media_type, nothing stored', async (_label, c) => {
      const probe = randomUUID();
      const body = c.contentType === null ? new TextEncoder().encode(c.body(probe)) : c.body(probe);
      const res = await raw(acme, body, c.contentType === null ? {} : { 'content-type': c.contentType });
      expect([c.label, res.status, (res.body as ErrorBody).error.code]).toEqual([c.label, 415, 'unsupported_media_type']);
      expect((res.body as ErrorBody).error.requestId).toBe(res.headers.get('x-request-id'));
      expect(await stored(probe)).toBe(0);
    });

    it('a wrong Authorization is still 401 whatever the media type (no oracle on receivers)', async () => {
      const res = await fetch(`${t.url}${acme.path}`, {
        method: 'POST',
        headers: { authorization: 'Bearer wrong', 'content-type': 'text/plain' },
        body: 'x',
      });
      expect(res.status).toBe(401);
    });

    it.each([['application/json'], ['application/json; charset=utf-8'], ['Application/JSON'], ['application/json;charset=UTF-8']])(
      '%s is taken',
      async (contentType) => {
        const probe = randomUUID();
        const res = await raw(acme, JSON.stringify({ event: 'workflow_step_updated', probe }), { 'content-type': contentType });
        expect(res.status).toBe(200);
        expect(await stored(probe)).toBe(1);
      },
    );
  });

  describe('served by the front door, with the JSON body rules of the service', () => {
    it('a gzip-compressed delivery is inflated and stored as sent; its text is the stored payload', async () => {
      const probe = randomUUID();
      const res = await raw(acme, gzipSync(`{"event": "workflow_step_updated", "probe": "${probe}", "big": 12345678901234567890}`), {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
      });
      expect(res.status).toBe(200);
      const row = await t.db.query<{ type: string; big: string }>(`SELECT type, payload->>'big' AS big FROM events WHERE id = $1`, [
        (res.body as { id: string }).id,
      ]);
      // The JSON text itself is stored: the number keeps its digits (a parse and re-encode would round it).
      expect(row.rows[0]).toEqual({ type: 'workflow_step_updated', big: '12345678901234567890' });
    });

    it.each([
      ['a charset other than UTF-8', { 'content-type': 'application/json; charset=latin1' }],
      ['an unknown content-encoding', { 'content-type': 'application/json', 'content-encoding': 'compress' }],
    ])('%s: 415 unsupported_media_type, nothing stored', async (_label, headers) => {
      const probe = randomUUID();
      const res = await raw(acme, `{"probe": "${probe}"}`, headers);
      expect([res.status, (res.body as ErrorBody).error.code]).toEqual([415, 'unsupported_media_type']);
      expect(await stored(probe)).toBe(0);
    });

    it('the path matches as before (any letter case of the literal, one trailing slash); other methods are 404', async () => {
      const probe = randomUUID();
      const upper = acme.path.replace('/inbound/', '/INBOUND/');
      for (const path of [upper, `${acme.path}/`]) {
        const res = await fetch(`${t.url}${path}`, {
          method: 'POST',
          headers: { authorization: acme.authorization, 'content-type': 'application/json' },
          body: `{"probe": "${probe}"}`,
        });
        expect([path, res.status]).toEqual([path, 200]);
      }
      expect(await stored(probe)).toBe(2);
      const get = await fetch(`${t.url}${acme.path}`, { headers: { authorization: acme.authorization } });
      const body = (await get.json()) as ErrorBody;
      expect([get.status, body.error.code, body.error.requestId]).toEqual([404, 'route_not_found', get.headers.get('x-request-id')]);
    });

    it("an empty body is 400 (not stored as {}); a caller's x-request-id is kept in the error", async () => {
      const res = await fetch(`${t.url}${acme.path}`, {
        method: 'POST',
        headers: { authorization: acme.authorization, 'content-type': 'application/json', 'x-request-id': 'probe-req-1' },
      });
      const body = (await res.json()) as ErrorBody;
      expect([res.status, body.error.code, body.error.requestId, res.headers.get('x-request-id')]).toEqual([
        400,
        'validation_failed',
        'probe-req-1',
        'probe-req-1',
      ]);
    });
  });

  describe('one bad member of a group', () => {
    it('over HTTP: the bad deliveries get 400, every good one of either tenant is stored once and acknowledged', async () => {
      const probe = randomUUID();
      const bad = ['"\\u0000"', '{"k\\u0000": 1}', '"\\ud800"', nestedObjects(3000)];
      const sends = Array.from({ length: 48 }, (_, i) => {
        const r = i % 2 === 0 ? acme : beta;
        const isBad = i % 12 === 5;
        const data = isBad ? bad[(i - 5) / 12] : JSON.stringify({ n: i });
        return deliver(t, r, `{"event": "workflow_step_updated", "probe": "${probe}", "n": ${i}, "data": ${data}}`).then((res) => ({
          i,
          isBad,
          res,
        }));
      });
      const answers = await Promise.all(sends);
      for (const { i, isBad, res } of answers) {
        if (isBad) expectError(res, 400, 'validation_failed', `delivery ${i}`);
        else expect([i, res.status, typeof res.body.id]).toEqual([i, 200, 'string']);
      }
      const rows = await t.db.query<{ id: string; n: string; tenant_id: string }>(
        `SELECT id, tenant_id, payload->>'n' AS n FROM events WHERE payload->>'probe' = $1`,
        [probe],
      );
      const good = answers.filter((a) => !a.isBad);
      expect(rows.rows.map((r) => Number(r.n)).sort((a, b) => a - b)).toEqual(good.map((a) => a.i));
      expect(new Set(rows.rows.map((r) => r.id))).toEqual(new Set(good.map((a) => a.res.body.id)));
      expect(new Set(rows.rows.map((r) => r.tenant_id))).toEqual(new Set(['acme', 'beta']));
    });

    it('in one group statement the database refuses (a payload only the database rejects): the group is split, the bad one fails alone with 400', async () => {
      const inbound = t.app.get(InboundService);
      const events = t.app.get(EventsRepository);
      // Warm the receivers' digests, so that every call below reaches the group commit in the same turn.
      expect((await deliver(t, acme, '{"warm": 1}')).status).toBe(200);
      expect((await deliver(t, beta, '{"warm": 1}')).status).toBe(200);

      const probe = randomUUID();
      const statements: Array<{ size: number; failed: boolean; probes: string[] }> = [];
      // Observes the statements (each still goes to the real database) to show the bad ones shared one.
      const spy = jest.spyOn(events, 'recordMany').mockImplementation(async function (this: EventsRepository, items) {
        const entry = { size: items.length, failed: false, probes: items.map((e) => String((e.payload as { kind?: string }).kind)) };
        statements.push(entry);
        try {
          return await EventsRepository.prototype.recordMany.call(events, items);
        } catch (e) {
          entry.failed = true;
          throw e;
        }
      });
      try {
        const accept = (r: Receiver, tenantId: string, payload: Record<string, unknown>) =>
          inbound.accept(tenantId, r.path.split('/').at(-1)!, r.authorization, {
            contentType: 'application/json',
            body: { probe, ...payload },
          });
        // The edge refuses these bytes; here they bypass it, as any value the database alone refuses would.
        const calls = [
          accept(acme, 'acme', { kind: 'first' }),
          ...Array.from({ length: 12 }, (_, i) => accept(beta, 'beta', { kind: 'good', n: i })),
          accept(acme, 'acme', { kind: 'nul', text: 'a\u0000b' }),
          ...Array.from({ length: 12 }, (_, i) => accept(beta, 'beta', { kind: 'good', n: 12 + i })),
          accept(acme, 'acme', { kind: 'surrogate', text: '\ud800' }),
          accept(acme, 'acme', { kind: 'good', n: 24 }),
        ];
        const outcomes = await Promise.allSettled(calls);
        const kinds = ['first', ...Array(12).fill('good'), 'nul', ...Array(12).fill('good'), 'surrogate', 'good'];
        outcomes.forEach((o, i) => {
          if (kinds[i] === 'nul' || kinds[i] === 'surrogate') {
            expect(o.status).toBe('rejected');
            const reason = (o as PromiseRejectedResult).reason as AppError;
            expect([kinds[i], reason instanceof AppError, reason.code, reason.status]).toEqual([kinds[i], true, 'validation_failed', 400]);
          } else expect([i, o.status]).toEqual([i, 'fulfilled']);
        });
        // The bad ones really shared a statement with good ones, and that statement failed.
        expect(statements.some((s) => s.failed && s.size > 2 && s.probes.includes('nul') && s.probes.includes('good'))).toBe(true);
        expect(
          statements
            .filter((s) => s.failed && s.size === 1)
            .map((s) => s.probes[0])
            .sort(),
        ).toEqual(['nul', 'surrogate']);
        expect(await stored(probe)).toBe(26);
        expect(await count(t, `SELECT 1 FROM events WHERE payload->>'probe' = $1 AND tenant_id = 'beta'`, [probe])).toBe(24);
      } finally {
        spy.mockRestore();
      }
    });

    it('a delivery for a tenant deleted meanwhile is 401 and fails nobody else', async () => {
      await newTenant(t, 'doomed');
      const doomed = await newReceiver(t, 'doomed');
      expect((await deliver(t, doomed, '{"warm": 1}')).status).toBe(200);
      expect((await t.request('DELETE', '/v1/tenants/doomed')).status).toBe(204);
      const probe = randomUUID();
      const answers = await Promise.all([
        ...Array.from({ length: 6 }, () => deliver(t, beta, `{"probe": "${probe}"}`)),
        deliver(t, doomed, `{"probe": "${probe}"}`),
        ...Array.from({ length: 6 }, () => deliver(t, acme, `{"probe": "${probe}"}`)),
      ]);
      expect(answers.map((a) => a.status)).toEqual([...Array(6).fill(200), 401, ...Array(6).fill(200)]);
      expect(await stored(probe)).toBe(12);
    });
  });
});
