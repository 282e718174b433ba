import express, { type NextFunction, type Request, type Response } from 'express';
import { AppError } from './app-error.js';

/**
 * How deeply arrays and objects may nest in a request body. Validation and serialisation walk a value
 * recursively, so a body nested thousands of levels deep would overflow the stack there; no document of
 * this API or of the upstream's deliveries comes near this.
 */
export const JSON_MAX_DEPTH = 64;

/**
 * Members of one JSON object. V8's JSON.parse slows down sharply on an object with tens of thousands of keys
 * (64,000 cost 100–280 ms on one core), so a body is refused before parsing when one object passes this.
 */
export const JSON_MAX_KEYS = 1000;

/**
 * Values (object members and array items together) in a body bound for a DTO. Validation and transformation
 * cost grows with them (500 unknown properties cost class-transformer and class-validator 2–15 ms, 2,000 about
 * 25–50 ms), and no body of this API comes near (the largest, a tenant, holds under 200).
 */
export const DTO_MAX_ITEMS = 500;

type Middleware = (req: Request, res: Response, next: NextFunction) => void;

const NOT_JSON = 'The request body is not valid JSON.';
const HAS_NUL = 'The request holds a NUL character (\\u0000), which this service does not accept.';
const LONE_SURROGATE = 'The request body holds an unpaired UTF-16 surrogate escape, which this service does not accept.';
const TOO_DEEP = `The request body nests arrays and objects more than ${JSON_MAX_DEPTH} levels deep.`;
const TOO_MANY_KEYS = `An object in the request body has more than ${JSON_MAX_KEYS} members.`;
const tooManyItems = (max: number) => `The request body holds more than ${max} values (object members and array items).`;

export interface JsonBodyOptions {
  /** Bytes, as body-parser reads them ('4kb', '256kb'). */
  limit: string;
  /** Object members and array items in the whole body (DTO_MAX_ITEMS for a body bound for a DTO). */
  maxItems?: number;
}

/**
 * The one JSON body parser of the service: reads `application/json` bodies (size limit, charsets and
 * compression as body-parser does), then `parseJsonBody`. Other content types are left for the next parser.
 */
export function jsonBodyParser(options: JsonBodyOptions): Middleware {
  const maxItems = options.maxItems ?? Infinity;
  const read = express.text({ type: 'application/json', limit: options.limit });
  return (req, res, next) =>
    read(req, res, (err?: unknown) => {
      if (err) return next(err);
      if (typeof req.body !== 'string') return next();
      try {
        req.body = parseJsonBody(req.body, maxItems);
      } catch (e) {
        return next(e);
      }
      next();
    });
}

/**
 * What a request body may hold before anything is built from it, by route kind (docs/security.md, "Request
 * cost before authentication"). `api`: a `/v1` route, whose credential is checked before the body is read;
 * its largest body (a tenant: 50 return URLs of up to 2,000 characters) stays far below. `public`: a route
 * without a credential (the console's sign-in, whose body is one key of at most 512 characters). The
 * facade's streamed bodies and the inbound receiver have their own rules and are not read here.
 */
export const BODY_LIMITS = {
  api: { json: '256kb', form: '64kb' },
  public: { json: '4kb', form: '4kb' },
} as const;

export type BodyKind = keyof typeof BODY_LIMITS | 'unread';

/** The JSON and form parsers of each route kind; `kindOf` tells the kind from the request target. */
export function requestBodyParser(kindOf: (url: string) => BodyKind): Middleware {
  const parsers = {
    api: bothParsers(BODY_LIMITS.api),
    public: bothParsers(BODY_LIMITS.public),
  };
  return (req, res, next) => {
    const kind = kindOf(req.url);
    if (kind === 'unread') return next();
    parsers[kind](req, res, next);
  };
}

function bothParsers(limits: { json: string; form: string }): Middleware {
  const json = jsonBodyParser({ limit: limits.json, maxItems: DTO_MAX_ITEMS });
  const form = formBodyParser({ limit: limits.form });
  const largest = Math.max(bytesOf(limits.json), bytesOf(limits.form));
  return (req, res, next) => {
    // Refused on its word, unread: body-parser would read (and throw away) the whole body before answering 413.
    if (Number(req.headers['content-length'] ?? 0) > largest)
      return next(new AppError('payload_too_large', 'The request body is too large.'));
    json(req, res, (err?: unknown) => (err ? next(err) : form(req, res, next)));
  };
}

function bytesOf(limit: string): number {
  const [, n, unit] = /^(\d+)(kb|mb)$/.exec(limit) ?? [];
  return Number(n) * (unit === 'mb' ? 1024 * 1024 : 1024);
}

