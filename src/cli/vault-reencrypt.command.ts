import { Presets, SingleBar } from 'cli-progress';
import { TokenVault } from '../vault/token-vault.service.js';
import { VaultInstancesRepository } from '../vault/vault-instances.repository.js';
import { envelopeSealable, HEARTBEATS_TO_EXPIRY } from '../vault/vault-instances.service.js';
import { TenantKeysAdmin } from '../vault/tenant-keys-admin.service.js';
import { TenantKeys } from '../vault/tenant-keys.service.js';
import { type ReencryptResult, VaultReencryptService } from '../vault/vault-reencrypt.service.js';
import { TenantsRepository } from '../tenants/tenants.repository.js';
import type { CliCommand } from './cli-runtime.js';

/** Exit code of a run stopped by Ctrl-C (128 + SIGINT), so that a script never goes on to drop a key. */
const STOPPED = 130;

/**
 * The vault_instances row of `vault:reencrypt --to-ring`: live until a plain `vault:reencrypt` removes it, it keeps
 * every running instance sealing with the ring (it does not advertise the envelope format), as a rollback needs.
 */
export const RING_HOLD = 'hold:ring-format';

/** The deleted tenants still being purged that a run passes over, at most. */
const DELETED_AT_MOST = 10_000;

export const vaultReencryptCommand: CliCommand = {
  name: 'vault:reencrypt',
  summary:
    "move every stored secret to the active vault key, or to its tenant's data key once every instance opens that format; --to-ring: every secret back to the ring (before a rollback to 0.2.0); safe to stop and re-run",
  async run(runtime, args) {
    const toRing = args.includes('--to-ring');
    const unknown = args.filter((a) => a !== '--to-ring');
    if (unknown.length > 0) {
      console.error(`vault:reencrypt: unknown argument "${unknown[0]}" (the only one is --to-ring)`);
      return 1;
    }
    const vault = await runtime.get(TokenVault);
    const kid = vault.activeKid;
    const instances = await runtime.get(VaultInstancesRepository);
    const expiryMs = HEARTBEATS_TO_EXPIRY * runtime.config.vaultHeartbeatMs;
    if (toRing) {
      // From now on running instances seal with the ring (at their next heartbeat); wait for it before moving anything.
      await instances.hold(RING_HOLD, vault.keyIds());
      const running = (await instances.live(expiryMs)).filter((i) => i.instanceId !== RING_HOLD);
      if (running.length > 0 && envelopeSealable(running))
        await new Promise((r) => setTimeout(r, 2 * runtime.config.vaultHeartbeatMs + 500));
    } else {
      await instances.remove(RING_HOLD);
    }
    // Moving values to a key that a live instance cannot open would fail that instance's calls: finish the roll first.
    const live = await instances.live(expiryMs);
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
        // A deleted tenant's rows not purged yet: its data keys are destroyed, they never move to or from one.
        { signal: runtime.signal, toRing, passOver: await (await runtime.get(TenantsRepository)).listDeleted(DELETED_AT_MOST) },
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
    // KEY_STORE=local: the tenants' data keys are wrapped by the ring as well; the same run rewraps them under the
    // active key (keys rotate-kek's work), so that the old key can leave VAULT_KEYS after one command, as before.
    if (!toRing && (await runtime.get(TenantKeys)).store.kind === 'local') {
      const rewrap = await (await runtime.get(TenantKeysAdmin)).rotateKek(runtime.signal);
      if (!rewrap.complete) {
        console.log(
          `stopped after rewrapping ${rewrap.rewrapped} of ${rewrap.total} tenant data keys; run vault:reencrypt again to finish.`,
        );
        return STOPPED;
      }
      if (rewrap.rewrapped > 0) console.log(`rewrapped ${rewrap.rewrapped} tenant data keys under key "${kid}".`);
    }
    const where = toRing || !vault.sealsEnvelope ? `key "${kid}"` : "its tenant's data key";
    if (toRing) {
      console.log(
        `moved ${result.reencrypted} secrets to ${where}. Every stored secret is in the format release 0.2.0 reads; new ones stay in it until vault:reencrypt runs without --to-ring.`,
      );
      return 0;
    }
    if (result.total === 0 && result.reencrypted === 0) {
      console.log(`nothing to do: every stored secret is already under ${where}.`);
      return 0;
    }
    const concurrent = result.skippedConcurrent
      ? ` (${result.skippedConcurrent} were rewritten meanwhile by a running instance and were taken again or were already current)`
      : '';
    console.log(`re-encrypted ${result.reencrypted} secrets to ${where}${concurrent}.`);
    console.log(
      'No stored secret is left under an older key: once every instance runs with this VAULT_KEYS, older keys can be removed from it.',
    );
    return 0;
  },
};
