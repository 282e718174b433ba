import { randomBytes, randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { expect } from '@jest/globals';
import { TokenVault } from '../../src/vault/token-vault.service.js';
import { WebhookReceiversRepository } from '../../src/webhooks/webhook-receivers.repository.js';
import { receiverRef } from '../../src/webhooks/webhooks.service.js';
import type { HttpAnswer, TestApp } from '../support/test-app.js';

export interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}

/** A receiving end as provisioning leaves it (row and sealed secret), without the upstream round trip. */
export interface Receiver {
  path: string;
  authorization: string;
}

export async function newReceiver(t: TestApp, tenantId: string): Promise<Receiver> {
  const id = randomUUID();
  const authorization = `Bearer ${randomBytes(32).toString('base64url')}`;
  await t.app
    .get(WebhookReceiversRepository)
    .insert({ id, tenantId, authMethod: 'bearer', secretEnc: await t.app.get(TokenVault).seal(authorization, receiverRef(tenantId, id)) });
  return { path: `/inbound/${tenantId}/${id}`, authorization };
}

export async function deliver(
  t: TestApp,
  r: Receiver,
  body: string,
  headers: Record<string, string> = {},
): Promise<HttpAnswer<ErrorBody & { id: string }>> {
  return t.request('POST', r.path, {
    key: null,
    body,
    headers: { 'content-type': 'application/json', authorization: r.authorization, ...headers },
  });
}

/** The contract's error shape with this status and code, and the request id that the header carries. */
export function expectError(res: HttpAnswer<unknown>, status: number, code: string, label: string): void {
  const body = res.body as Partial<ErrorBody> | undefined;
  expect([label, res.status, body?.error?.code]).toEqual([label, status, code]);
  expect(typeof body?.error?.message).toBe('string');
  expect(body?.error?.requestId).toBe(res.headers.get('x-request-id'));
}

export async function count(t: TestApp, sql: string, params: unknown[] = []): Promise<number> {
  return (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM (${sql}) x`, params)).rows[0].n;
}

export async function newTenantKey(t: TestApp, tenantId: string): Promise<string> {
  const res = await t.request<{ key: string }>('POST', `/v1/tenants/${tenantId}/api-keys`, { body: {} });
  expect(res.status).toBe(201);
  return res.body.key;
}

/** `levels` nested arrays around a value. */
export function nestedArrays(levels: number, inner = '1'): string {
  return '['.repeat(levels) + inner + ']'.repeat(levels);
}

/** `levels` nested objects, each under the key "a". */
export function nestedObjects(levels: number, inner = '1'): string {
  return '{"a":'.repeat(levels) + inner + '}'.repeat(levels);
}

/** A socket to the app, with everything it received and a promise of its closing. */
export interface Conn {
  socket: Socket;
  received: () => string;
  closed: Promise<void>;
}

export function openSocket(t: TestApp): Promise<Conn> {
  const { hostname, port } = new URL(t.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => undefined);
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.once('connect', () => resolve({ socket, received: () => Buffer.concat(chunks).toString('latin1'), closed }));
    socket.once('error', reject);
  });
}
