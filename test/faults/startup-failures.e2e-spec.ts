import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { freePort } from '../../src/common/free-port.js';
import { startOwnPostgres, type OwnPostgres } from './own-postgres.js';
import { oneLineNaming, runUntilExit } from './run-until-exit.js';

/**
 * Every start-up failure is one line that names the variable and says what to do, with exit code 1 and no
 * stack: production without DATABASE_URL, an unusable DATA_DIR, and a DATABASE_URL that refuses, does not resolve, rejects the password or
 * names a missing database (against the test's own PostgreSQL, which asks for a password).
 */
describe('start-up failures', () => {
  let own: OwnPostgres;
  const base = {
    NODE_ENV: 'production',
    VAULT_KEYS: `k1:${randomBytes(32).toString('base64')}`,
    OPERATOR_API_KEY: `cwsop_test_${randomBytes(24).toString('base64url')}`,
  };

  beforeAll(async () => {
    own = await startOwnPostgres();
  }, 120_000);

  afterAll(async () => {
    await own?.destroy();
  });

  const cases: Array<{ name: string; variable: string; env: () => Promise<Record<string, string>>; mentions: string }> = [
    {
      // Three instances behind a balancer must not quietly hold three databases: production names its choice.
      name: 'production without DATABASE_URL (no embedded database unless named)',
      variable: 'DATABASE_URL',
      env: async () => ({ ...base }),
      mentions: '`embedded`',
    },
    {
      name: 'DATA_DIR under a file (ENOTDIR), with the embedded database named (DATABASE_URL=embedded)',
      variable: 'DATA_DIR',
      env: async () => {
        const file = join(mkdtempSync(join(tmpdir(), 'cws-start-')), 'a-file');
        writeFileSync(file, 'x');
        return { ...base, DATABASE_URL: 'embedded', DATA_DIR: join(file, 'data') };
      },
      mentions: 'ENOTDIR',
    },
    {
      name: 'DATA_DIR under a file (ENOTDIR), outside production (local secrets)',
      variable: 'DATA_DIR',
      env: async () => {
        const file = join(mkdtempSync(join(tmpdir(), 'cws-start-')), 'a-file');
        writeFileSync(file, 'x');
        return { NODE_ENV: 'development', DATA_DIR: join(file, 'data') };
      },
      mentions: 'ENOTDIR',
    },
    {
      name: 'DATABASE_URL where nothing listens (ECONNREFUSED)',
      variable: 'DATABASE_URL',
      env: async () => ({ ...base, DATABASE_URL: `postgres://postgres:secret-password@127.0.0.1:${await freePort()}/cws` }),
      mentions: 'ECONNREFUSED',
    },
    {
      name: 'DATABASE_URL with a host that does not resolve',
      variable: 'DATABASE_URL',
      env: async () => ({ ...base, DATABASE_URL: 'postgres://postgres:secret-password@no-such-host.invalid:5432/cws' }),
      mentions: 'no-such-host.invalid',
    },
    {
      name: 'DATABASE_URL with a wrong password',
      variable: 'DATABASE_URL',
      env: async () => ({ ...base, DATABASE_URL: own.url('postgres').replace(/:[^:@/]+@/, ':secret-password@') }),
      mentions: 'refused user "postgres"',
    },
    {
      name: 'DATABASE_URL naming a database that does not exist',
      variable: 'DATABASE_URL',
      env: async () => ({ ...base, DATABASE_URL: own.url('no_such_database') }),
      mentions: 'createdb no_such_database',
    },
  ];

  for (const c of cases) {
    it(`${c.name}: one line naming ${c.variable}, exit 1, no stack`, async () => {
      const result = await runUntilExit({ DATA_DIR: mkdtempSync(join(tmpdir(), 'cws-start-')), ...(await c.env()) });
      console.log(`${c.name}: exit ${result.code}: ${result.output.trim()}`);
      expect(oneLineNaming(result, c.variable)).toEqual({ code: 1, lines: 1, names: true, stack: false });
      expect(result.output).toContain(c.mentions);
      expect(result.output).not.toContain('secret-password');
    });
  }
});
