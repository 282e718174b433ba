import { PassThrough } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { pino, type DestinationStream } from 'pino';
import { loadConfig } from '../config/app-config.js';
import { accessLogOptions, logStream } from './logger.js';

const host = { uid: 1000, cwd: process.cwd(), systemStateDir: '/nonexistent', stdoutIsTty: false };
const configWith = (env: Record<string, string>) =>
  loadConfig(
    {
      VAULT_KEYS: `k1:${Buffer.alloc(32, 1).toString('base64')}`,
      OPERATOR_API_KEY: 'o'.repeat(40),
      SANDBOX: 'off',
      DATABASE_URL: 'postgres://x@127.0.0.1/db',
      ...env,
    },
    host,
  );

/** A pino logger built from the same options the app's pino-http gets, writing into an array. */
function capture(env: Record<string, string>) {
  const lines: string[] = [];
  const destination: DestinationStream = { write: (line: string) => void lines.push(line) };
  const [options] = accessLogOptions(configWith(env), destination);
  return {
    logger: pino(options, destination),
    lines: () => lines.map((l) => JSON.parse(l) as { level: number; msg: string; context?: string }),
  };
}

describe('logger', () => {
  it("moves Nest's module-init and route-mapping lines to debug, and leaves the service's own lines alone", () => {
    const info = capture({ LOG_LEVEL: 'info' });
    info.logger.info({ context: 'RouterExplorer' }, 'Mapped {/v1/tenants, POST} route');
    info.logger.info({ context: 'InstanceLoader' }, 'AppModule dependencies initialized');
    info.logger.info({ context: 'NestApplication' }, 'Nest application successfully started');
    info.logger.info({ context: 'ChangeFeed' }, 'listening for row changes again');
    info.logger.warn({ context: 'InstanceLoader' }, 'a warning stays a warning');
    expect(info.lines().map((l) => [l.level, l.msg])).toEqual([
      [30, 'listening for row changes again'],
      [40, 'a warning stays a warning'],
    ]);

    const debug = capture({ LOG_LEVEL: 'debug' });
    debug.logger.info({ context: 'RoutesResolver' }, 'TenantsController {/v1/tenants}');
    expect(debug.lines()).toEqual([
      expect.objectContaining({ level: 20, context: 'RoutesResolver', msg: 'TenantsController {/v1/tenants}' }),
    ]);
  });

  it('writes JSON unless LOG_FORMAT=pretty, and then one readable line per entry', async () => {
    expect(logStream(configWith({ LOG_FORMAT: 'json' }))).toBeUndefined();

    const out = new PassThrough();
    let text = '';
    out.on('data', (d: Buffer) => (text += d.toString()));
    const stream = logStream(configWith({ LOG_FORMAT: 'pretty' }), out);
    expect(stream).toBeDefined();
    const logger = pino({ level: 'info', base: { instance: 'i-1' } }, stream);
    logger.info({ context: 'ChangeFeed' }, 'listening for row changes again');
    logger.warn({ tenantId: 'acme' }, 'renewal failed');
    await new Promise((r) => setImmediate(r));
    const lines = text.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\] INFO: ChangeFeed: listening for row changes again$/);
    expect(lines[1]).toMatch(/^\[\d\d:\d\d:\d\d\] WARN: renewal failed \{"tenantId":"acme"\}$/);
    expect(text).not.toContain('i-1');
  });
});
