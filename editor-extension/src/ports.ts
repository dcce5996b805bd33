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
 * portOf is a Port as the model keeps it, from a portOpened's params or a
 * progress snapshot's port: the host side (port, address), the pid, and for
 * a forward into the command's network namespace the socket's own port and
 * address inside.
 */
export function portOf(p: Port): Port {
  const port: Port = { port: p.port, address: p.address, pid: p.pid };
  if (p.insidePort !== undefined) port.insidePort = p.insidePort;
  if (p.insideAddress !== undefined) port.insideAddress = p.insideAddress;
  return port;
}

/**
 * Ports holds the TCP ports one handle listens on, in the order they
 * opened, by their host side: for a command with a network namespace of its
 * own, the loopback port toolhost forwards into it. It knows nothing of VS
 * Code.
 */
export class Ports {
  private readonly open = new Map<string, Port>();

  /** opened records a portOpened; it says whether the port is new (a repeat, or one a snapshot gave first, is not). */
  opened(p: Port): boolean {
    const key = portKey(p);
    const known = this.open.has(key);
    this.open.set(key, portOf(p));
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
    for (const p of ports ?? []) this.open.set(portKey(p), portOf(p));
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

/**
 * forwardedFrom says where a forwarded port listens inside the command's
 * network namespace: "forwarded from inside port 5173" (with the inside
 * address when it is not a wildcard or loopback one); "" for a port that is
 * not forwarded.
 */
export function forwardedFrom(p: Pick<Port, 'insidePort' | 'insideAddress'>): string {
  if (p.insidePort === undefined) return '';
  const a = p.insideAddress ?? '';
  const plain = isWildcard(a) || a === '127.0.0.1' || a === '::1' || a === '[::1]';
  return `forwarded from inside port ${p.insidePort}${plain ? '' : ` (${a})`}`;
}

/**
 * describePort is a port's row in the Tools view: its address, the process
 * holding it, and for a forward its port inside: "127.0.0.1 · pid 5200",
 * "127.0.0.1 · pid 5200 · forwarded from inside port 5173".
 */
export function describePort(p: Port): string {
  return [p.address || '*', `pid ${p.pid}`, forwardedFrom(p)].filter(Boolean).join(' · ');
}

/** describeListener is a port in a tooltip: "127.0.0.1:41234 (pid 5200, forwarded from inside port 5173)". */
export function describeListener(p: Port): string {
  return `${p.address || '*'}:${p.port} (${[`pid ${p.pid}`, forwardedFrom(p)].filter(Boolean).join(', ')})`;
}

/**
 * portMessage is the notification shown when a port opens: "Port 5173
 * opened by npm run dev" (on a destination: "… on build"; a forward: "Port
 * 41234 opened by npm run dev, forwarded from inside port 5173").
 */
export function portMessage(p: Pick<Port, 'port' | 'insidePort' | 'insideAddress'>, label: string, destination: string): string {
  const fwd = forwardedFrom(p);
  return `Port ${p.port} opened by ${label}${destination ? ` on ${destination}` : ''}${fwd ? `, ${fwd}` : ''}`;
}
