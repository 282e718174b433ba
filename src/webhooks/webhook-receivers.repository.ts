import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { preparedQuery } from '../database/pg-pool.js';

export type ReceiverAuth = 'bearer' | 'apiKey' | 'basic';

export interface WebhookReceiver {
  id: string;
  tenantId: string;
  authMethod: ReceiverAuth;
  /** The sealed Authorization value the upstream must send (vault ref: webhook_receivers.secret_enc). */
  secretEnc: string;
}

/** The receiving ends of self-targeted webhooks. */
@Injectable()
export class WebhookReceiversRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  async insert(r: WebhookReceiver): Promise<void> {
    await this.db.query(`INSERT INTO webhook_receivers (id, tenant_id, auth_method, secret_enc) VALUES ($1, $2, $3, $4)`, [
      r.id,
      r.tenantId,
      r.authMethod,
      r.secretEnc,
    ]);
  }

  /** A named prepared statement: inbound asks for a receiver whose digest is not cached. */
  async findInTenant(tenantId: string, id: string): Promise<WebhookReceiver | null> {
    const [r] = await preparedQuery<{ id: string; tenant_id: string; auth_method: ReceiverAuth; secret_enc: string }>(this.db, {
      name: 'cws_webhook_receivers_by_id',
      text: `SELECT id, tenant_id, auth_method, secret_enc FROM webhook_receivers WHERE tenant_id = $1 AND id = $2`,
      values: [tenantId, id],
    });
    return r ? { id: r.id, tenantId: r.tenant_id, authMethod: r.auth_method, secretEnc: r.secret_enc } : null;
  }

  async deleteInTenant(tenantId: string, id: string): Promise<void> {
    await this.db.query(`DELETE FROM webhook_receivers WHERE tenant_id = $1 AND id = $2`, [tenantId, id]);
  }
}
