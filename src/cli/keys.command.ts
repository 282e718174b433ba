import { hostname } from 'node:os';
import { TenantsRepository } from '../tenants/tenants.repository.js';
import { type ForegroundReseal, TenantKeysAdmin } from '../vault/tenant-keys-admin.service.js';
import { TenantKeys } from '../vault/tenant-keys.service.js';
import { TokenVault } from '../vault/token-vault.service.js';
import { VaultInstancesRepository } from '../vault/vault-instances.repository.js';
import { envelopeSealable, HEARTBEATS_TO_EXPIRY } from '../vault/vault-instances.service.js';
import type { CliCommand, CliRuntime } from './cli-runtime.js';
import { RING_HOLD } from './vault-reencrypt.command.js';

/** Exit code of a run stopped by Ctrl-C (128 + SIGINT). */
const STOPPED = 130;

const USAGE = `usage: npm run cli -- keys <status [--json] | rotate-kek | rotate --tenant <id> [--wait | --resume] | set-kek --tenant <id> --kek <label or key name>>`;

/**
 * The tenants' data keys (docs/keys.md): `keys status` (per tenant: key version, KEK id, values per format; never key
 * material, the re-seal's progress), `keys rotate-kek` (rewraps every data key under the active KEK; resumable,
 * idempotent), `keys rotate --tenant <id>` (a new data key version; the running instances re-seal the tenant's values
 * with it in the background and destroy the older versions once unused; `--wait` does it here, `--resume` finishes
 * it here without a new version), `keys set-kek --tenant <id> --kek <name>` (the tenant's data keys rewrapped under a
 * KEK of its own; resumable).
 */
export const keysCommand: CliCommand = {
  name: 'keys',
  summary:
    'tenant data keys: status, rotate-kek (rewrap under the active KEK), rotate --tenant <id> (a new data key), set-kek --tenant <id> --kek <name> (a KEK of its own)',
  async run(runtime, args) {
    const [sub, ...rest] = args;
    if (sub === 'status') return status(runtime, rest.includes('--json'));
    if (sub === 'rotate-kek') return rotateKek(runtime);
    if (sub === 'rotate') {
      const i = rest.indexOf('--tenant');
      const tenantId = i >= 0 ? rest[i + 1] : undefined;
      if (!tenantId) {
        console.error(USAGE);
        return 1;
      }
      const unknown = rest.filter((a, n) => n !== i && n !== i + 1 && a !== '--wait' && a !== '--resume');
      if (unknown.length > 0 || (rest.includes('--wait') && rest.includes('--resume'))) {
        console.error(USAGE);
        return 1;
      }
      return rotateTenant(runtime, tenantId, rest.includes('--resume') ? 'resume' : rest.includes('--wait') ? 'wait' : 'background');
    }
    const option = (name: string) => {
      const i = rest.indexOf(name);
      const value = i >= 0 ? rest[i + 1] : undefined;
      return value && !value.startsWith('--') ? value : undefined;
    };
    const tenantId = option('--tenant');
    const kek = option('--kek');
    if (sub === 'set-kek' && tenantId && kek) return setKek(runtime, tenantId, kek);
    console.error(USAGE);
    return 1;
  },
};

async function status(runtime: CliRuntime, json: boolean): Promise<number> {
  const rows = await (await runtime.get(TenantKeysAdmin)).status();
  const store = (await runtime.get(TenantKeys)).store.describe();
  if (json) {
    console.log(JSON.stringify({ keyStore: store, tenants: rows }, null, 2));
    return 0;
  }
  console.log(`key store: ${store.store}, active KEK ${store.kekId}`);
  for (const r of rows) {
    const formats = Object.entries(r.rows)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([f, n]) => `${f}=${n}`)
      .join(' ');
    const versions = r.versions.map((v) => `${v.version}${v.destroyed ? ' (destroyed)' : ''}`).join(', ');
    const own = r.ownKek ? ` (its own: ${r.ownKek})` : '';
    const reseal = r.reseal
      ? `, re-seal to ${r.reseal.version}: ${r.reseal.state}, ${r.reseal.resealed} re-sealed, ${r.reseal.left} left${r.reseal.worker ? ` (by ${r.reseal.worker})` : ''}`
      : '';
    console.log(
      `${r.tenantId}: key version ${r.activeVersion ?? '-'}, KEK ${r.kekId ?? '-'}${own}, versions [${versions}], rows ${formats || 'none'}${reseal}`,
    );
  }
  return 0;
}

/** The KEK must be one every running instance holds (KEY_STORE=local: the active key of VAULT_KEYS). */
async function refusedByLiveInstances(runtime: CliRuntime, what: string): Promise<boolean> {
  const vault = await runtime.get(TokenVault);
  const keys = await runtime.get(TenantKeys);
  const live = await (await runtime.get(VaultInstancesRepository)).live(HEARTBEATS_TO_EXPIRY * runtime.config.vaultHeartbeatMs);
  keys.envelope = envelopeSealable(live);
  if (keys.store.kind !== 'local') return false;
  const lacking = live.filter((i) => i.instanceId !== RING_HOLD && !i.keyIds.includes(vault.activeKid));
  if (lacking.length === 0) return false;
  console.error(
    `not ${what}: ${lacking.length} running instance(s) (${lacking.map((i) => i.instanceId).join(', ')}) cannot open key "${vault.activeKid}" yet; restart them with this VAULT_KEYS first.`,
  );
  return true;
}

