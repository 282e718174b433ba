import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import type { TransitConfig } from '../config/keys-config.js';
import { ConfigError } from '../config/config-error.js';
import {
  bindingAad,
  type KeyBinding,
  type KeyStore,
  type KeyStoreDescription,
  KeyStoreUnavailable,
  keyRowId,
  type WrappedKey,
} from './key-store.js';
import { KEY_STORE_TIMEOUT_MS } from './tenant-keys.service.js';
import { VaultError } from './token-vault.service.js';

/** Transit key types that take associated data (the wrapped key's binding). */
const AEAD_TYPES = new Set(['aes256-gcm96', 'aes128-gcm96', 'chacha20-poly1305']);
const CIPHERTEXT = /^vault:v(\d+):/;

/** What one call answered: its HTTP status and its JSON body (`{data}` or `{errors}`). */
interface Answer {
  status: number;
  data: Record<string, unknown>;
  errors: string[];
}

/** GET /v1/<mount>/keys/<name>: the fields this store reads. */
interface KeyInfo {
  type: string;
  latestVersion: number;
  derived: boolean;
}

/**
 * KEY_STORE=transit: the KEK is a key of a HashiCorp Vault / OpenBao Transit secrets engine (TRANSIT_KEY_NAME under
 * TRANSIT_MOUNT), and never leaves it. A data key is wrapped by `POST /v1/<mount>/encrypt/<name>` with the tenant and
 * version as `associated_data`, and stored as Transit's own ciphertext (`vault:v<version>:...`); the KEK id names the
 * key and its version (`transit:<name>:v<version>`), so rotating the key in Transit and running `keys rotate-kek`
 * moves every data key to the newest version. Transit's rewrap endpoint takes no associated data, so a rewrap is a
 * decrypt then an encrypt. Each call is cut after KEY_STORE_TIMEOUT_MS; a server that does not answer, answers 5xx,
 * or refuses the token is the store being unreachable (503 key_store_unavailable for uncached tenants); a ciphertext
 * Transit refuses (another binding, damaged, a version below the key's min_decryption_version, a deleted key) is the
 * value's problem. TRANSIT_TOKEN goes in the X-Vault-Token header only: never in a log line or an error.
 */
export class TransitKeyStore implements KeyStore {
  readonly kind = 'transit' as const;
  /** The newest version of TRANSIT_KEY_NAME as last seen (open, health, every wrap). */
  private latest: number;
  /** Keys found to exist (GET keys/<name>): encrypt would create a missing key, so nothing is wrapped under one unseen. */
  private readonly known = new Set<string>();

  private constructor(
    private readonly settings: TransitConfig,
    private readonly agent: Agent,
    main: KeyInfo,
  ) {
    this.latest = main.latestVersion;
    this.known.add(settings.keyName);
  }

  /** Finds the KEK: an unreachable server, a refused token or a missing key stops the start with one line naming it. */
  static async open(settings: TransitConfig): Promise<KeyStore> {
    let ca: string | undefined;
    if (settings.caFile) {
      try {
        ca = readFileSync(settings.caFile, 'utf8');
      } catch (e) {
        throw new ConfigError('TRANSIT_CA_FILE', `could not be read (${codeOf(e)}): expected a PEM file at ${settings.caFile}`);
      }
    }
    const agent = new Agent({
      connect: { ca, timeout: KEY_STORE_TIMEOUT_MS },
      headersTimeout: KEY_STORE_TIMEOUT_MS,
      bodyTimeout: KEY_STORE_TIMEOUT_MS,
    });
    const where = `${settings.addr}/v1/${settings.mount}/keys/${settings.keyName}`;
    let answer: Answer;
    try {
      answer = await send(settings, agent, 'GET', `keys/${settings.keyName}`);
    } catch (e) {
      await agent.close();
      throw new ConfigError('TRANSIT_ADDR', `no Vault / OpenBao server answered at ${settings.addr} (${describe(e)})`);
    }
    const problem = keyProblem(answer, settings.keyName);
    if (problem) {
      await agent.close();
      if (answer.status === 403)
        throw new ConfigError(
          'TRANSIT_TOKEN',
          `was refused by ${settings.addr} (403 ${answer.errors.join('; ') || 'permission denied'}): expected a token allowed to read ${where}`,
        );
      if (answer.status === 404) throw new ConfigError('TRANSIT_KEY_NAME', `expected a Transit key at ${where}, found none (404)`);
      throw new ConfigError('TRANSIT_KEY_NAME', `${where}: ${problem}`);
    }
    return new TransitKeyStore(settings, agent, keyInfo(answer));
  }

