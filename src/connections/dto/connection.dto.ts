import { ApiProperty } from '@nestjs/swagger';
import type { ConnectionEntity } from '../connection.entity.js';

class UpstreamUserDto {
  @ApiProperty() id: string;
  @ApiProperty({ nullable: true, type: String }) email: string | null;
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
  @ApiProperty() createdAt: string;

  static from(c: ConnectionEntity): ConnectionResponseDto {
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
      createdAt: c.createdAt.toISOString(),
    };
  }
}
