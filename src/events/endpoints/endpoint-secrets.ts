import { randomBytes } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { AppError } from '../../common/app-error.js';
import { Clock } from '../../common/clock.js';
import { TokenVault, VaultError, type SealedRef } from '../../vault/token-vault.service.js';
import type { EndpointRow } from './endpoint.js';

/** An added endpoint's signing secrets, sealed with the vault (never returned after creation or rotation, never logged). */
@Injectable()
export class EndpointSecrets {
  constructor(
    private readonly vault: TokenVault,
    private readonly clock: Clock,
  ) {}

  /** A new Standard Webhooks secret, and its sealed form for the endpoint's row. */
  async fresh(tenantId: string, endpointId: string): Promise<{ secret: string; sealed: string }> {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    return { secret, sealed: await this.vault.seal(secret, ref(tenantId, endpointId, 'secret_enc')) };
  }

  /** The secret being replaced, sealed again as the previous one (it signs during the overlap). */
  async sealAsPrevious(ep: EndpointRow): Promise<string> {
    const current = await this.open(ep.secretEnc, ref(ep.tenantId, ep.id, 'secret_enc'));
    return this.vault.seal(current, ref(ep.tenantId, ep.id, 'secret_prev_enc'));
  }

  /** The plaintext secrets that sign the endpoint's deliveries now, the current one first (delivery only). */
  async signingSecretsOf(ep: EndpointRow): Promise<string[]> {
    const secrets = [await this.open(ep.secretEnc, ref(ep.tenantId, ep.id, 'secret_enc'))];
    if (ep.secretPrevEnc && ep.secretPrevUntil && ep.secretPrevUntil > this.clock.now())
      secrets.push(await this.open(ep.secretPrevEnc, ref(ep.tenantId, ep.id, 'secret_prev_enc')));
    return secrets;
  }

  private async open(sealed: string, r: SealedRef): Promise<string> {
    try {
      return await this.vault.open(sealed, r);
    } catch (e) {
      if (!(e instanceof VaultError)) throw e;
      if (e.ringBehind) throw new AppError('service_unavailable', 'This instance does not hold the key of the endpoint secret yet; retry.');
      throw new AppError(
        'secret_unreadable',
        "The endpoint's stored secret cannot be read: rotate it with overlapSeconds 0 to replace it.",
      );
    }
  }
}

function ref(tenantId: string, id: string, column: string): SealedRef {
  return { table: 'event_endpoints', id, column, tenantId };
}
