import { ApiProperty } from '@nestjs/swagger';

export class LivenessDto {
  @ApiProperty({ enum: ['ok'] })
  status: 'ok';

  @ApiProperty({ description: 'The semantic version of the running release (CHANGELOG.md).', example: '0.2.0' })
  version: string;

  @ApiProperty({ description: 'The git commit the running build came from; `unknown` when the build could not tell.' })
  commit: string;
}
