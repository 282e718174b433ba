import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';

/** One named key: its versions' key material (version n at index n - 1; null once trimmed) and its settings. */
interface EmulatedKey {
  type: 'aes256-gcm96' | 'aes128-gcm96';
  versions: Buffer[];
  created: number[];
  minDecryptionVersion: number;
  deletionAllowed: boolean;
}

export interface TransitEmulatorOptions {
  /** The only token accepted in X-Vault-Token. */
  token: string;
  /** The Transit mount (default `transit`). */
  mount?: string;
  /** When set, requests must carry it in X-Vault-Namespace (any other namespace has no such mount). */
  namespace?: string;
  /** Serves HTTPS with this key and certificate (PEM) instead of HTTP. */
  tls?: { key: string; cert: string };
}

const NONCE = 12;
const TAG = 16;

/**
 * An emulator of the HashiCorp Vault / OpenBao Transit secrets engine's HTTP API, for the documented calls the
 * transit key store and its operators make (api-docs/secret/transit): create, read, rotate, configure and delete
 * a key (`/v1/<mount>/keys/<name>[/rotate|/config]`), encrypt, decrypt and rewrap (`/v1/<mount>/{encrypt,decrypt,
 * rewrap}/<name>`). A real HTTP server; keys are AES-GCM with a fresh 96-bit nonce, ciphertexts
 * `vault:v<version>:base64(nonce | ciphertext | tag)`; `associated_data` is authenticated as Transit does (a decrypt
 * without the same associated data fails); a version below `min_decryption_version` is refused; encrypt creates a
 * missing key (Transit's upsert); rewrap decrypts without associated data, as Transit's does. Errors are Transit's:
 * `{"errors": [...]}`, 400 for a request Transit refuses, 403 for a wrong token, 404 for an unknown route or key.
 * `stop()` takes it down (connections refused), `stall()` accepts and never answers, `start()` brings it back on the
 * same port.
 */
export class TransitEmulator {
  readonly keys = new Map<string, EmulatedKey>();
  /** Every request's method and path (never a header). */
  readonly requests: Array<{ method: string; path: string }> = [];
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private stalled = false;
  private port = 0;

  private constructor(private readonly options: TransitEmulatorOptions) {}

  static async start(options: TransitEmulatorOptions): Promise<TransitEmulator> {
    const emulator = new TransitEmulator(options);
    await emulator.start();
    return emulator;
  }

