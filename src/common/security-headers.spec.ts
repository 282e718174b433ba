import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from '@jest/globals';
import helmet from 'helmet';
import { setSecurityHeaders } from './security-headers.js';

describe('setSecurityHeaders', () => {
  it("sets helmet's headers, names, values and order, as helmet's own middleware does on a real answer", async () => {
    const viaHelmet = helmet({ contentSecurityPolicy: false, crossOriginOpenerPolicy: false, crossOriginResourcePolicy: false });
    const server = createServer((req, res) => {
      if (req.url === '/helmet') viaHelmet(req, res, () => res.end());
      else {
        setSecurityHeaders(res);
        res.end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const headersOf = async (path: string) => {
        const res = await fetch(base + path);
        await res.arrayBuffer();
        return [...res.headers].filter(([name]) => !['date', 'connection', 'keep-alive', 'content-length'].includes(name));
      };
      const expected = await headersOf('/helmet');
      expect(expected.map(([name]) => name)).toEqual(expect.arrayContaining(['strict-transport-security', 'x-content-type-options']));
      expect(await headersOf('/ours')).toEqual(expected);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
