import { describe, expect, it } from '@jest/globals';
import type { Request } from 'express';
import { SystemClock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import type { ConsoleSessionsRepository } from './console-sessions.repository.js';
import { ConsoleSessionsService } from './console-sessions.service.js';

const noRepository = {} as ConsoleSessionsRepository;
const service = (publicUrl: string) => new ConsoleSessionsService({ publicUrl } as AppConfig, noRepository, new SystemClock());
const request = (headers: Record<string, string>) => ({ headers }) as unknown as Request;
const TOKEN = 'a'.repeat(43);

describe('ConsoleSessionsService', () => {
  it('marks the cookie Secure when the service is reached over https, and scopes it to the service path', () => {
    expect(service('https://connect.example.com').cookieOptions()).toMatchObject({
      httpOnly: true,
      sameSite: 'strict',
      secure: true,
      path: '/',
    });
    expect(service('https://example.com/cws').cookieOptions()).toMatchObject({ secure: true, path: '/cws/' });
    expect(service('http://localhost:3000').cookieOptions()).toMatchObject({ secure: false, path: '/' });
  });

  it('takes a session cookie as the credential only when no Authorization header is present', () => {
    const s = service('http://localhost:3000');
    expect(s.presentedBy(request({ cookie: `cws_console=${TOKEN}` }))).toBe(true);
    expect(s.presentedBy(request({ cookie: `cws_console=${TOKEN}`, authorization: 'Bearer x' }))).toBe(false);
    expect(s.presentedBy(request({ cookie: 'cws_console=short' }))).toBe(false);
    expect(s.presentedBy(request({}))).toBe(false);
  });

  it('refuses a request without the CSRF token before looking the session up', async () => {
    const s = service('http://localhost:3000');
    await expect(s.authorize(request({ cookie: `cws_console=${TOKEN}` }), false)).rejects.toMatchObject({ code: 'forbidden' });
    await expect(s.authorize(request({ cookie: `cws_console=${TOKEN}`, 'x-csrf-token': 'nope' }), false)).rejects.toMatchObject({
      code: 'forbidden',
    });
  });
});
