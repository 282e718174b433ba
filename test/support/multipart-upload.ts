import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';

const CHUNK = 1024 * 1024;

/** VmRSS / VmHWM of a process, in bytes. */
export function memoryOf(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/**
 * Streams a multipart body of `size` file bytes, generated on the fly (a random 1 MiB block repeated with a
 * changing counter, so no two chunks are alike), hashing what it sends. Never holds the body in memory.
 */
export function uploadMultipart(
  url: string,
  headers: Record<string, string>,
  size: number,
): Promise<{ status: number; text: string; sha256: string }> {
  const boundary = `----cws${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\nBig contract\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="contract"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const block = randomBytes(CHUNK);
  const hash = createHash('sha256');
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: 'POST',
      headers: {
        ...headers,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': String(head.length + size + tail.length),
      },
    });
    let sent = 0;
    const pump = () => {
      while (sent < size) {
        const n = Math.min(CHUNK, size - sent);
        const chunk = Buffer.from(block.subarray(0, n));
        chunk.writeUInt32BE(sent / CHUNK, 0);
        hash.update(chunk);
        sent += n;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      req.end(tail);
    };
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8'), sha256: hash.digest('hex') }),
      );
    });
    req.on('error', reject);
    req.write(head);
    pump();
  });
}