/** Form bodies are flat strings; they are held to the same NUL rule as JSON. */
export function formBodyParser(options: { limit: string }): Middleware {
  const read = express.urlencoded({ extended: false, limit: options.limit });
  return (req, res, next) =>
    read(req, res, (err?: unknown) => {
      if (err) return next(err);
      if (req.body !== null && typeof req.body === 'object' && hasNulDeep(req.body))
        return next(new AppError('validation_failed', HAS_NUL));
      next();
    });
}

/**
 * Refuses a request whose path or query is not cleanly percent-encoded or decodes to a NUL: path
 * parameters and query values end up in SQL, and PostgreSQL's text refuses NUL. Runs before routing.
 */
export const refuseBadUrl: Middleware = (req, _res, next) => {
  const problem = urlProblem(req.url);
  next(problem ? new AppError('validation_failed', problem) : undefined);
};

export function urlProblem(url: string): string | null {
  if (!url.includes('%') && !url.includes('\0')) return null;
  if (/%00/.test(url) || url.includes('\0')) return 'The request URL holds a NUL character (%00), which this service does not accept.';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  for (const segment of path.split('/')) {
    try {
      decodeURIComponent(segment);
    } catch {
      return 'The request path is not validly percent-encoded UTF-8.';
    }
  }
  return null;
}

/**
 * Parses a JSON document the way the service accepts it: an object or an array at the top (an empty body
 * is `{}`), nesting at most JSON_MAX_DEPTH levels, at most JSON_MAX_KEYS members in an object and `maxItems`
 * values in all, no NUL and no unpaired surrogate escape in any string or key (PostgreSQL's jsonb and text
 * refuse both). Anything else is `validation_failed`.
 */
export function parseJsonBody(text: string, maxItems = Infinity): unknown {
  const start = firstNonSpace(text);
  if (start === -1) return {};
  const first = text.charCodeAt(start);
  if (first !== 0x7b && first !== 0x5b) throw new AppError('validation_failed', `${NOT_JSON} It must be an object or an array.`);
  const problem = scanJson(text, JSON_MAX_DEPTH, JSON_MAX_KEYS, maxItems);
  if (problem) throw new AppError('validation_failed', problem);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new AppError('validation_failed', NOT_JSON);
  }
}

/**
 * One pass over the text, without recursion: the nesting depth, the members of each object and the values
 * in all outside strings, and the `\u` escapes inside them. Runs before JSON.parse, so a hostile body is
 * refused before anything is built from it. Malformed JSON is left for JSON.parse to refuse. Values are
 * counted as separators and containers (`a,b` is two); a colon outside a string is a member of the
 * innermost object.
 */
export function scanJson(text: string, maxDepth: number, maxKeys = JSON_MAX_KEYS, maxItems = Infinity): string | null {
  let depth = 0;
  let items = 0;
  const keys = new Int32Array(maxDepth + 2);
  let inString = false;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x22) inString = false;
      else if (c === 0x5c) {
        if (text.charCodeAt(i + 1) !== 0x75) {
          i++;
          continue;
        }
        const unit = hexUnit(text, i + 2);
        if (unit === 0) return HAS_NUL;
        if (unit >= 0xdc00 && unit <= 0xdfff) return LONE_SURROGATE;
        if (unit >= 0xd800 && unit <= 0xdbff) {
          const low = text.charCodeAt(i + 6) === 0x5c && text.charCodeAt(i + 7) === 0x75 ? hexUnit(text, i + 8) : -1;
          if (low < 0xdc00 || low > 0xdfff) return LONE_SURROGATE;
          i += 6;
        }
        i += 5;
      } else if (c === 0) return HAS_NUL;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return TOO_DEEP;
      keys[depth] = 0;
      if (++items > maxItems) return tooManyItems(maxItems);
    } else if (c === 0x7d || c === 0x5d) {
      if (depth > 0) depth--;
    } else if (c === 0x2c) {
      if (++items > maxItems) return tooManyItems(maxItems);
    } else if (c === 0x3a && depth > 0 && ++keys[depth] > maxKeys) return TOO_MANY_KEYS;
  }
  return null;
}

/** True when a string anywhere in the value (keys included) holds a NUL; iterative, so depth costs no stack. */
export function hasNulDeep(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (v.includes('\0')) return true;
    } else if (v !== null && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) {
        if (k.includes('\0')) return true;
        stack.push(child);
      }
    }
  }
  return false;
}

/** The UTF-16 unit of four hex digits at `at`, or -1. */
function hexUnit(text: string, at: number): number {
  const hex = text.slice(at, at + 4);
  return /^[0-9a-fA-F]{4}$/.test(hex) ? parseInt(hex, 16) : -1;
}

function firstNonSpace(text: string): number {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return i;
  }
  return -1;
}
