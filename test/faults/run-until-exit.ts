import { spawn } from 'node:child_process';
import { MAIN_JS, ROOT } from '../support/spawn-app.js';

export interface Exited {
  code: number | null;
  output: string;
}

/** Runs `node dist/src/main.js` with this environment (nothing inherited but PATH and HOME) until it exits; kills it after `timeoutMs`. */
export function runUntilExit(env: Record<string, string>, timeoutMs = 60_000): Promise<Exited> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [MAIN_JS], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'warn', SANDBOX: 'off', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    proc.stdout.on('data', (d: Buffer) => (output += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** What every start-up failure must look like: exit code 1, one line naming the variable, no stack. */
export function oneLineNaming(result: Exited, variable: string): { code: number | null; lines: number; names: boolean; stack: boolean } {
  const lines = result.output.split('\n').filter((l) => l.trim());
  return {
    code: result.code,
    lines: lines.length,
    names: lines.length === 1 && lines[0].startsWith(`cws-connect cannot start: ${variable}: `),
    stack: /\n\s+at /.test(result.output),
  };
}
