import type { AppConfig } from './config/app-config.js';
import { ConfigError } from './config/config-error.js';
import { isDatabaseUnavailable } from './common/database-outage.js';

type Errno = { code?: unknown; syscall?: unknown; path?: unknown; port?: unknown; address?: unknown };

const FILE_SYSCALLS = new Set(['mkdir', 'open', 'write', 'access', 'rename', 'unlink', 'chmod', 'copyfile', 'scandir', 'stat']);

/**
 * One line for a failure before the service could serve: the variable to look at and what to do, never a
 * stack or a secret (DATABASE_URL's password is not repeated). `config` is null when loading it failed.
 */
export function describeStartupFailure(e: unknown, config: Pick<AppConfig, 'dataDir' | 'databaseUrl' | 'port' | 'sandbox'> | null): string {
  if (e instanceof ConfigError) return e.message;
  const err = (typeof e === 'object' && e !== null ? e : {}) as Errno & { message?: unknown };
  const code = typeof err.code === 'string' ? err.code : '';
  const message = typeof err.message === 'string' ? firstLine(err.message) : String(e);

  if (code === 'EADDRINUSE' && config) {
    const port = typeof err.port === 'number' ? err.port : null;
    if (port !== null && config.sandbox.enabled && port === config.sandbox.port)
      return `SANDBOX_PORT: port ${port} is already in use; stop what holds it or set SANDBOX_PORT to a free port`;
    return `PORT: port ${port ?? config.port} is already in use; stop what holds it or set PORT to a free port`;
  }
  if (
    config &&
    typeof err.syscall === 'string' &&
    FILE_SYSCALLS.has(err.syscall) &&
    typeof err.path === 'string' &&
    err.path.startsWith(config.dataDir)
  ) {
    return `DATA_DIR: ${config.dataDir} cannot be used (${code || 'error'} on ${err.syscall} ${err.path}); set DATA_DIR to a directory this user can create and write`;
  }
  if (config?.databaseUrl) {
    const target = describeTarget(config.databaseUrl);
    if (code === '28P01' || code === '28000')
      return `DATABASE_URL: PostgreSQL at ${target.server} refused user "${target.user}" (${message}); correct the user or password in DATABASE_URL`;
    if (code === '3D000')
      return `DATABASE_URL: database "${target.database}" does not exist on ${target.server}; create it (createdb ${target.database}) or correct DATABASE_URL`;
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
      return `DATABASE_URL: host "${target.host}" cannot be resolved (${code}); correct the host in DATABASE_URL`;
    if (code === 'ECONNREFUSED')
      return `DATABASE_URL: nothing accepts connections at ${target.server} (ECONNREFUSED); start PostgreSQL there or correct DATABASE_URL`;
    if (isDatabaseUnavailable(e))
      return `DATABASE_URL: PostgreSQL at ${target.server} cannot be reached (${code || message}); check that it runs and that DATABASE_URL points at it`;
  }
  return message.replace(/postgres(ql)?:\/\/[^\s]*/g, '<url>');
}

function describeTarget(url: string): { server: string; host: string; user: string; database: string } {
  try {
    const u = new URL(url);
    const host = u.hostname || 'localhost';
    return {
      server: `${host}:${u.port || '5432'}`,
      host,
      user: decodeURIComponent(u.username) || 'postgres',
      database: decodeURIComponent(u.pathname.slice(1)) || 'postgres',
    };
  } catch {
    return {
      server: 'the configured server',
      host: 'the configured host',
      user: 'the configured user',
      database: 'the configured database',
    };
  }
}

function firstLine(s: string): string {
  return s.split('\n')[0].trim();
}
