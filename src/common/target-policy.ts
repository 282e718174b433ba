import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import { isIP, type TcpNetConnectOpts } from 'node:net';
import ipaddr from 'ipaddr.js';
import { buildConnector } from 'undici';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/**
 * Where event deliveries may connect (docs/security.md, "Events target"). Only globally routable unicast
 * addresses, by default: loopback, private, shared (100.64/10), link-local (169.254/16, fe80::/10), unique
 * local (fc00::/7), multicast, unspecified, broadcast, reserved, documentation and benchmarking ranges and
 * IPv6 forms that embed an IPv4 address (6to4, Teredo, NAT64) are refused; an IPv4-mapped IPv6 address is
 * judged as its IPv4 address. Outside production loopback is allowed (tests and the sandbox use it). The
 * operator's EVENTS_TARGET_ALLOW_PRIVATE names exceptions: addresses, CIDR ranges, host names.
 */
export interface TargetPolicy {
  allowLoopback: boolean;
  /** Lower-case host names, without a trailing dot: allowed whatever they resolve to. */
  hosts: ReadonlySet<string>;
  ranges: ReadonlyArray<[Address, number]>;
}

/** A connection the policy refused; recorded in the attempts log as `network`, like any failed connect. */
export class TargetRefusedError extends Error {
  readonly code = 'ERR_EVENTS_TARGET_REFUSED';
  constructor() {
    super('The events target resolves to an address that is not allowed.');
    this.name = 'TargetRefusedError';
  }
}

/** The policy from EVENTS_TARGET_ALLOW_PRIVATE's entries (checked at start by parseAllowEntry). */
export function targetPolicy(production: boolean, allowPrivate: readonly string[]): TargetPolicy {
  const hosts = new Set<string>();
  const ranges: Array<[Address, number]> = [];
  for (const entry of allowPrivate) {
    const parsed = parseAllowEntry(entry);
    if (parsed === null) continue;
    if (typeof parsed === 'string') hosts.add(parsed);
    else ranges.push(parsed);
  }
  return { allowLoopback: !production, hosts, ranges };
}

/** An allow-list entry: a CIDR range, an address (a range of one), a host name; null when it is none of these. */
export function parseAllowEntry(entry: string): [Address, number] | string | null {
  const e = entry.trim();
  if (ipaddr.isValidCIDR(e)) {
    const [address, bits] = ipaddr.parseCIDR(e);
    return [address, bits];
  }
  if (ipaddr.isValid(e)) {
    const address = ipaddr.parse(e);
    return [address, address.kind() === 'ipv4' ? 32 : 128];
  }
  const host = hostKey(e);
  return /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$/.test(host) ? host : null;
}

/** Whether a delivery may connect to this address (as the resolver gave it, or a literal in the URL). */
export function addressAllowed(policy: TargetPolicy, address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.process(address);
  const range = parsed.range();
  if (range === 'unicast') return true;
  if (range === 'loopback' && policy.allowLoopback) return true;
  return policy.ranges.some(([net, bits]) => net.kind() === parsed.kind() && parsed.match(net, bits));
}

/** Names that never reach a public host: a single label (`localhost`, `metadata`) and the internal suffixes. */
const INTERNAL_NAME = /(^[^.]+$)|\.(localhost|local|internal|intranet|lan|home|corp|localdomain|home\.arpa)$/;
const LOOPBACK_NAME = /^(localhost|[^.]+(\.[^.]+)*\.localhost)$/;

/**
 * Why an events target is refused when it is written (`422 target_not_allowed`), or null: a literal address
 * that is not allowed, a single-label or internal host name. A name that passes is checked again where it
 * matters, on every connection, against the addresses it resolves to then (DNS rebinding included).
 */
export function targetProblem(policy: TargetPolicy, url: string): string | null {
  let host: string;
  try {
    host = hostKey(new URL(url).hostname);
  } catch {
    return 'eventsTargetUrl is not a URL.';
  }
  if (policy.hosts.has(host)) return null;
  const literal = host.startsWith('[') ? host.slice(1, -1) : host;
  if (isIP(literal)) return addressAllowed(policy, literal) ? null : REFUSED;
  if (policy.allowLoopback && LOOPBACK_NAME.test(host)) return null;
  return INTERNAL_NAME.test(host) ? REFUSED : null;
}

const REFUSED =
  'eventsTargetUrl must reach a public address: loopback, private, link-local and other internal addresses, and single-label or internal host names, are refused (the operator may allow some with EVENTS_TARGET_ALLOW_PRIVATE).';

type Resolve = (hostname: string, options: LookupAllOptions, callback: (err: Error | null, addresses: LookupAddress[]) => void) => void;
type Lookup = NonNullable<TcpNetConnectOpts['lookup']>;

/**
 * A `lookup` for net.connect that refuses a name any of whose addresses is not allowed; the socket then
 * connects to an address that was checked, so a name that resolves elsewhere the second time gains nothing.
 */
export function guardedLookup(policy: TargetPolicy, resolve: Resolve = dnsLookup): Lookup {
  const lookup = (hostname: string, options: { all?: boolean; family?: number | string }, callback: (...args: unknown[]) => void) => {
    resolve(hostname, { ...options, family: familyOf(options.family), all: true }, (err, addresses) => {
      if (err) return callback(err);
      const named = policy.hosts.has(hostKey(hostname));
      if (addresses.length === 0 || (!named && !addresses.every((a) => addressAllowed(policy, a.address))))
        return callback(new TargetRefusedError());
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0].address, addresses[0].family);
    });
  };
  return lookup as unknown as Lookup;
}

/**
 * undici's connector with the policy: a literal address is checked before connecting, a name by
 * guardedLookup as it resolves. `timeout` is the connect timeout (undici's `connectTimeout`).
 */
export function guardedConnector(policy: TargetPolicy, timeout: number, resolve?: Resolve): buildConnector.connector {
  const connect = buildConnector({ timeout, lookup: guardedLookup(policy, resolve) });
  return (options, callback) => {
    const host = hostKey(options.hostname);
    const literal = host.startsWith('[') ? host.slice(1, -1) : host;
    if (isIP(literal) && !policy.hosts.has(host) && !addressAllowed(policy, literal)) {
      callback(new TargetRefusedError(), null);
      return;
    }
    connect(options, callback);
  };
}

function hostKey(host: string): string {
  return host.toLowerCase().replace(/\.$/, '');
}

function familyOf(family: number | string | undefined): 0 | 4 | 6 {
  if (family === 4 || family === 'IPv4') return 4;
  if (family === 6 || family === 'IPv6') return 6;
  return 0;
}
