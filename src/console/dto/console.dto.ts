import { ApiProperty } from '@nestjs/swagger';
import { IsString, MaxLength, MinLength } from 'class-validator';

export class SignInDto {
  @ApiProperty({ description: 'The operator key (OPERATOR_API_KEY). Tenant keys do not sign in.' })
  @IsString()
  @MinLength(1)
  @MaxLength(512)
  operatorKey: string;
}

export class ConsoleSessionDto {
  @ApiProperty({ description: 'Send it back in `x-csrf-token` with every call the page makes with the session cookie.' })
  csrfToken: string;

  @ApiProperty({ format: 'date-time' })
  expiresAt: string;
}

class RenewalFiguresDto {
  @ApiProperty({
    description: 'Renewals that held the lease, by outcome.',
    example: { success: 120, failure: 0, reauth_required: 1, lost_race: 0 },
  })
  byOutcome: Record<string, number>;

  @ApiProperty({ type: Number, nullable: true, description: 'Mean time of one renewal, in milliseconds; null before the first.' })
  meanMs: number | null;

  @ApiProperty({ type: Number, nullable: true, description: 'The bucket bound under which 95 % of renewals finished, in milliseconds.' })
  p95UnderMs: number | null;

  @ApiProperty({ description: 'How long the most overdue active connection has been due (0: none).' })
  overdueSeconds: number;
}

class UpstreamFiguresDto {
  @ApiProperty({
    description: 'Resource calls to the upstream (facade and proxy), by status class; `error`: no answer.',
    example: { '2xx': 40, '3xx': 0, '4xx': 2, '5xx': 0, error: 0 },
  })
  byOutcome: Record<string, number>;

  @ApiProperty({ type: Number, nullable: true }) meanMs: number | null;
  @ApiProperty({ type: Number, nullable: true }) p95UnderMs: number | null;
}

class QuotaClassFiguresDto {
  @ApiProperty({ description: "Calls sent upstream under the company's budget." }) spent: number;
  @ApiProperty({ description: 'Of those, the calls that waited for budget first.' }) waited: number;
  @ApiProperty({ description: 'Calls answered `429 quota_exhausted`.' }) refused: number;
  @ApiProperty({ description: "The upstream's own 429 answers." }) upstream429: number;
}

class QuotaFiguresDto {
  @ApiProperty({ type: QuotaClassFiguresDto, description: 'GET and HEAD resource calls.' }) read: QuotaClassFiguresDto;
  @ApiProperty({ type: QuotaClassFiguresDto, description: 'The other resource calls.' }) write: QuotaClassFiguresDto;
}

export class ConsoleFiguresDto {
  @ApiProperty({ description: 'Figures of the instance that answered, since it started (its Prometheus metrics).' })
  instanceId: string;

  @ApiProperty({ format: 'date-time' }) startedAt: string;
  @ApiProperty({ type: RenewalFiguresDto }) renewals: RenewalFiguresDto;
  @ApiProperty({ type: UpstreamFiguresDto }) upstream: UpstreamFiguresDto;
  @ApiProperty({ type: QuotaFiguresDto, description: 'Upstream budgets (docs/quotas.md), every lane together.' }) quotas: QuotaFiguresDto;
}
