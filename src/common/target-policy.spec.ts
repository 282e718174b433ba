import type { LookupAddress } from 'node:dns';
import { describe, expect, it } from '@jest/globals';
import { addressAllowed, guardedLookup, parseAllowEntry, TargetRefusedError, targetPolicy, targetProblem } from './target-policy.js';

const production = targetPolicy(true, []);
const development = targetPolicy(false, []);

/** Each class of internal address, in the spellings a URL or a resolver can give it. */
const INTERNAL: Array<[string, string[]]> = [
  ['IPv4 loopback', ['127.0.0.1', '127.1.2.3', '::ffff:127.0.0.1', '::ffff:7f00:1']],
  ['IPv6 loopback', ['::1', '0:0:0:0:0:0:0:1']],
  ['unspecified', ['0.0.0.0', '::', '::ffff:0.0.0.0']],
  ['link-local and cloud metadata', ['169.254.169.254', '169.254.0.1', 'fe80::1', 'fe80::a9fe:a9fe', '::ffff:169.254.169.254']],
  ['private 10/8', ['10.0.0.1', '10.255.255.255', '::ffff:10.0.0.1']],
  ['private 172.16/12', ['172.16.0.1', '172.31.255.254']],
  ['private 192.168/16', ['192.168.0.1', '192.168.255.255']],
  ['shared 100.64/10', ['100.64.0.1', '100.127.255.254']],
  ['unique local fc00::/7', ['fc00::1', 'fd12:3456::1']],
  ['multicast', ['224.0.0.1', '239.255.255.250', 'ff02::1', 'ff05::1:3']],
  ['broadcast and reserved', ['255.255.255.255', '240.0.0.1', '192.0.2.1', '198.51.100.1', '203.0.113.1', '198.18.0.1']],
  ['IPv4 embedded in IPv6 (6to4, NAT64, Teredo)', ['2002:7f00:1::1', '64:ff9b::7f00:1', '2001:0:4136:e378:8000:63bf:3fff:fdd2']],
];

const PUBLIC = ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'];

describe('the events target policy', () => {
  it.each(INTERNAL)('refuses %s in production', (_label, addresses) => {
    for (const a of addresses) expect([a, addressAllowed(production, a)]).toEqual([a, false]);
  });

  it('takes globally routable unicast addresses', () => {
    for (const a of PUBLIC) expect([a, addressAllowed(production, a)]).toEqual([a, true]);
  });

  it('allows loopback outside production, and nothing else internal', () => {
    for (const a of ['127.0.0.1', '::1', '::ffff:127.0.0.1']) expect([a, addressAllowed(development, a)]).toEqual([a, true]);
    for (const a of ['10.0.0.1', '169.254.169.254', '0.0.0.0', 'fc00::1']) expect([a, addressAllowed(development, a)]).toEqual([a, false]);
  });

  it("allows the operator's ranges, addresses and names, and only those", () => {
    const policy = targetPolicy(true, ['10.1.0.0/16', '192.168.7.7', 'fd00::/8', 'Hooks.Corp.Example.']);
    expect(addressAllowed(policy, '10.1.2.3')).toBe(true);
    expect(addressAllowed(policy, '::ffff:10.1.2.3')).toBe(true);
    expect(addressAllowed(policy, '10.2.0.1')).toBe(false);
    expect(addressAllowed(policy, '192.168.7.7')).toBe(true);
    expect(addressAllowed(policy, '192.168.7.8')).toBe(false);
    expect(addressAllowed(policy, 'fd00::5')).toBe(true);
    expect(addressAllowed(policy, '127.0.0.1')).toBe(false);
    expect(targetProblem(policy, 'https://hooks.corp.example/in')).toBeNull();
    expect(targetProblem(policy, 'https://10.1.9.9/in')).toBeNull();
    expect(parseAllowEntry('not a host!')).toBeNull();
    expect(parseAllowEntry('10.0.0.0/33')).toBeNull();
  });

  it('refuses at write time every spelling of an internal literal and internal names', () => {
    const urls = [
      'https://127.0.0.1/',
      'https://127.1/',
      'https://2130706433/',
      'https://0x7f000001/',
      'https://0177.0.0.1/',
      'https://[::1]/',
      'https://[::ffff:127.0.0.1]/',
      'https://[0:0:0:0:0:ffff:7f00:1]/',
      'https://0.0.0.0/',
      'https://0/',
      'https://[::]/',
      'https://169.254.169.254/latest/meta-data/',
      'https://[fe80::1]/',
      'https://10.0.0.1/',
      'https://172.16.0.1/',
      'https://192.168.1.1/',
      'https://100.64.0.1/',
      'https://[fc00::1]/',
      'https://[ff02::1]/',
      'https://224.0.0.1/',
      'https://localhost/',
      'https://LOCALHOST./',
      'https://app.localhost/',
      'https://metadata/',
      'https://metadata.google.internal/computeMetadata/v1/',
      'https://metadata.google.internal./',
      'https://printer.local/',
      'https://intranet/',
    ];
    for (const url of urls) expect([url, targetProblem(production, url)]).toEqual([url, expect.stringMatching(/public address/)]);
    for (const url of ['https://hooks.partner.example/in', 'https://8.8.8.8/', 'https://[2606:4700::1]/'])
      expect([url, targetProblem(production, url)]).toEqual([url, null]);
    for (const url of ['http://localhost:4000/', 'http://127.0.0.1:4000/', 'http://[::1]:4000/'])
      expect([url, targetProblem(development, url)]).toEqual([url, null]);
    expect(targetProblem(development, 'http://10.0.0.1/')).toMatch(/public address/);
  });

  describe('at connect time, the addresses a name resolves to then', () => {
    const resolver =
      (answers: Record<string, string[]>) =>
      (hostname: string, _o: unknown, cb: (err: Error | null, a: LookupAddress[]) => void): void =>
        cb(
          null,
          (answers[hostname] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
        );

    function resolve(policy: ReturnType<typeof targetPolicy>, answers: Record<string, string[]>, host: string, all: boolean) {
      return new Promise<{ err: unknown; result: unknown }>((done) => {
        const lookup = guardedLookup(policy, resolver(answers)) as unknown as (
          h: string,
          o: { all: boolean },
          cb: (err: unknown, result?: unknown, family?: number) => void,
        ) => void;
        lookup(host, { all }, (err, result) => done({ err, result }));
      });
    }

    it('refuses a name that resolves (or rebinds) to an internal address, or to one among public ones', async () => {
      const answers = { 'rebind.example': ['10.0.0.7'], 'mixed.example': ['8.8.8.8', '169.254.169.254'], 'ok.example': ['8.8.8.8'] };
      for (const host of ['rebind.example', 'mixed.example', 'nothing.example']) {
        expect((await resolve(production, answers, host, true)).err).toBeInstanceOf(TargetRefusedError);
        expect((await resolve(production, answers, host, false)).err).toBeInstanceOf(TargetRefusedError);
      }
      expect(await resolve(production, answers, 'ok.example', true)).toEqual({ err: null, result: [{ address: '8.8.8.8', family: 4 }] });
      expect(await resolve(production, answers, 'ok.example', false)).toEqual({ err: null, result: '8.8.8.8' });
    });

    it('lets an allowed name resolve anywhere', async () => {
      const policy = targetPolicy(true, ['hooks.corp.example']);
      expect((await resolve(policy, { 'hooks.corp.example': ['10.9.9.9'] }, 'hooks.corp.example', false)).result).toBe('10.9.9.9');
    });
  });
});