  async wrap(dataKey: Buffer, binding: KeyBinding, kek?: string): Promise<WrappedKey> {
    const name = kek ?? this.settings.keyName;
    if (!this.known.has(name)) await this.ownKek(name);
    const answer = await this.call('POST', `encrypt/${name}`, {
      plaintext: dataKey.toString('base64'),
      associated_data: bindingAad(binding).toString('base64'),
    });
    if (answer.status !== 200) throw unreachable(`encrypt with "${name}"`, answer);
    const ciphertext = answer.data.ciphertext;
    const version = typeof ciphertext === 'string' ? CIPHERTEXT.exec(ciphertext)?.[1] : undefined;
    if (typeof ciphertext !== 'string' || version === undefined)
      throw new KeyStoreUnavailable(`Transit's encrypt with "${name}" answered no ciphertext`);
    if (name === this.settings.keyName) this.latest = Math.max(this.latest, Number(version));
    return { wrapped: ciphertext, kekId: kekId(name, Number(version)) };
  }

  async unwrap(wrapped: WrappedKey, binding: KeyBinding): Promise<Buffer> {
    const name = /^transit:(.+):v\d+$/.exec(wrapped.kekId)?.[1];
    if (name === undefined || !CIPHERTEXT.test(wrapped.wrapped)) {
      throw new VaultError(
        `the data key ${keyRowId(binding)} is not wrapped by Transit (it names ${wrapped.kekId})`,
        'tenant_keys',
        'wrapped_key',
      );
    }
    const answer = await this.call('POST', `decrypt/${name}`, {
      ciphertext: wrapped.wrapped,
      associated_data: bindingAad(binding).toString('base64'),
    });
    if (answer.status === 400) {
      throw new VaultError(
        `the data key ${keyRowId(binding)} does not unwrap with Transit key "${name}" (${answer.errors.join('; ').slice(0, 160)}): damaged, moved from another tenant, or its key version retired`,
        'tenant_keys',
        'wrapped_key',
      );
    }
    if (answer.status !== 200) throw unreachable(`decrypt with "${name}"`, answer);
    const plaintext = answer.data.plaintext;
    const key = Buffer.from(typeof plaintext === 'string' ? plaintext : '', 'base64');
    if (key.length !== 32) {
      key.fill(0);
      throw new VaultError(`the data key ${keyRowId(binding)} is malformed`, 'tenant_keys', 'wrapped_key');
    }
    return key;
  }

  /** A tenant's own KEK: another key of the same mount, of an AEAD type, found before anything is wrapped under it. */
  async ownKek(kek: string): Promise<string> {
    const answer = await this.call('GET', `keys/${kek}`);
    const problem = keyProblem(answer, kek);
    if (answer.status === 404) throw new Error(`there is no Transit key "${kek}" under ${this.settings.mount}: create it first`);
    if (answer.status === 403 || answer.status >= 500) throw unreachable(`reading key "${kek}"`, answer);
    if (problem) throw new Error(`the Transit key "${kek}" cannot wrap data keys: ${problem}`);
    this.known.add(kek);
    const { latestVersion } = keyInfo(answer);
    if (kek === this.settings.keyName) this.latest = latestVersion;
    return kekId(kek, latestVersion);
  }

