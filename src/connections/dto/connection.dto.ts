import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional, IsString, Length, MaxLength } from 'class-validator';
import { PageLimit } from '../../common/page-limit.js';
import { ENVIRONMENT_NAMES, type EnvironmentName } from '../../config/environment-config.js';
import type { LastError, RenewalOutcome, RenewalRecord } from '../store/connection-health.repository.js';
import type { ListedConnection } from '../store/connection-paging.js';
import type { ConnectionKind, ConnectionStatus } from '../store/connection.entity.js';
import { DEFAULT_CONNECTIONS_PAGE, MAX_CONNECTIONS_PAGE } from '../connections.service.js';

class UpstreamUserDto {
  @ApiProperty() id: string;
  @ApiProperty({ nullable: true, type: String }) email: string | null;
}

export class LastErrorDto {
  @ApiProperty({
    description: 'Why the last renewal failed: `upstream_unavailable`, `upstream_timeout`, `upstream_error`, `refresh_token_rejected`, ...',
    example: 'upstream_unavailable',
  })
  code: string;

  @ApiProperty({ format: 'date-time' })
  at: string;
}

/** A connection as the contract shows it (API.md section 6): never a token, never a ciphertext. */
export class ConnectionResponseDto {
  @ApiProperty() id: string;
  @ApiProperty({ enum: ['admin', 'user'] }) kind: string;
  @ApiProperty({ nullable: true, type: String }) userId: string | null;
  @ApiProperty({ type: UpstreamUserDto }) upstreamUser: UpstreamUserDto;
  @ApiProperty() isAdmin: boolean;
  @ApiProperty({ enum: ['active', 'reauth_required'] }) status: string;
  @ApiProperty({ nullable: true, type: String, description: 'Why the connection needs attention.' }) statusReason: string | null;
  @ApiProperty({ type: [String] }) scopes: string[];
  @ApiProperty({ nullable: true, type: String }) accessTokenExpiresAt: string | null;
  @ApiProperty({ nullable: true, type: String }) lastRefreshedAt: string | null;
  @ApiProperty({
    type: LastErrorDto,
    nullable: true,
    description:
      'The last failed renewal, or the one that made the connection reauth_required; null again after a successful renewal or a reconnect.',
  })
  lastError: LastErrorDto | null;
  @ApiProperty() createdAt: string;

  /** `lastError` is null unless given: a connection that was just renewed has none. */
  static from(c: ListedConnection, lastError: LastError | null = null): ConnectionResponseDto {
    return {
      id: c.id,
      kind: c.kind,
      userId: c.userId,
      upstreamUser: { id: c.upstreamUserId, email: c.upstreamEmail },
      isAdmin: c.isAdmin,
      status: c.status,
      statusReason: c.statusReason,
      scopes: c.scopes,
      accessTokenExpiresAt: c.accessTokenExpiresAt?.toISOString() ?? null,
      lastRefreshedAt: c.lastRefreshedAt?.toISOString() ?? null,
      lastError: lastError ? { code: lastError.code, at: lastError.at.toISOString() } : null,
      createdAt: c.createdAt.toISOString(),
    };
  }
}

export class ListConnectionsQueryDto {
  @PageLimit(MAX_CONNECTIONS_PAGE, { default: DEFAULT_CONNECTIONS_PAGE })
  limit?: number;

  @ApiPropertyOptional({ description: 'The `next` of the previous page (opaque).' })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  after?: string;

  @ApiPropertyOptional({ description: "The partner's user id: that user's connection only." })
  @IsOptional()
  @IsString()
  @Length(1, 200)
  userId?: string;

  @ApiPropertyOptional({ enum: ['admin', 'user'] })
  @IsOptional()
  @IsIn(['admin', 'user'])
  kind?: ConnectionKind;

  @ApiPropertyOptional({ enum: ['active', 'reauth_required'] })
  @IsOptional()
  @IsIn(['active', 'reauth_required'])
  status?: ConnectionStatus;

  @ApiPropertyOptional({
    enum: ENVIRONMENT_NAMES,
    description: "A tenant's connections all live in the tenant's environment: another one gives an empty page.",
  })
  @IsOptional()
  @IsIn(ENVIRONMENT_NAMES)
  environment?: EnvironmentName;
}

export class ConnectionPageDto {
  @ApiProperty({ type: [ConnectionResponseDto] })
  connections: ConnectionResponseDto[];

  @ApiProperty({ type: String, nullable: true, description: 'Pass as `after` for the next page (opaque); null on the last page.' })
  next: string | null;
}

export class RenewalDto {
  @ApiProperty({ format: 'date-time', description: 'When the renewal ended.' })
  at: string;

  @ApiProperty({ enum: ['renewed', 'failed', 'reauth_required'] })
  outcome: RenewalOutcome;

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'The error code of a renewal that did not renew; null when renewed.',
    example: 'upstream_timeout',
  })
  error: string | null;

  @ApiProperty({ description: 'From taking the renewal lease to the stored outcome.' })
  durationMs: number;

  static from(r: RenewalRecord): RenewalDto {
    return { at: r.at.toISOString(), outcome: r.outcome, error: r.error, durationMs: r.durationMs };
  }
}

export class RenewalHistoryDto {
  @ApiProperty({ type: [RenewalDto], description: 'The last 20 renewals, newest first.' })
  renewals: RenewalDto[];
}
