import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './spawn-app.js';

/** Debian's SoftHSM2 module. */
export const SOFTHSM_MODULE = '/usr/lib/softhsm/libsofthsm2.so';

/**
 * Makes sure Debian's SoftHSM2 is installed, so that the PKCS#11 suite passes on a fresh machine: installed once per
 * machine with apt-get when missing and this is root (as test/support/chromium.ts installs Chromium); otherwise the
 * run stops here, saying how to install it.
 */
export function ensureSoftHsm(): void {
  if (existsSync(SOFTHSM_MODULE)) return;
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) {
    throw new Error(`the PKCS#11 suite needs SoftHSM2 at ${SOFTHSM_MODULE}: install it first (sudo apt-get install -y softhsm2)`);
  }
  console.log(`\nSoftHSM2 is missing: installing Debian's softhsm2 package for the PKCS#11 suite (once per machine)...`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'softhsm2'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  if (!existsSync(SOFTHSM_MODULE)) throw new Error(`apt-get installed softhsm2, but ${SOFTHSM_MODULE} is still missing`);
}

export interface SoftHsmToken {
  /** The variables an instance needs for KEY_STORE=pkcs11 on this token (SOFTHSM2_CONF included). */
  env: Record<string, string>;
  pin: string;
  /** Removes the token and its key: from then on the key store cannot be reached. */
  destroy(): void;
  /** Destroys one key of the token (as an operator destroys a deleted tenant's own KEK). */
  destroyKey(label: string): void;
}

/**
 * A SoftHSM2 token of its own in a temporary directory (SOFTHSM2_CONF), with an AES-256 KEK generated on the token
 * (sensitive, not extractable), through pkcs11js in a child process of this project's Node.
 */
export function createSoftHsmToken(
  label = 'cws-test',
  kekLabel = 'cws-kek',
  moreKeks: string[] = [],
  where: 'own directory' | 'system token directory' = 'own directory',
): SoftHsmToken {
  ensureSoftHsm();
  // A token of its own (SOFTHSM2_CONF) for instances spawned as processes; a test that loads the module in jest's
  // own process, where SOFTHSM2_CONF cannot be set for the C library, uses Debian's default token directory with
  // a token label of its own, and destroys the token at the end.
  let conf = '';
  if (where === 'own directory') {
    const dir = mkdtempSync(join(tmpdir(), 'cws-softhsm-'));
    mkdirSync(join(dir, 'tokens'));
    conf = join(dir, 'softhsm2.conf');
    writeFileSync(conf, `directories.tokendir = ${join(dir, 'tokens')}\nobjectstore.backend = file\nlog.level = ERROR\n`);
  }
  const pin = String(100000 + Math.floor(Math.random() * 900000));
  const env: NodeJS.ProcessEnv = { ...process.env };
  if (conf) env.SOFTHSM2_CONF = conf;
  else delete env.SOFTHSM2_CONF;
  execFileSync('softhsm2-util', ['--init-token', '--free', '--label', label, '--pin', pin, '--so-pin', `${pin}0`], {
    env,
    stdio: 'ignore',
  });
  const generate = `
    const p11 = require('pkcs11js');
    const m = new p11.PKCS11();
    m.load(${JSON.stringify(SOFTHSM_MODULE)});
    m.C_Initialize();
    const slot = m.C_GetSlotList(true).find((s) => m.C_GetTokenInfo(s).label.trim() === ${JSON.stringify(label)});
    const s = m.C_OpenSession(slot, p11.CKF_SERIAL_SESSION | p11.CKF_RW_SESSION);
    m.C_Login(s, p11.CKU_USER, process.env.TOKEN_PIN);
    for (const kek of ${JSON.stringify([kekLabel, ...moreKeks])}) {
      m.C_GenerateKey(s, { mechanism: p11.CKM_AES_KEY_GEN }, [
        { type: p11.CKA_CLASS, value: p11.CKO_SECRET_KEY }, { type: p11.CKA_KEY_TYPE, value: p11.CKK_AES },
        { type: p11.CKA_VALUE_LEN, value: 32 }, { type: p11.CKA_LABEL, value: kek },
        { type: p11.CKA_TOKEN, value: true }, { type: p11.CKA_ENCRYPT, value: true }, { type: p11.CKA_DECRYPT, value: true },
        { type: p11.CKA_SENSITIVE, value: true }, { type: p11.CKA_EXTRACTABLE, value: false },
      ]);
    }
    m.C_Logout(s);
    m.C_Finalize();`;
  execFileSync(process.execPath, ['-e', generate], { cwd: ROOT, env: { ...env, TOKEN_PIN: pin }, stdio: ['ignore', 'ignore', 'inherit'] });
  return {
    pin,
    env: {
      ...(conf ? { SOFTHSM2_CONF: conf } : {}),
      KEY_STORE: 'pkcs11',
      PKCS11_MODULE: SOFTHSM_MODULE,
      PKCS11_TOKEN_LABEL: label,
      PKCS11_PIN: pin,
      PKCS11_KEK_LABEL: kekLabel,
    },
    destroy() {
      execFileSync('softhsm2-util', ['--delete-token', '--token', label], { env, stdio: 'ignore' });
    },
    destroyKey(kek: string) {
      const script = `
        const p11 = require('pkcs11js');
        const m = new p11.PKCS11();
        m.load(${JSON.stringify(SOFTHSM_MODULE)});
        m.C_Initialize();
        const slot = m.C_GetSlotList(true).find((s) => m.C_GetTokenInfo(s).label.trim() === ${JSON.stringify(label)});
        const s = m.C_OpenSession(slot, p11.CKF_SERIAL_SESSION | p11.CKF_RW_SESSION);
        m.C_Login(s, p11.CKU_USER, process.env.TOKEN_PIN);
        m.C_FindObjectsInit(s, [{ type: p11.CKA_CLASS, value: p11.CKO_SECRET_KEY }, { type: p11.CKA_LABEL, value: ${JSON.stringify(kek)} }]);
        const found = m.C_FindObjects(s, 10);
        m.C_FindObjectsFinal(s);
        if (found.length !== 1) throw new Error('expected one key labelled ' + ${JSON.stringify(kek)} + ', found ' + found.length);
        m.C_DestroyObject(s, found[0]);
        m.C_Logout(s);
        m.C_Finalize();`;
      execFileSync(process.execPath, ['-e', script], {
        cwd: ROOT,
        env: { ...env, TOKEN_PIN: pin },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
    },
  };
}