async function rotateKek(runtime: CliRuntime): Promise<number> {
  if (await refusedByLiveInstances(runtime, 'rewrapping')) return 1;
  const kekId = (await runtime.get(TenantKeys)).store.describe().kekId;
  const result = await (await runtime.get(TenantKeysAdmin)).rotateKek(runtime.signal);
  if (!result.complete) {
    console.log(
      `stopped after ${result.rewrapped} of ${result.total} data keys. Every key still unwraps; run keys rotate-kek again to finish.`,
    );
    return STOPPED;
  }
  if (result.total === 0) {
    console.log(`nothing to do: every data key is wrapped by ${kekId}.`);
    return 0;
  }
  console.log(`rewrapped ${result.rewrapped} data keys under ${kekId}; no tenant value was touched.`);
  return 0;
}

/** A key command names a tenant that exists and is not deleted (a deleted one's keys are destroyed); else it says so. */
async function refusedAsUnknown(runtime: CliRuntime, tenantId: string): Promise<boolean> {
  if (await (await runtime.get(TenantsRepository)).exists(tenantId)) return false;
  console.error(`no tenant "${tenantId}" (or it was deleted): nothing changed.`);
  return true;
}

async function rotateTenant(runtime: CliRuntime, tenantId: string, mode: 'background' | 'wait' | 'resume'): Promise<number> {
  if (await refusedAsUnknown(runtime, tenantId)) return 1;
  if (await refusedByLiveInstances(runtime, 'rotating')) return 1;
  if (!(await runtime.get(TokenVault)).sealsEnvelope) {
    console.error(
      'not rotating: a running instance does not open values under tenant data keys (an older release); finish the upgrade first.',
    );
    return 1;
  }
  const admin = await runtime.get(TenantKeysAdmin);
  if (mode !== 'resume') {
    const version = await admin.rotateTenant(tenantId);
    console.log(`tenant ${tenantId}: data key version ${version}; new values are sealed with it.`);
    if (mode === 'background') {
      const running = (
        await (await runtime.get(VaultInstancesRepository)).live(HEARTBEATS_TO_EXPIRY * runtime.config.vaultHeartbeatMs)
      ).filter((i) => i.instanceId !== RING_HOLD);
      console.log(
        running.length > 0
          ? `the running instances re-seal its values in the background; keys status shows the progress.`
          : `no instance is running: its values are re-sealed once one starts, or now with keys rotate --tenant ${tenantId} --resume.`,
      );
      return 0;
    }
  }
  return foreground(runtime, admin, tenantId);
}

/** The tenant's re-seal run here; while a running instance holds it, waits for that instance (Ctrl-C stops waiting). */
async function foreground(runtime: CliRuntime, admin: TenantKeysAdmin, tenantId: string): Promise<number> {
  const owner = `cli:${hostname()}:${process.pid}`;
  let said = '';
  for (;;) {
    let run: ForegroundReseal;
    try {
      run = await admin.resealNow(tenantId, owner, runtime.signal);
    } catch (e) {
      // With the embedded database, Ctrl-C also reaches PostgreSQL; the progress of every finished batch is stored.
      if (!runtime.signal.aborted) throw e;
      run = { tenantId, version: 0, outcome: 'stopped', resealed: 0, resealedInAll: 0, retired: [], kept: [] };
    }
    if (run.heldBy !== undefined) {
      if (said !== run.heldBy)
        console.log(`${run.heldBy} is re-sealing tenant ${tenantId}'s values; waiting for it (Ctrl-C stops waiting, not the re-seal).`);
      said = run.heldBy;
      await new Promise((r) => setTimeout(r, 1000));
      if (runtime.signal.aborted) return STOPPED;
      continue;
    }
    if (run.outcome === 'stopped' || run.outcome === 'lost') {
      console.log(
        `stopped after re-sealing ${run.resealed} values (progress kept). The running instances go on, or run keys rotate --tenant ${tenantId} --resume.`,
      );
      return STOPPED;
    }
    console.log(`tenant ${tenantId}: data key version ${run.version}, ${run.resealedInAll} values re-sealed with it.`);
    if (run.retired.length > 0) console.log(`retired (destroyed) versions: ${run.retired.join(', ')}.`);
    if (run.kept.length > 0) {
      console.log(
        `kept versions ${run.kept.join(', ')}: younger than KEY_CACHE_TTL (running instances may still seal with them); the running instances destroy them later, or run keys rotate --tenant ${tenantId} --resume then.`,
      );
    }
    return 0;
  }
}

async function setKek(runtime: CliRuntime, tenantId: string, kek: string): Promise<number> {
  if (await refusedAsUnknown(runtime, tenantId)) return 1;
  let result;
  try {
    result = await (await runtime.get(TenantKeysAdmin)).setKek(tenantId, kek, runtime.signal);
  } catch (e) {
    console.error(`not setting the KEK of tenant ${tenantId}: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
  if (!result.complete) {
    console.log(
      `stopped after ${result.rewrapped} of ${result.total} data keys. Every key still unwraps; run keys set-kek --tenant ${tenantId} --kek ${kek} again to finish.`,
    );
    return STOPPED;
  }
  console.log(
    `tenant ${tenantId}: ${result.rewrapped} data key version(s) rewrapped under ${result.kekId}; new versions are wrapped by it. Once the tenant is deleted, destroying "${kek}" in the key store makes every copy of its data keys unreadable.`,
  );
  return 0;
}
