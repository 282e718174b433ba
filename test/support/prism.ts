import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * Stoplight Prism as a validation proxy (`prism proxy <document> <service> --errors`) in front of a running
 * service: every request and answer is checked against the OpenAPI document. With --errors, a request the
 * document refuses is answered by Prism itself (401/422, never forwarded), an answer that breaks the document
 * becomes Prism's 500; every violation (an undeclared error status is only a warning) is logged as a
 * `Violation:` line and named in the answer's `sl-violations` header.
 */
export interface PrismProxy {
  url: string;
  /** Everything Prism wrote, stdout and stderr. */
  output(): string;
  /** Prism's lines that name a violation or a request it refused. */
  violations(): string[];
  close(): Promise<void>;
}

const PRISM_CLI = join(dirname(createRequire(import.meta.url).resolve('@stoplight/prism-cli/package.json')), 'dist', 'index.js');

export async function startPrismProxy(documentFile: string, serviceUrl: string, port: number): Promise<PrismProxy> {
  const child: ChildProcess = spawn(
    process.execPath,
    [PRISM_CLI, 'proxy', documentFile, serviceUrl, '--errors', '--host', '127.0.0.1', '--port', String(port)],
    {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NO_COLOR: '1', FORCE_COLOR: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString('utf8')));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString('utf8')));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const deadline = Date.now() + 60_000;
  while (!/Prism is listening on/.test(output)) {
    if (child.exitCode !== null) throw new Error(`prism exited before it listened:\n${output}`);
    if (Date.now() > deadline) {
      child.kill('SIGTERM');
      throw new Error(`prism did not listen in time:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url: `http://127.0.0.1:${port}`,
    output: () => output,
    violations: () => output.split('\n').filter((l) => /Violation:|Request terminated with error/.test(l)),
    async close() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
