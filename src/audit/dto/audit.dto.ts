import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { PageLimit } from '../../common/page-limit.js';
import { TENANT_ID } from '../../common/params.js';
import { ACTOR_KINDS, AUDIT_ACTIONS, type AuditRow } from '../audit-entry.js';
import { DEFAULT_AUDIT_PAGE, MAX_AUDIT_PAGE } from '../audit.service.js';

export class ListAuditQueryDto {
  @PageLimit(MAX_AUDIT_PAGE, { default: DEFAULT_AUDIT_PAGE })
  limit?: number;

  @ApiPropertyOptional({ description: 'The `next` of the previous page (opaque).' })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  after?: string;
}

export class ListAllAuditQueryDto extends ListAuditQueryDto {
  @ApiPropertyOptional({ description: "One tenant's rows only, a deleted tenant's included." })
  @IsOptional()
  @IsString()
  @Matches(TENANT_ID, { message: 'tenantId must be a tenant id (lower-case letters, digits and dashes)' })
  tenantId?: string;
}

class AuditActorDto {
  @ApiProperty({
    enum: ACTOR_KINDS,
    description:
      '`connect_session`: the browser that completed a connect session (a reconnect replaces the tokens through it); `agent_session`: an AI agent acting through an agent session (its tool calls).',
  })
  kind: string;

  @ApiProperty({
    type: String,
    nullable: true,
    description: "The key's id, the console session's id, `operator` for the operator key, the connect session's id; never a secret.",
  })
  id: string | null;
}

/** One row of the audit trail (API.md section 4): never a secret. */
export class AuditEntryDto {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty({ format: 'date-time' }) at: string;
  @ApiProperty({ type: AuditActorDto }) actor: AuditActorDto;
  @ApiProperty({ enum: AUDIT_ACTIONS }) action: string;
  @ApiProperty({ type: String, nullable: true }) tenantId: string | null;
  @ApiProperty({
    type: String,
    nullable: true,
    description: 'What was acted on, as `<kind>/<id>`: `api-keys/<id>`, `connections/<id>`, ...',
  })
  target: string | null;
  @ApiProperty({ type: String, nullable: true, description: "The partner's end user the change concerns; null once that user is erased." })
  userId: string | null;
  @ApiProperty({ type: String, nullable: true }) requestId: string | null;
  @ApiProperty({ enum: ['success', 'failure'] }) outcome: string;
  @ApiProperty({
    type: Number,
    nullable: true,
    description: "An agent's tool call (`agent.tool_call`): the status of its answer, the upstream's or this service's error status.",
  })
  status: number | null;
  @ApiProperty({ type: String, nullable: true, description: 'The trace the action ran in, when tracing is on (docs/operations.md).' })
  traceId: string | null;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    nullable: true,
    description:
      'What a key operation did, in ids, versions and counts (`kekId`, `version`, `total`, `resealed`, `retired`...; docs/keys.md); null for other actions. Never key material.',
  })
  details: Record<string, unknown> | null;
  @ApiProperty({
    description:
      'How many times it happened: failures of the same action by the same actor on the same tenant within a minute share one row.',
  })
  count: number;

  static from(r: AuditRow): AuditEntryDto {
    return {
      id: r.id,
      at: r.at.toISOString(),
      actor: { kind: r.actor.kind, id: r.actor.id },
      action: r.action,
      tenantId: r.tenantId,
      target: r.target,
      userId: r.userId,
      requestId: r.requestId,
      outcome: r.outcome,
      status: r.status,
      traceId: r.traceId,
      details: r.details,
      count: r.count,
    };
  }
}

export class AuditPageDto {
  @ApiProperty({ type: [AuditEntryDto], description: 'Newest first.' })
  items: AuditEntryDto[];

  @ApiProperty({ type: String, nullable: true, description: 'Pass as `after` for the next page (opaque); null on the last page.' })
  next: string | null;
}
