import { badRequest, isPlainObject } from './http-io.js';
import type { SandboxFault } from './types.js';

/** The injected fault, if any; applies to every path outside /_sandbox/ (the server makes sure of that). */
export class FaultController {
  private active: { fault: SandboxFault; remaining: number | null } | null = null;

  set(fault: SandboxFault | null): void {
    if (fault === null) {
      this.active = null;
      return;
    }
    const valid = parseFault(fault);
    this.active = valid ? { fault: valid, remaining: valid.count ?? null } : null;
  }

  current(): SandboxFault | null {
    if (!this.active) return null;
    const { fault, remaining } = this.active;
    return remaining === null ? { ...fault } : { ...fault, count: remaining };
  }

  /** The fault for this request, consuming one of its `count` uses. */
  take(path: string): SandboxFault | null {
    const active = this.active;
    if (!active) return null;
    const { paths } = active.fault;
    if (paths && !paths.some((prefix) => path.startsWith(prefix))) return null;
    if (active.remaining !== null && --active.remaining <= 0) this.active = null;
    return active.fault;
  }
}

/** Validates a fault given over HTTP or through setFault; `{"mode":"none"}` means no fault. */
export function parseFault(value: unknown): SandboxFault | null {
  if (!isPlainObject(value)) throw badRequest('invalid_fault', 'A fault is a JSON object with a mode');
  const limits: { paths?: string[]; count?: number } = {};
  if (value.paths !== undefined) {
    if (
      !Array.isArray(value.paths) ||
      value.paths.length === 0 ||
      !value.paths.every((p): p is string => typeof p === 'string' && p.startsWith('/'))
    ) {
      throw badRequest('invalid_fault', 'paths must be a non-empty array of path prefixes starting with /');
    }
    limits.paths = [...value.paths];
  }
  if (value.count !== undefined) {
    if (!isWhole(value.count, 1)) throw badRequest('invalid_fault', 'count must be a whole number of at least 1');
    limits.count = value.count;
  }
  const allowed = (keys: string[]) => {
    for (const key of Object.keys(value)) {
      if (!['mode', 'paths', 'count', ...keys].includes(key)) throw badRequest('invalid_fault', `${key} is not a field of this fault mode`);
    }
  };
  switch (value.mode) {
    case 'none':
      allowed([]);
      return null;
    case 'down':
      allowed([]);
      return { mode: 'down', ...limits };
    case 'status': {
      allowed(['status', 'retryAfterSeconds']);
      const { status, retryAfterSeconds } = value;
      if (!isWhole(status, 200) || status > 599) throw badRequest('invalid_fault', 'status must be a whole number from 200 to 599');
      if (retryAfterSeconds !== undefined && !isWhole(retryAfterSeconds, 0))
        throw badRequest('invalid_fault', 'retryAfterSeconds must be a whole number');
      return retryAfterSeconds === undefined
        ? { mode: 'status', status, ...limits }
        : { mode: 'status', status, retryAfterSeconds, ...limits };
    }
    case 'slow': {
      allowed(['delayMs']);
      const { delayMs } = value;
      if (!isWhole(delayMs, 0) || delayMs > 600_000) throw badRequest('invalid_fault', 'delayMs must be a whole number from 0 to 600000');
      return { mode: 'slow', delayMs, ...limits };
    }
    default:
      throw badRequest('invalid_fault', 'mode must be down, status, slow or none');
  }
}

function isWhole(value: unknown, min: number): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= min;
}
