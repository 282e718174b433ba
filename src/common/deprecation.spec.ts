import { describe, expect, it } from '@jest/globals';
import { HEADERS_METADATA } from '@nestjs/common/constants.js';
import { ApiOperation, DECORATORS } from '@nestjs/swagger';
import { Deprecated, deprecationHeaders } from './deprecation.js';

describe('Deprecated', () => {
  const since = new Date('2026-12-01T00:00:00Z');
  const sunset = new Date('2027-06-01T00:00:00Z');

  it('writes Deprecation as a structured date, Sunset as an HTTP-date, and the deprecation link', () => {
    expect(deprecationHeaders({ since, sunset, link: 'https://example.test/migrate' })).toEqual({
      deprecation: '@1796083200',
      sunset: 'Tue, 01 Jun 2027 00:00:00 GMT',
      link: '<https://example.test/migrate>; rel="deprecation"',
    });
    expect(deprecationHeaders({ since })).toEqual({ deprecation: '@1796083200' });
  });

  it('sets the headers on the handler and marks its OpenAPI operation deprecated, keeping its summary', () => {
    class Routes {
      @Deprecated({ since, sunset })
      @ApiOperation({ operationId: 'old', summary: 'The old way' })
      old(): void {}

      @ApiOperation({ operationId: 'older', summary: 'The older way' })
      @Deprecated({ since })
      older(): void {}
    }
    const headers = Reflect.getMetadata(HEADERS_METADATA, Routes.prototype.old) as Array<{ name: string; value: string }>;
    expect(headers).toEqual(
      expect.arrayContaining([
        { name: 'deprecation', value: '@1796083200' },
        { name: 'sunset', value: 'Tue, 01 Jun 2027 00:00:00 GMT' },
      ]),
    );
    for (const [handler, summary] of [
      [Routes.prototype.old, 'The old way'],
      [Routes.prototype.older, 'The older way'],
    ] as const)
      expect(Reflect.getMetadata(DECORATORS.API_OPERATION, handler)).toMatchObject({ summary, deprecated: true });
  });
});
