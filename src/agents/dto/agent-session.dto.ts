import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, IsArray, IsInt, IsOptional, IsString, Length, Max, MaxLength, Min } from 'class-validator';
import { PageLimit } from '../../common/page-limit.js';
import type { AgentSession } from '../agent-sessions.repository.js';
import { DEFAULT_LIFETIME_SECONDS, DEFAULT_SESSIONS_PAGE, MAX_SESSIONS_PAGE } from '../agent-sessions.service.js';

const LIFETIME_MESSAGE = 'expiresInSeconds must be an integer between 60 and 86400';

export class CreateAgentSessionDto {
  @ApiProperty({ description: "The partner's id of the user the agent acts for (their own connection serves its calls)." })
  @IsString()
  @Length(1, 200)
  userId: string;

  @ApiPropertyOptional({
    type: [String],
    description:
      'Tool names, or the groups `read` (reading tools), `write` (the other workflow tools), `admin` (webhook tools: they also need the tenant\'s admin connection). Default: `["read", "write"]`.',
  })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(100)
  @IsString({ each: true })
  @Length(1, 100, { each: true })
  tools?: string[];

  @ApiPropertyOptional({
    minimum: 60,
    maximum: 86400,
    description: `Lifetime of the session, in seconds (default ${DEFAULT_LIFETIME_SECONDS}).`,
  })
  @IsOptional()
  @IsInt({ message: LIFETIME_MESSAGE })
  @Min(60, { message: LIFETIME_MESSAGE })
  @Max(86400, { message: LIFETIME_MESSAGE })
  expiresInSeconds?: number;

  @ApiPropertyOptional({ description: 'A name for people (the console shows it), at most 200 characters.' })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  label?: string;
}

export class ListAgentSessionsQueryDto {
  @ApiPropertyOptional({ description: "One user's sessions only." })
  @IsOptional()
  @IsString()
  @Length(1, 200)
  userId?: string;

  @PageLimit(MAX_SESSIONS_PAGE, { default: DEFAULT_SESSIONS_PAGE })
  limit?: number;

  @ApiPropertyOptional({ description: 'The `next` of the previous page (opaque).' })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  after?: string;
}

/** An agent session without its token (never shown again after its creation). */
export class AgentSessionDto {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty() userId: string;
  @ApiProperty({ type: [String], description: 'The tools granted, by name.' }) tools: string[];
  @ApiProperty({ type: String, nullable: true }) label: string | null;
  @ApiProperty({ enum: ['active', 'expired', 'revoked'] }) status: string;
  @ApiProperty({ format: 'date-time' }) createdAt: string;
  @ApiProperty({ format: 'date-time' }) expiresAt: string;
  @ApiProperty({ type: String, format: 'date-time', nullable: true, description: 'Last use, to the minute.' }) lastUsedAt: string | null;
  @ApiProperty({ type: String, format: 'date-time', nullable: true }) revokedAt: string | null;

  static from(s: AgentSession, now: Date): AgentSessionDto {
    return {
      id: s.id,
      userId: s.userId,
      tools: s.tools,
      label: s.label,
      status: s.revokedAt !== null ? 'revoked' : s.expiresAt.getTime() <= now.getTime() ? 'expired' : 'active',
      createdAt: s.createdAt.toISOString(),
      expiresAt: s.expiresAt.toISOString(),
      lastUsedAt: s.lastUsedAt?.toISOString() ?? null,
      revokedAt: s.revokedAt?.toISOString() ?? null,
    };
  }
}

export class CreatedAgentSessionDto extends AgentSessionDto {
  @ApiProperty({ description: 'Where the agent connects: the MCP endpoint (`<PUBLIC_URL>/mcp`).' }) mcpUrl: string;
  @ApiProperty({ description: 'The session token (`cwsag_…`): `Authorization: Bearer <token>` on /mcp. Shown only here.' })
  token: string;
}

export class AgentSessionPageDto {
  @ApiProperty({ type: [AgentSessionDto], description: 'In creation order.' })
  items: AgentSessionDto[];

  @ApiProperty({ type: String, nullable: true, description: 'Pass as `after` for the next page (opaque); null on the last page.' })
  next: string | null;
}
