import { applyDecorators } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiConsumes, ApiHeader, ApiOperation, ApiParam, ApiResponse } from '@nestjs/swagger';

const ERROR_SCHEMA = {
  type: 'object',
  properties: {
    error: {
      type: 'object',
      properties: { code: { type: 'string' }, message: { type: 'string' }, requestId: { type: 'string' } },
      required: ['code', 'message', 'requestId'],
    },
  },
};

const PASSED_THROUGH =
  'Any other status and body come from the upstream unchanged, with the header `x-upstream-status`; hop-by-hop headers, `set-cookie` and credentials are not passed back.';

function error(status: number, codes: string): MethodDecorator & ClassDecorator {
  return ApiResponse({ status, description: `Error codes: ${codes}. (An upstream answer with this status is passed through instead, with \`x-upstream-status\`.)`, schema: ERROR_SCHEMA });
}

const COMMON = [
  ApiBearerAuth(),
  ApiParam({ name: 'tenantId', description: 'The tenant (a tenant key may call only its own).' }),
  error(401, '`unauthorized` (no or bad API key)'),
  error(404, '`tenant_not_found`'),
  error(422, '`environment_not_configured`'),
  error(502, '`upstream_unavailable` (the upstream could not be reached)'),
  error(504, '`upstream_timeout` (the upstream did not answer in time: UPSTREAM_TIMEOUT_MS)'),
];

/** A route served with the acting user's token (API.md section 7). */
export function UserRoute(summary: string, upstream: string): MethodDecorator {
  return applyDecorators(
    ApiOperation({
      summary,
      description: `Calls the upstream \`${upstream}\` with the token of the user named by X-User-Id. Without X-User-Id, a tenant of design \`admin\` uses its admin connection; any other design answers 400 \`user_id_required\`. An upstream 401 causes one token renewal and one retry (when the request body can be sent again). ${PASSED_THROUGH}`,
    }),
    ApiHeader({ name: 'X-User-Id', required: false, description: "The partner's id of the acting user (required unless the tenant's design is `admin`)." }),
    ...COMMON,
    error(400, '`user_id_required`'),
    error(409, '`user_not_connected`, `admin_not_connected` (design admin, no X-User-Id, no admin connection), `reauth_required`'),
  );
}

/** A route served with the admin connection's token only; X-User-Id is ignored. */
export function AdminRoute(summary: string, upstream: string): MethodDecorator {
  return applyDecorators(
    ApiOperation({
      summary,
      description: `Calls the upstream \`${upstream}\` with the admin connection's token; X-User-Id is ignored. ${PASSED_THROUGH}`,
    }),
    ...COMMON,
    error(409, '`admin_not_connected` (none, or the tenant\'s design is `users`), `reauth_required`'),
  );
}

/** A request body streamed to the upstream as is. */
export function StreamedBody(...mediaTypes: string[]): MethodDecorator {
  return applyDecorators(
    ApiConsumes(...mediaTypes),
    ApiBody({ required: false, description: 'Streamed to the upstream unchanged (never held whole in memory); its fields are the upstream\'s.', schema: { type: 'object', additionalProperties: true } }),
  );
}

export function UpstreamAnswer(status: number, description: string): MethodDecorator {
  return ApiResponse({ status, description: `${description} From the upstream, passed through with \`x-upstream-status\`.` });
}
