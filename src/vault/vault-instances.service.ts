import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { databaseOutage, isDatabaseUnavailable } from '../common/database-outage.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { TenantKeys } from './tenant-keys.service.js';
import { TokenVault } from './token-vault.service.js';
import { type LiveInstance, VaultInstancesRepository } from './vault-instances.repository.js';
import { VaultRepository } from './vault.repository.js';

/** An instance unseen for this many heartbeats is gone: its row is ignored, then deleted. */
export const HEARTBEATS_TO_EXPIRY = 3;

/**
 * What an instance lists among its key ids to say that it opens the envelope format (values sealed with a tenant's
 * data key). Not a key id (a kid has no ':'), so a release that only compares key ids ignores it. It lives in
 * key_ids rather than a column of its own because release 0.2.0 rewrites key_ids at every heartbeat: an instance
 * downgraded under the same INSTANCE_ID stops advertising at its first beat.
 */
export const ENVELOPE_CAPABILITY = 'format:envelope-v2';

/** Whether every live instance opens the envelope format: only then may new values be sealed in it. */
export function envelopeSealable(live: readonly LiveInstance[]): boolean {
  return live.every((i) => i.keyIds.includes(ENVELOPE_CAPABILITY));
}

/**
 * The first key of `ring` that every live instance holds (their key ids in `live`), else null. The active key
 * once every instance has it; until then the previous one, which the new ring must still hold (docs/operations.md,
 * "Key rotation").
 */
export function sealingKeyOf(ring: readonly string[], live: readonly LiveInstance[]): string | null {
  return ring.find((kid) => live.every((i) => i.keyIds.includes(kid))) ?? null;
}

/**
 * A key seals only once every live instance can open it. Each instance records its key ids in vault_instances
 * at start (before it serves) and every VAULT_HEARTBEAT_MS, re-reads the others' and seals with the first key
 * of its ring they all hold. A rolling restart that puts a new key first therefore keeps sealing with the old
 * key while an instance without the new one lives, and moves to the new key at the first heartbeat after the
 * last such instance is gone: one heartbeat after a clean stop (its row is deleted), at most HEARTBEATS_TO_EXPIRY
 * + 1 heartbeats after a crash. A periodic re-read rather than the change feed: the bound is simple and a
 * few rows are read every few seconds.
 *
 * The same heartbeat decides the format of new values: each instance advertises ENVELOPE_CAPABILITY, and values
 * are sealed with the tenants' data keys only while every live instance does (release 0.2.0 registers without it,
 * so while one of those runs, values stay in the ring's format it reads).
 *
 * Limit, stated: an instance that does not register (a release before 0.2.0) is invisible here, so upgrade every
 * instance before rotating. An instance whose heartbeat stalls for HEARTBEATS_TO_EXPIRY beats while it still
 * serves can meet a value under a key it lacks; it answers 503 for it (TokenVault's ringBehind) and marks nothing.
 */
@Injectable()
export class VaultInstances implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger(VaultInstances.name);
  private timer: NodeJS.Timeout | null = null;
  private beating: Promise<void> | null = null;
  private warnedNoCommonKey = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(TokenVault) private readonly vault: TokenVault,
    @Inject(VaultInstancesRepository) private readonly instances: VaultInstancesRepository,
    @Inject(VaultRepository) private readonly keyChecks: VaultRepository,
    @Inject(TenantKeys) private readonly tenantKeys: TenantKeys,
  ) {}

  async onModuleInit(): Promise<void> {
    try {
      await this.beat();
    } catch (e) {
      // Not migrated yet: readiness reports the pending migration, and the heartbeat registers once it is applied.
      if (!isUndefinedTable(e)) throw e;
    }
    this.timer = setInterval(() => {
      this.beating ??= this.beat()
        .catch((e: unknown) =>
          isDatabaseUnavailable(e)
            ? databaseOutage.report(e, 'background')
            : this.logger.warn({ error: e instanceof Error ? e.message : 'unknown' }, 'vault heartbeat failed; will retry'),
        )
        .finally(() => (this.beating = null));
    }, this.config.vaultHeartbeatMs);
    this.timer.unref();
  }

  /** After the drain and the last renewals: from now on this instance opens nothing, so the others may move on. */
  async beforeApplicationShutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.beating;
    await this.instances.remove(this.config.instanceId).catch(() => undefined);
  }

  /** Records this instance, re-reads the others, and picks the key to seal with. */
  async beat(): Promise<void> {
    const ring = this.vault.keyIds();
    const live = await this.instances.heartbeat(
      this.config.instanceId,
      [...ring, ENVELOPE_CAPABILITY],
      HEARTBEATS_TO_EXPIRY * this.config.vaultHeartbeatMs,
    );
    this.tenantKeys.envelope = envelopeSealable(live);
    const recorded = await this.keyChecks.listKeyChecks();
    this.vault.knownElsewhere([...live.flatMap((i) => i.keyIds), ...recorded.map((c) => c.kid)]);
    const kid = sealingKeyOf(ring, live);
    if (kid === null) {
      if (!this.warnedNoCommonKey)
        this.logger.warn(
          { instances: live.map((i) => ({ instance: i.instanceId, keyIds: i.keyIds })) },
          'no key of VAULT_KEYS is held by every live instance: sealing with the first; keep the previous active key in every ring until the roll ends',
        );
      this.warnedNoCommonKey = true;
      return;
    }
    this.warnedNoCommonKey = false;
    if (kid === this.vault.sealingKid) return;
    this.vault.sealWithKey(kid);
    const lacking = live.filter((i) => !i.keyIds.includes(this.vault.activeKid)).map((i) => i.instanceId);
    this.logger.log({ kid, activeKid: this.vault.activeKid, lacking }, `vault: new secrets are sealed with key "${kid}"`);
  }
}

function isUndefinedTable(e: unknown): boolean {
  const code = (e as { code?: unknown }).code ?? (e as { driverError?: { code?: unknown } }).driverError?.code;
  return code === '42P01';
}
