import { TenantKeysAdmin } from '../vault/tenant-keys-admin.service.js';
import { TenantKeys } from '../vault/tenant-keys.service.js';
import { TokenVault } from '../vault/token-vault.service.js';
import { VaultInstancesRepository } from '../vault/vault-instances.repository.js';
import { envelopeSealable, HEARTBEATS_TO_EXPIRY } from '../vault/vault-instances.service.js';
import type { CliCommand, CliRuntime } from './cli-runtime.js';
import { RING_HOLD } from './vault-reencrypt.command.js';

/** Exit code of a run stopped by Ctrl-C (128 + SIGINT). */
const STOPPED = 130;

const USAGE = `usage: npm run cli -- keys <status [--json] | rotate-kek | rotate --tenant <id> [--resume] | set-kek --tenant <id> --kek <label or key name>>`;

/**
 * The tenants' data keys (docs/keys.md): `keys status` (per tenant: key version, KEK id, values per format; never key
 * material), `keys rotate-kek` (rewraps every data key under the active KEK; resumable, idempotent), `keys rotate
 * --tenant <id>` (a new data key version, the tenant's values re-sealed with it, older versions destroyed once unused),
 * `keys set-kek --tenant <id> --kek <name>` (the tenant's data keys rewrapped under a KEK of its own; resumable).
 */
export const keysCommand: CliCommand = {
  name: 'keys',
  summary:
    'tenant data keys: status, rotate-kek (rewrap under the active KEK), rotate --tenant <id> (a new data key), set-kek --tenant <id> --kek <name> (a KEK of its own)',
  async run(runtime, args) {
    const [sub, ...rest] = args;
    if (sub === 'status') return status(runtime, rest.includes('--json'));
    if (sub === 'rotate-kek') return rotateKek(runtime);
    const option = (name: string) => {
      const i = rest.indexOf(name);
      const value = i >= 0 ? rest[i + 1] : undefined;
      return value && !value.startsWith('--') ? value : undefined;
    };
    const tenantId = option('--tenant');
    if (sub === 'rotate' && tenantId) return rotateTenant(runtime, tenantId, rest.includes('--resume'));
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
    console.log(
      `${r.tenantId}: key version ${r.activeVersion ?? '-'}, KEK ${r.kekId ?? '-'}${own}, versions [${versions}], rows ${formats || 'none'}`,
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

async function rotateTenant(runtime: CliRuntime, tenantId: string, resume: boolean): Promise<number> {
  if (await refusedByLiveInstances(runtime, 'rotating')) return 1;
  if (!(await runtime.get(TokenVault)).sealsEnvelope) {
    console.error(
      'not rotating: a running instance does not open values under tenant data keys (an older release); finish the upgrade first.',
    );
    return 1;
  }
  const result = await (await runtime.get(TenantKeysAdmin)).rotateTenant(tenantId, resume, runtime.signal);
  if (!result.complete) {
    console.log(`stopped after re-sealing ${result.resealed} values. Run keys rotate --tenant ${tenantId} --resume to finish.`);
    return STOPPED;
  }
  console.log(`tenant ${tenantId}: data key version ${result.version}, ${result.resealed} values re-sealed with it.`);
  if (result.retired.length > 0) console.log(`retired (destroyed) versions: ${result.retired.join(', ')}.`);
  if (result.kept.length > 0) {
    console.log(
      `kept versions ${result.kept.join(', ')}: in use, or younger than KEY_CACHE_TTL (running instances may still seal with them); run keys rotate --tenant ${tenantId} --resume later to retire them.`,
    );
  }
  return 0;
}

async function setKek(runtime: CliRuntime, tenantId: string, kek: string): Promise<number> {
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
