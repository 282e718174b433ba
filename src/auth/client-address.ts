import type { IncomingMessage } from 'node:http';
import { Inject, Injectable } from '@nestjs/common';
import ipaddr from 'ipaddr.js';
import proxyaddr from 'proxy-addr';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import type { Socket } from 'node:net';

const CLIENT = Symbol('cws-connect.client');
type KnownSocket = Socket & { [CLIENT]?: { forwarded: string | string[] | undefined; client: string } };

/** Longest client text kept: an address is far shorter; a trusted proxy's garbage is cut, not stored whole. */
const MAX_CLIENT_CHARS = 64;

/**
 * Who is asking, decided once for the whole service (docs/security.md, "Who the client is"): the socket's
 * address, or, when the socket is a proxy TRUST_PROXY names, the nearest address in X-Forwarded-For that is not
 * one (proxy-addr's walk, the one Express uses: `service.ts` gives Express this `trust`, so `req.ip` agrees).
 * A header from any other socket is ignored, so a caller cannot pick its own address.
 */
@Injectable()
export class ClientAddress {
  /** Express's `trust proxy` function: whether hop `i` (0: the socket) at `address` is a proxy. */
  readonly trust: (address: string, i: number) => boolean;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    const setting = config.security.trustProxy;
    if ('hops' in setting) {
      const { hops } = setting;
      this.trust = (_address, i) => i < hops;
    } else {
      this.trust = setting.ranges.length > 0 ? proxyaddr.compile(setting.ranges) : () => false;
    }
  }

  /** The client's address as given (socket or X-Forwarded-For). */
  addressOf(req: IncomingMessage): string {
    return (proxyaddr(req, this.trust) ?? '').slice(0, MAX_CLIENT_CHARS);
  }

  /**
   * The client as the throttle counts it: its address, canonical (IPv4-mapped IPv6 as IPv4); an IPv6 client is
   * its /64, since one host usually holds a whole /64 and could rotate single addresses freely.
   */
  of(req: IncomingMessage): string {
    // Read once per connection (parsing addresses was a measurable share of a proxied call): the socket's address
    // cannot change, and X-Forwarded-For is compared with the one the client was read from.
    const socket = req.socket as KnownSocket;
    const forwarded = req.headers['x-forwarded-for'];
    const known = socket[CLIENT];
    if (known !== undefined && known.forwarded === forwarded) return known.client;
    const client = this.canonical(req);
    socket[CLIENT] = { forwarded, client };
    return client;
  }

  private canonical(req: IncomingMessage): string {
    const address = this.addressOf(req);
    if (!ipaddr.isValid(address)) return address;
    const ip = ipaddr.process(address);
    return ip.kind() === 'ipv6'
      ? `${(ip as ipaddr.IPv6).parts
          .slice(0, 4)
          .map((p) => p.toString(16))
          .join(':')}::/64`
      : ip.toString();
  }
}
