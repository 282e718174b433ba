import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Validate, ValidateIf, ValidatorConstraint, type ValidationArguments, type ValidatorConstraintInterface } from 'class-validator';
import { parseBudget } from '../../config/quota-budgets.js';

@ValidatorConstraint({ name: 'budget' })
class BudgetText implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    return typeof value === 'string' && typeof parseBudget(value) !== 'string';
  }

  defaultMessage(args: ValidationArguments): string {
    const problem = typeof args.value === 'string' ? parseBudget(args.value) : null;
    return `quotas.${args.property}: ${typeof problem === 'string' ? problem : 'a budget is a string such as 400/60s'}`;
  }
}

const BUDGET_DOC =
  "`<calls>/<window>`, the window in `s`, `m` or `h` (1 s to 24 h), e.g. `400/60s`; null or omitted: the environment's (`CWS_<ENV>_QUOTAS`).";

/** A tenant's own budgets per class (docs/quotas.md). */
export class QuotasDto {
  @ApiPropertyOptional({ type: String, nullable: true, example: '400/60s', description: `GET and HEAD resource calls: ${BUDGET_DOC}` })
  @ValidateIf((_, v) => v !== null && v !== undefined)
  @Validate(BudgetText)
  read?: string | null;

  @ApiPropertyOptional({ type: String, nullable: true, example: '40/60s', description: `The other resource calls: ${BUDGET_DOC}` })
  @ValidateIf((_, v) => v !== null && v !== undefined)
  @Validate(BudgetText)
  write?: string | null;
}

export class QuotaWindowDto {
  @ApiProperty({ description: 'The clock window these figures count, aligned to the Unix epoch (the budget holds in any interval).' })
  start: string;
  @ApiProperty() end: string;
  @ApiProperty({ description: 'Calls sent upstream in this window (all instances; saved every second).' }) spent: number;
  @ApiProperty({ description: 'Of those, the calls that waited for budget first.' }) waited: number;
  @ApiProperty({ description: 'Calls answered `429 quota_exhausted`.' }) refused: number;
  @ApiProperty({ description: "The upstream's own 429 answers." }) upstream429: number;
}

export class QuotaClassUsageDto {
  @ApiProperty({
    type: String,
    nullable: true,
    example: '400/60s',
    description: "The budget in force; null: none (only the upstream's 429s are honoured).",
  })
  budget: string | null;
  @ApiProperty({
    enum: ['tenant', 'environment'],
    nullable: true,
    type: String,
    description: "Whose budget it is: the tenant's own or its environment's.",
  })
  source: 'tenant' | 'environment' | null;
  @ApiProperty({ type: String, nullable: true, description: "Calls of this class wait until then (the upstream's 429); null: not paused." })
  pausedUntil: string | null;
  @ApiProperty({ type: QuotaWindowDto, nullable: true, description: 'The current window; null without a budget.' })
  window: QuotaWindowDto | null;
  @ApiProperty({ type: QuotaWindowDto, nullable: true, description: 'The window before it.' })
  previousWindow: QuotaWindowDto | null;
}

/** Per class: `read` (GET, HEAD) and `write` (the other methods). */
export class QuotaUsageDto {
  @ApiProperty({ type: QuotaClassUsageDto }) read: QuotaClassUsageDto;
  @ApiProperty({ type: QuotaClassUsageDto }) write: QuotaClassUsageDto;
}
