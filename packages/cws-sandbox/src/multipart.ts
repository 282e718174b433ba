import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import busboy from 'busboy';
import { SandboxHttpError } from './http-io.js';

export interface UploadedFile {
  readonly fieldName: string;
  readonly fileName: string;
  readonly contentType: string;
  readonly size: number;
  readonly sha256: string;
}

export interface MultipartBody {
  readonly fields: ReadonlyArray<{ readonly name: string; readonly value: string }>;
  readonly files: readonly UploadedFile[];
  /** Limits that were hit; the body was still read to its end so that the answer can be sent cleanly. */
  readonly problems: readonly string[];
}

const LIMITS = { fieldNameSize: 200, fieldSize: 64 * 1024, fields: 200, files: 50, parts: 250 };

/**
 * Reads a multipart/form-data body. File parts are streamed through SHA-256 and counted, never held in
 * memory, so a part may be of any size (the e2e suite uploads 1 GiB).
 */
export function readMultipart(req: IncomingMessage): Promise<MultipartBody> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: req.headers, limits: LIMITS });
    } catch {
      reject(new SandboxHttpError(400, 'invalid_multipart', 'The content-type is not multipart/form-data with a boundary'));
      return;
    }
    const fields: Array<{ name: string; value: string }> = [];
    const files: UploadedFile[] = [];
    const problems: string[] = [];
    const fileEnds: Array<Promise<void>> = [];
    let failed = false;
    const fail = (error: Error) => {
      if (failed) return;
      failed = true;
      req.unpipe(parser);
      req.resume();
      reject(error);
    };

    parser.on('file', (fieldName: string, stream: NodeJS.ReadableStream, info: busboy.FileInfo) => {
      const slot = files.length;
      files.length++;
      const hash = createHash('sha256');
      let size = 0;
      fileEnds.push(
        new Promise<void>((done, broken) => {
          stream.on('data', (chunk: Buffer) => {
            hash.update(chunk);
            size += chunk.length;
          });
          stream.once('end', () => {
            files[slot] = { fieldName, fileName: info.filename ?? fieldName, contentType: info.mimeType, size, sha256: hash.digest('hex') };
            done();
          });
          stream.once('error', broken);
        }),
      );
    });
    parser.on('field', (name: string, value: string, info: busboy.FieldInfo) => {
      if (info.nameTruncated || info.valueTruncated) problems.push(`field ${name} exceeds ${LIMITS.fieldSize} bytes`);
      else fields.push({ name, value });
    });
    parser.on('partsLimit', () => problems.push(`more than ${LIMITS.parts} parts`));
    parser.on('filesLimit', () => problems.push(`more than ${LIMITS.files} files`));
    parser.on('fieldsLimit', () => problems.push(`more than ${LIMITS.fields} fields`));
    parser.once('error', () => fail(new SandboxHttpError(400, 'invalid_multipart', 'The multipart body is malformed')));
    parser.once('close', () => {
      Promise.all(fileEnds).then(
        () => {
          if (!failed) resolve({ fields, files: files.filter((f) => f !== undefined), problems });
        },
        (e: Error) => fail(e),
      );
    });
    req.once('error', fail);
    req.once('close', () => {
      if (!req.complete) fail(new Error('request aborted'));
    });
    req.pipe(parser);
  });
}