  get url(): string {
    return `${this.options.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  get mount(): string {
    return this.options.mount ?? 'transit';
  }

  /** Listens (again, on the same port once it had one). */
  async start(): Promise<void> {
    this.stalled = false;
    const handler = (req: IncomingMessage, res: ServerResponse) => void this.handle(req, res);
    const server: Server = this.options.tls ? createTlsServer(this.options.tls, handler) : createServer(handler);
    server.on(this.options.tls ? 'secureConnection' : 'connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Takes the server down: every connection is cut, new ones are refused. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** From now on requests are read and never answered (a server that hangs), until stop() or start(). */
  stall(): void {
    this.stalled = true;
  }

  /** A key made directly (as an operator would with `vault write -f transit/keys/<name>`). */
  createKey(name: string, type: EmulatedKey['type'] = 'aes256-gcm96'): void {
    this.keys.set(name, {
      type,
      versions: [randomBytes(type === 'aes256-gcm96' ? 32 : 16)],
      created: [Date.now()],
      minDecryptionVersion: 1,
      deletionAllowed: false,
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const url = new URL(req.url ?? '/', 'http://emulator');
    this.requests.push({ method: req.method ?? '', path: url.pathname });
    if (this.stalled) return;
    const send = (status: number, payload?: unknown) => {
      res.writeHead(status, payload === undefined ? {} : { 'content-type': 'application/json' });
      res.end(payload === undefined ? undefined : JSON.stringify(payload));
    };
    const fail = (status: number, ...errors: string[]) => send(status, { errors });
    const prefix = `/v1/${this.mount}/`;
    const namespaceOk = (req.headers['x-vault-namespace'] ?? undefined) === this.options.namespace;
    if (!url.pathname.startsWith(prefix) || !namespaceOk)
      return fail(404, `no handler for route "${url.pathname}". route entry not found.`);
    if (req.headers['x-vault-token'] !== this.options.token) return fail(403, 'permission denied');
    let input: Record<string, unknown>;
    try {
      input = body.length ? (JSON.parse(body.toString('utf8')) as Record<string, unknown>) : {};
    } catch {
      return fail(400, 'failed to parse JSON input');
    }
    const [op, name, action, ...more] = url.pathname.slice(prefix.length).split('/');
    const method = req.method === 'PUT' ? 'POST' : req.method;
    if (!name || more.length > 0) return fail(404, `no handler for route "${url.pathname}". route entry not found.`);
    const key = this.keys.get(name);

    if (op === 'keys' && action === undefined) {
      if (method === 'GET') return key ? send(200, { data: this.info(name, key) }) : fail(404);
      if (method === 'POST') {
        if (!key) this.createKey(name, input.type === 'aes128-gcm96' ? 'aes128-gcm96' : 'aes256-gcm96');
        return send(204);
      }
      if (method === 'DELETE') {
        if (!key) return send(204);
        if (!key.deletionAllowed) return fail(400, 'deletion is not allowed for this key');
        this.keys.delete(name);
        return send(204);
      }
    }
    if (op === 'keys' && action === 'rotate' && method === 'POST') {
      if (!key) return fail(400, 'key not found');
      key.versions.push(randomBytes(key.type === 'aes256-gcm96' ? 32 : 16));
      key.created.push(Date.now());
      return send(200, { data: this.info(name, key) });
    }
    if (op === 'keys' && action === 'config' && method === 'POST') {
      if (!key) return fail(400, 'no existing key named ' + name + ' could be found');
      if (input.min_decryption_version !== undefined) {
        const v = Number(input.min_decryption_version);
        if (!Number.isInteger(v) || v < 0 || v > key.versions.length)
          return fail(400, 'cannot set min decryption version of 0 or higher than the latest version');
        key.minDecryptionVersion = Math.max(1, v);
      }
      if (input.deletion_allowed !== undefined) key.deletionAllowed = input.deletion_allowed === true;
      return send(200, { data: this.info(name, key) });
    }
    if (method !== 'POST' || action !== undefined) return fail(405, 'unsupported operation');

    if (op === 'encrypt') {
      if (typeof input.plaintext !== 'string') return fail(400, 'missing plaintext to encrypt');
      let k = key;
      if (!k) {
        // Transit's upsert: encrypt creates the key when the token may.
        this.createKey(name);
        k = this.keys.get(name) as EmulatedKey;
      }
      const version = typeof input.key_version === 'number' && input.key_version > 0 ? input.key_version : k.versions.length;
      if (version > k.versions.length) return fail(400, 'requested version for encryption is higher than the latest key version');
      const ciphertext = encrypt(k, version, Buffer.from(input.plaintext, 'base64'), aadOf(input));
      return send(200, { data: { ciphertext, key_version: version } });
    }
    if (op === 'decrypt' || op === 'rewrap') {
      if (typeof input.ciphertext !== 'string' || !input.ciphertext) return fail(400, 'missing ciphertext to decrypt');
      if (!key) return fail(400, 'encryption key not found');
      // Transit's rewrap takes no associated data: it decrypts with none.
      const opened = decrypt(key, input.ciphertext, op === 'decrypt' ? aadOf(input) : undefined);
      if ('error' in opened) return fail(400, opened.error);
      if (op === 'decrypt') return send(200, { data: { plaintext: opened.plaintext.toString('base64') } });
      const version = key.versions.length;
      return send(200, { data: { ciphertext: encrypt(key, version, opened.plaintext, undefined), key_version: version } });
    }
    return fail(404, `no handler for route "${url.pathname}". route entry not found.`);
  }

  /** GET keys/<name>'s `data`, as Transit answers it. */
  private info(name: string, key: EmulatedKey): Record<string, unknown> {
    const keys: Record<string, number> = {};
    key.created.forEach((at, i) => {
      if (i + 1 >= key.minDecryptionVersion) keys[String(i + 1)] = Math.floor(at / 1000);
    });
    return {
      name,
      type: key.type,
      derived: false,
      exportable: false,
      allow_plaintext_backup: false,
      deletion_allowed: key.deletionAllowed,
      keys,
      latest_version: key.versions.length,
      min_available_version: 0,
      min_decryption_version: key.minDecryptionVersion,
      min_encryption_version: 0,
      supports_encryption: true,
      supports_decryption: true,
      supports_derivation: true,
      supports_signing: false,
    };
  }
}

function aadOf(input: Record<string, unknown>): Buffer | undefined {
  return typeof input.associated_data === 'string' && input.associated_data ? Buffer.from(input.associated_data, 'base64') : undefined;
}

function cipherName(key: EmulatedKey): 'aes-256-gcm' | 'aes-128-gcm' {
  return key.type === 'aes256-gcm96' ? 'aes-256-gcm' : 'aes-128-gcm';
}

function encrypt(key: EmulatedKey, version: number, plaintext: Buffer, aad: Buffer | undefined): string {
  const nonce = randomBytes(NONCE);
  const cipher = createCipheriv(cipherName(key), key.versions[version - 1], nonce);
  if (aad) cipher.setAAD(aad);
  const out = Buffer.concat([nonce, cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  return `vault:v${version}:${out.toString('base64')}`;
}

function decrypt(key: EmulatedKey, ciphertext: string, aad: Buffer | undefined): { plaintext: Buffer } | { error: string } {
  const m = /^vault:v(\d+):(.+)$/.exec(ciphertext);
  if (!m) return { error: 'invalid ciphertext: no prefix' };
  const version = Number(m[1]);
  if (version < key.minDecryptionVersion) return { error: 'ciphertext or signature version is disallowed by policy (too old)' };
  if (version < 1 || version > key.versions.length) return { error: 'invalid key version' };
  const raw = Buffer.from(m[2], 'base64');
  if (raw.length < NONCE + TAG) return { error: 'invalid ciphertext length' };
  try {
    const decipher = createDecipheriv(cipherName(key), key.versions[version - 1], raw.subarray(0, NONCE));
    if (aad) decipher.setAAD(aad);
    decipher.setAuthTag(raw.subarray(raw.length - TAG));
    return { plaintext: Buffer.concat([decipher.update(raw.subarray(NONCE, raw.length - TAG)), decipher.final()]) };
  } catch {
    return { error: 'cipher: message authentication failed' };
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}
