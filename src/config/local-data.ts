import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { sha256 } from '../common/hash.js';
import { ConfigError } from './config-error.js';
import { EMBEDDED_DATABASE } from './value-formats.js';

// Local data outside production: DATA_DIR, and the secrets generated once into $DATA_DIR/secrets.json so
// that a restart finds the same ones (the vault key, the operator key, the in-process sandbox's client secret).

/** What the default DATA_DIR depends on besides the environment. */
export interface Host {
  uid: number | undefined;
  cwd: string;
  /** Where local state goes when the working directory cannot hold it (see defaultDataDir). */
  systemStateDir: string;
  /** The default LOG_FORMAT: pretty for a person at a terminal, JSON for everything else. */
  stdoutIsTty: boolean;
}

export const PROCESS_HOST: Host = {
  uid: process.getuid?.(),
  cwd: process.cwd(),
  systemStateDir: '/var/lib/cws-connect',
  stdoutIsTty: process.stdout.isTTY === true,
};

/** DATA_DIR as the service resolves it: the variable, or the default below. Also read by the demo partner app. */
export function localDataDir(env: Record<string, string | undefined>, host: Host = PROCESS_HOST): string {
  const databaseUrl = env.DATABASE_URL?.trim();
  return resolveDataDir(env.DATA_DIR?.trim() || undefined, !databaseUrl || databaseUrl === EMBEDDED_DATABASE, host);
}

/** DATA_DIR given (relative to the working directory), or the default with or without an embedded database. */
export function resolveDataDir(dataDir: string | undefined, embeddedDatabase: boolean, host: Host): string {
  return dataDir ? resolve(host.cwd, dataDir) : defaultDataDir(host, embeddedDatabase);
}

/**
 * `.data` in the working directory, except as root with the embedded PostgreSQL when the working directory
 * lies under one that only root may enter (a clone in /root, or under any 0700 directory): PostgreSQL then
 * runs as the postgres user, which could reach neither the cluster nor the binaries npm installed there.
 * Local state then goes to <systemStateDir>/<directory name>-<hash of its path> (/var/lib/cws-connect/…):
 * the system's place for a service's state, reachable by that user, kept across reboots (unlike /tmp), one
 * per working directory. The start-up banner names the directory either way; deleting it starts afresh.
 */
export function defaultDataDir(host: Host, embeddedDatabase: boolean): string {
  if (host.uid !== 0 || !embeddedDatabase || othersMayEnter(host.cwd)) return resolve(host.cwd, '.data');
  const id = sha256(resolve(host.cwd)).toString('hex').slice(0, 8);
  return join(host.systemStateDir, `${basename(resolve(host.cwd))}-${id}`);
}

function othersMayEnter(dir: string): boolean {
  for (let d = resolve(dir); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return false;
    if (d === dirname(d)) return true;
  }
}

/** The secrets generated for local use, each made once and then read back from $DATA_DIR/secrets.json. */
export class LocalSecrets {
  private readonly file: string;
  private values: Record<string, string> | null = null;

  constructor(private readonly dataDir: string) {
    this.file = join(dataDir, 'secrets.json');
  }

  /** A VAULT_KEYS value of one key. */
  vaultKeys(): string {
    return this.get('vaultKey', () => `local-${randomBytes(4).toString('hex')}:${randomBytes(32).toString('base64')}`);
  }

  operatorApiKey(): string {
    return this.get('operatorApiKey', () => `cwsop_${randomBytes(32).toString('base64url')}`);
  }

  sandboxClientSecret(): string {
    return this.get('sandboxClientSecret', randomClientSecret);
  }

  private get(name: string, generate: () => string): string {
    if (!this.values) {
      try {
        this.values = existsSync(this.file) ? (JSON.parse(readFileSync(this.file, 'utf8')) as Record<string, string>) : {};
      } catch (e) {
        throw new ConfigError(
          'DATA_DIR',
          `${this.file} cannot be read (${describeFsError(e)}); fix or remove it, or set DATA_DIR to another directory`,
        );
      }
    }
    const existing = this.values[name];
    if (existing) return existing;
    const created = generate();
    this.values[name] = created;
    try {
      // 0o755: the embedded PostgreSQL runs as its own user and must traverse DATA_DIR; the secrets file itself is 0o600.
      mkdirSync(this.dataDir, { recursive: true, mode: 0o755 });
      writeFileSync(this.file, JSON.stringify(this.values, null, 2) + '\n', { mode: 0o600 });
    } catch (e) {
      throw new ConfigError(
        'DATA_DIR',
        `${this.dataDir} cannot be created or written (${describeFsError(e)}); set DATA_DIR to a directory this user can write`,
      );
    }
    return created;
  }
}

/** The in-process sandbox's client secret when nothing keeps it (production: a new one each start). */
export function randomClientSecret(): string {
  return randomBytes(24).toString('base64url');
}

function describeFsError(e: unknown): string {
  const { code, syscall } = (e ?? {}) as { code?: unknown; syscall?: unknown };
  if (typeof code === 'string') return typeof syscall === 'string' ? `${code} on ${syscall}` : code;
  return e instanceof SyntaxError ? 'not valid JSON' : 'unreadable';
}
