import { Presets, SingleBar } from 'cli-progress';
import { TokenVault } from '../vault/token-vault.service.js';
import { VaultInstancesRepository } from '../vault/vault-instances.repository.js';
import { envelopeSealable, HEARTBEATS_TO_EXPIRY } from '../vault/vault-instances.service.js';
import { TenantKeys } from '../vault/tenant-keys.service.js';
import { type ReencryptResult, VaultReencryptService } from '../vault/vault-reencrypt.service.js';
import type { CliCommand } from './cli-runtime.js';

/** Exit code of a run stopped by Ctrl-C (128 + SIGINT), so that a script never goes on to drop a key. */
const STOPPED = 130;

export const vaultReencryptCommand: CliCommand = {
  name: 'vault:reencrypt',
  summary: 'move every stored secret to the active vault key (the first of VAULT_KEYS); safe to stop and re-run',
  async run(runtime) {
    const kid = (await runtime.get(TokenVault)).activeKid;
    // Moving values to a key that a live instance cannot open would fail that instance's calls: finish the roll first.
    const expiryMs = HEARTBEATS_TO_EXPIRY * runtime.config.vaultHeartbeatMs;
    const live = await (await runtime.get(VaultInstancesRepository)).live(expiryMs);
    const lacking = live.filter((i) => !i.keyIds.includes(kid));
    if (lacking.length > 0) {
      console.error(
        `not re-encrypting: ${lacking.length} running instance(s) (${lacking.map((i) => i.instanceId).join(', ')}) cannot open key "${kid}" yet; restart them with this VAULT_KEYS first (docs/operations.md, "Key rotation").`,
      );
      return 1;
    }
    // Values move to their tenants' data keys only when every running instance opens that format (else: to the ring's active key).
    (await runtime.get(TenantKeys)).envelope = envelopeSealable(live);
    const service = await runtime.get(VaultReencryptService);
    const bar = new SingleBar(
      { stream: process.stderr, format: 're-encrypting [{bar}] {value}/{total} secrets, {eta_formatted} left', hideCursor: true },
      Presets.legacy,
    );
    let barStarted = false;
    let result: ReencryptResult | null = null;
    try {
      result = await service.reencryptAll(
        (done, total) => {
          if (total === 0) return;
          if (!barStarted) {
            bar.start(total, done);
            barStarted = true;
          } else {
            bar.setTotal(total);
            bar.update(done);
          }
        },
        { signal: runtime.signal },
      );
    } catch (e) {
      // With the embedded database, Ctrl-C also reaches PostgreSQL (same process group), which then drops
      // our connection mid-batch. Every finished row is committed either way; report it as a stop.
      if (!runtime.signal.aborted) throw e;
    } finally {
      if (barStarted) bar.stop();
    }

    if (!result?.complete) {
      const done = result ? ` after ${result.reencrypted} of ${result.total} secrets` : '';
      console.log(`stopped${done}. Every secret still opens with the current VAULT_KEYS; run vault:reencrypt again to finish.`);
      return STOPPED;
    }
    if (result.total === 0 && result.reencrypted === 0) {
      console.log(`nothing to do: every stored secret is already under key "${kid}".`);
      return 0;
    }
    const concurrent = result.skippedConcurrent
      ? ` (${result.skippedConcurrent} were rewritten meanwhile by a running instance and were taken again or were already current)`
      : '';
    console.log(`re-encrypted ${result.reencrypted} secrets to key "${kid}"${concurrent}.`);
    console.log(
      'No stored secret is left under an older key: once every instance runs with this VAULT_KEYS, older keys can be removed from it.',
    );
    return 0;
  },
};
