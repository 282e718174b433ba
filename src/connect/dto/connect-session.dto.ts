import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, IsArray, IsIn, IsOptional, IsString, IsUrl, Length, Matches, MaxLength, ValidateIf } from 'class-validator';

export class CreateConnectSessionDto {
  @ApiProperty({ enum: ['user', 'admin'] })
  @IsIn(['user', 'admin'])
  kind: 'user' | 'admin';

  @ApiPropertyOptional({ description: "The partner's own user id; required for kind user, refused for kind admin." })
  @ValidateIf((o: CreateConnectSessionDto) => o.kind === 'user' || o.userId !== undefined)
  @IsString()
  @Length(1, 200)
  userId?: string;

  @ApiProperty({ description: "Where the browser returns; must start with one of the tenant's allowedReturnUrls." })
  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  @MaxLength(2000)
  returnUrl: string;

  @ApiPropertyOptional({ type: [String], description: "Default: all the environment's registered scopes." })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(100)
  @IsString({ each: true })
  @Matches(/^[A-Za-z0-9_.:-]+$/, { each: true, message: 'each scope must be a scope name (letters, digits, dots)' })
  scopes?: string[];
}

export class ConnectSessionResponseDto {
  @ApiProperty({ description: "Send the user's browser here. Single use." }) connectUrl: string;
  @ApiProperty() expiresAt: string;
}
