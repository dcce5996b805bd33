import type { Port } from './protocol';

/** isWildcard says an address listens on every interface: "0.0.0.0", "::", or none given. */
export function isWildcard(address: string): boolean {
  return address === '' || address === '0.0.0.0' || address === '::' || address === '[::]' || address === '::ffff:0.0.0.0';
}

/**
 * portUrl is the address to open for a port in a browser: localhost for a
 * wildcard listener, else the address it listens on (an IPv6 one in
 * brackets), "http://localhost:5173/", "http://127.0.0.1:8000/",
 * "http://[::1]:3000/".
 */
export function portUrl(p: Pick<Port, 'port' | 'address'>): string {
  const a = p.address.replace(/^\[(.*)\]$/, '$1');
  const host = isWildcard(a) ? 'localhost' : a.includes(':') ? `[${a}]` : a;
  return `http://${host}:${p.port}/`;
}

/** portKey names one listener of a handle: the same port on two addresses is two. */
export function portKey(p: Pick<Port, 'port' | 'address'>): string {
  return `${p.address}|${p.port}`;
}

/**
 * Ports holds the TCP ports one handle listens on, in the order they
 * opened. It knows nothing of VS Code.
 */
export class Ports {
  private readonly open = new Map<string, Port>();

  /** opened records a portOpened; it says whether the port is new (a repeat, or one a snapshot gave first, is not). */
  opened(p: Port): boolean {
    const key = portKey(p);
    const known = this.open.has(key);
    this.open.set(key, { port: p.port, address: p.address, pid: p.pid });
    return !known;
  }

  /** closed records a portClosed; it says whether the port was open. */
  closed(p: Pick<Port, 'port' | 'address'>): boolean {
    return this.open.delete(portKey(p));
  }

  /**
   * snapshot replaces the ports with those a `progress` answer lists now
   * (its `ports`; absent is none). A snapshot agrees with the
   * notifications sent before it, and those after it come after.
   */
  snapshot(ports: readonly Port[] | undefined): void {
    this.open.clear();
    for (const p of ports ?? []) this.open.set(portKey(p), { port: p.port, address: p.address, pid: p.pid });
  }

  clear(): void {
    this.open.clear();
  }

  list(): Port[] {
    return [...this.open.values()];
  }

  get size(): number {
    return this.open.size;
  }
}

/** describePort is a port's row in the Tools view: its address and the process holding it, "127.0.0.1 · pid 5200". */
export function describePort(p: Port): string {
  return `${p.address || '*'} · pid ${p.pid}`;
}

/** portMessage is the notification shown when a port opens: "Port 5173 opened by npm run dev" (on a destination: "… on build"). */
export function portMessage(p: Pick<Port, 'port'>, label: string, destination: string): string {
  return `Port ${p.port} opened by ${label}${destination ? ` on ${destination}` : ''}`;
}
