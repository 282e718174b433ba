import 'reflect-metadata';
import { describe, expect, it } from '@jest/globals';
import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';
import { PageLimit } from './page-limit.js';

class Query {
  @PageLimit(500)
  limit?: number;
}

function check(limit: unknown): { limit: unknown; messages: string[] } {
  const query = plainToInstance(Query, { limit });
  const messages = validateSync(query).flatMap((e) => Object.values(e.constraints ?? {}));
  return { limit: query.limit, messages };
}

describe('PageLimit', () => {
  it('takes the plain decimal spelling of 1 to max as a number', () => {
    expect(check('1')).toEqual({ limit: 1, messages: [] });
    expect(check('500')).toEqual({ limit: 500, messages: [] });
    expect(check(undefined)).toEqual({ limit: undefined, messages: [] });
  });

  it.each(['0', '501', 'abc', '1e2', '0x10', ' 5', '5.0', '-1', '', '9999999'])('refuses %j with one message', (raw) => {
    expect(check(raw).messages).toEqual(['limit must be an integer between 1 and 500']);
  });

  it('refuses a repeated parameter', () => {
    expect(check(['5', '6']).messages).toEqual(['limit must be an integer between 1 and 500']);
  });
});