  describe(): KeyStoreDescription {
    return { store: 'transit', kekId: kekId(this.settings.keyName, this.latest) };
  }

  /** Reads the key (its newest version comes with it): answers when the server does and the token is still good. */
  async health(): Promise<'available' | 'unavailable'> {
    try {
      const answer = await this.call('GET', `keys/${this.settings.keyName}`);
      if (answer.status !== 200) return 'unavailable';
      this.latest = keyInfo(answer).latestVersion;
      return 'available';
    } catch {
      return 'unavailable';
    }
  }

  /** One request; a server that cannot be reached or does not answer in time is a KeyStoreUnavailable. */
  private async call(method: 'GET' | 'POST', path: string, body?: Record<string, string>): Promise<Answer> {
    try {
      return await send(this.settings, this.agent, method, path, body);
    } catch (e) {
      throw new KeyStoreUnavailable(`Transit at ${this.settings.addr} did not answer (${describe(e)})`);
    }
  }
}

async function send(
  settings: TransitConfig,
  agent: Agent,
  method: 'GET' | 'POST',
  path: string,
  body?: Record<string, string>,
): Promise<Answer> {
  const headers: Record<string, string> = { 'x-vault-token': settings.token, accept: 'application/json' };
  if (settings.namespace) headers['x-vault-namespace'] = settings.namespace;
  if (body) headers['content-type'] = 'application/json';
  const res = await request(`${settings.addr}/v1/${settings.mount}/${path}`, {
    method,
    headers,
    body: body ? JSON.stringify(body) : undefined,
    dispatcher: agent,
    signal: AbortSignal.timeout(KEY_STORE_TIMEOUT_MS),
  });
  const text = await res.body.text();
  let json: { data?: unknown; errors?: unknown } = {};
  try {
    json = text ? (JSON.parse(text) as typeof json) : {};
  } catch {
    /* not JSON: a proxy's page; the status says enough */
  }
  const data = typeof json.data === 'object' && json.data !== null ? (json.data as Record<string, unknown>) : {};
  const errors = Array.isArray(json.errors) ? json.errors.filter((x): x is string => typeof x === 'string') : [];
  return { status: res.statusCode, data, errors };
}

/** Why the answer to GET keys/<name> is not a key this store can wrap with, or null. */
function keyProblem(answer: Answer, name: string): string | null {
  if (answer.status !== 200) return `answered ${answer.status} ${answer.errors.join('; ')}`.trim();
  const info = keyInfo(answer);
  if (!AEAD_TYPES.has(info.type)) return `expected a key of type aes256-gcm96 (any AEAD type), found "${name}" of type "${info.type}"`;
  if (info.derived) return `expected a key without derivation, found "${name}" derived (it would need a context)`;
  if (!(info.latestVersion >= 1)) return `expected a key with a version, found "${name}" without latest_version`;
  return null;
}

function keyInfo(answer: Answer): KeyInfo {
  const d = answer.data;
  return {
    type: typeof d.type === 'string' ? d.type : 'unknown',
    latestVersion: typeof d.latest_version === 'number' ? d.latest_version : 0,
    derived: d.derived === true,
  };
}

function kekId(name: string, version: number): string {
  return `transit:${name}:v${version}`;
}

/** A status that is not the value's problem: the store cannot serve (a refused token, a sealed or failing server). */
function unreachable(what: string, answer: Answer): KeyStoreUnavailable {
  return new KeyStoreUnavailable(`Transit refused ${what}: ${answer.status} ${answer.errors.join('; ').slice(0, 160)}`.trim());
}

function codeOf(e: unknown): string {
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' ? code : 'error';
}

/** An error's code or first line, never a header (the token). */
function describe(e: unknown): string {
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  return e instanceof Error ? `${e.name}: ${e.message.split('\n')[0].slice(0, 120)}` : 'unknown error';
}
