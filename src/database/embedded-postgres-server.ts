// The embedded PostgreSQL's processes: the cluster's initdb, the server as a child, an orphan of an unclean stop shut down.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Binaries } from './embedded-postgres-binaries.js';
import { ids, lastLine, type RunAs } from './embedded-postgres-user.js';

/** Creates the cluster in `dir`: UTF-8, scram-sha-256, the password given through a file removed afterwards. */
export async function initdb(bin: Binaries, dataDir: string, dir: string, password: string, runAs: RunAs | null): Promise<void> {
  mkdirSync(dir, { mode: 0o700 });
  const pwfile = join(dataDir, `.pwfile-${randomBytes(6).toString('hex')}`);
  writeFileSync(pwfile, password + '\n', { mode: 0o600 });
  if (runAs) {
    chownSync(dir, runAs.uid, runAs.gid);
    chownSync(pwfile, runAs.uid, runAs.gid);
  }
  try {
    // UTF-8 with PostgreSQL's own C.UTF-8 collation: the same cluster whatever the machine's locales.
    const args = [
      `--pgdata=${dir}`,
      '--auth=scram-sha-256',
      '--username=postgres',
      `--pwfile=${pwfile}`,
      '--encoding=UTF8',
      '--locale=C',
      '--locale-provider=builtin',
      '--builtin-locale=C.UTF-8',
    ];
    await run(bin.initdb, args, runAs);
  } finally {
    rmSync(pwfile, { force: true });
  }
}

function run(file: string, args: string[], runAs: RunAs | null): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...ids(runAs), env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', (e: NodeJS.ErrnoException) =>
      reject(new Error(`the embedded PostgreSQL's ${file} could not run (${e.code ?? e.message})`)),
    );
    child.once('close', (code, signal) => {
      if (code === 0) resolve();
      else
        reject(
          new Error(
            `the embedded PostgreSQL's ${file} failed (${signal ?? `exit code ${code}`})${stderr.trim() ? `: ${lastLine(stderr)}` : ''}`,
          ),
        );
    });
  });
}

/**
 * Starts the server as a child in its own process group, so that a Ctrl-C reaches the service alone,
 * which closes its HTTP server and pool before it stops PostgreSQL. An exit of this process by any other
 * way stops the server too; a SIGKILL leaves it running, and the next start shuts that orphan down.
 */
export function startServer(bin: Binaries, dir: string, port: number, runAs: RunAs | null): Promise<{ stop(): Promise<void> }> {
  const flags = ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300'];
  const child = spawn(bin.postgres, ['-D', dir, '-p', String(port), ...flags], {
    ...ids(runAs),
    env: { ...process.env, LC_ALL: 'C' },
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const stopOnExit = () => child.kill('SIGINT');
  process.once('exit', stopOnExit);
  const stop = async () => {
    process.removeListener('exit', stopOnExit);
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGINT'); // fast shutdown: open sessions are ended, the cluster is left consistent
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000).unref())]);
  };

  return new Promise((resolve, reject) => {
    // PostgreSQL logs to stderr for as long as it runs: keep reading it (a full pipe would block the
    // server), and keep the last lines to say why it stopped, should it stop during start-up.
    const recent: string[] = [];
    let ready = false;
    child.stderr?.on('data', (d: Buffer) => {
      for (const line of d.toString().split('\n')) {
        if (!line.trim()) continue;
        recent.push(line.trim());
        if (recent.length > 5) recent.shift();
        if (!ready && line.includes('database system is ready to accept connections')) {
          ready = true;
          resolve({ stop });
        }
      }
    });
    child.once('error', (e: NodeJS.ErrnoException) => {
      process.removeListener('exit', stopOnExit);
      reject(new Error(`the embedded PostgreSQL could not run ${bin.postgres} (${e.code ?? e.message})`));
    });
    child.once('close', (code, signal) => {
      process.removeListener('exit', stopOnExit);
      if (!ready) {
        const why = recent.find((l) => /FATAL|ERROR|PANIC/.test(l)) ?? recent.at(-1) ?? `${signal ?? `exit code ${code}`}`;
        reject(new Error(`the embedded PostgreSQL in ${dir} did not start: ${why}`));
      }
    });
  });
}

/** Removes a stale postmaster.pid, or shuts down the orphaned server of an earlier unclean stop (refused when a live process owns it). */
export async function stopOrphan(dir: string, log: (msg: string) => void): Promise<void> {
  const pidFile = join(dir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) {
    log('removing a stale postmaster.pid left by an unclean stop');
    unlinkSync(pidFile);
    return;
  }
  const parent = parentOf(pid);
  if (parent !== null && parent !== 1 && alive(parent) && parent !== process.pid) {
    throw new Error(
      `the embedded PostgreSQL in ${dir} is in use by another running process (postgres pid ${pid}, parent ${parent}); stop it or use another DATA_DIR`,
    );
  }
  log(`stopping an orphaned embedded PostgreSQL (pid ${pid}) left by an earlier unclean stop`);
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 15_000;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (alive(pid)) process.kill(pid, 'SIGKILL');
  while (existsSync(pidFile) && alive(pid)) await new Promise((r) => setTimeout(r, 50));
  if (existsSync(pidFile)) unlinkSync(pidFile);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function parentOf(pid: number): number | null {
  try {
    // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}
