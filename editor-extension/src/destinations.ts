import type { DestinationInfo, DestinationState } from './protocol';

/** THIS_MACHINE is the name of the server's own group: handles whose ids have no prefix. */
export const THIS_MACHINE = '';

/** THIS_MACHINE_LABEL is how the picker and the Tools view name the server's own machine. */
export const THIS_MACHINE_LABEL = 'This machine';

/**
 * handleHead is the prefix a destination put on a handle id, "NAME" or
 * "NAME#2" (its second connection), or "" for an id of this server: the
 * hub names a destination's ids "NAME/h-3" and, after a reconnection,
 * "NAME#2/h-3"; this server's have no "/".
 */
export function handleHead(handleId: string): string {
  const slash = handleId.indexOf('/');
  return slash < 0 ? '' : handleId.slice(0, slash);
}

/** destinationOf is the destination a handle id belongs to: "NAME" for "NAME/h-3" or "NAME#2/h-3", THIS_MACHINE for "h-3". */
export function destinationOf(handleId: string): string {
  const head = handleHead(handleId);
  const hash = head.indexOf('#');
  return hash < 0 ? head : head.slice(0, hash);
}

/**
 * qualifiedPath is the path readFile takes for a file of a handle: a path of
 * this server's handle as it is; a destination's far absolute path with the
 * handle's head before it, "NAME//srv/ws/x", as the hub names a
 * destination's artifact paths (one that already has it is kept).
 */
export function qualifiedPath(handleId: string, path: string): string {
  const head = handleHead(handleId);
  if (!head || path.startsWith(`${head}/`)) return path;
  return `${head}/${path}`;
}

/**
 * isLocalPath says a path qualified by qualifiedPath is one of this server's
 * machine, which the editor can open as a file (else readFile fetches it).
 */
export function isLocalPath(handleId: string, path: string): boolean {
  const head = handleHead(handleId);
  return !head || !path.startsWith(`${head}/`);
}

/**
 * destinationsOf is the list of destinations an initialize answer names in
 * workspace.destinations, or a destinations answer: empty when there is
 * none or it is malformed (a server from before destinations). Entries that
 * do not read as a DestinationInfo are left out.
 */
export function destinationsOf(v: unknown): DestinationInfo[] {
  const list = isRecord(v) && isRecord(v.workspace) ? v.workspace.destinations : v;
  if (!Array.isArray(list)) return [];
  return list.flatMap((d): DestinationInfo[] => {
    if (!isRecord(d) || typeof d.name !== 'string' || d.name === '' || !isState(d.state) || !isStringArray(d.command)) return [];
    const info: DestinationInfo = { name: d.name, state: d.state, command: d.command };
    if (typeof d.root === 'string') info.root = d.root;
    if (isStringArray(d.readRoots)) info.readRoots = d.readRoots;
    if (isRecord(d.serverInfo) && typeof d.serverInfo.name === 'string' && typeof d.serverInfo.version === 'string') {
      info.serverInfo = { name: d.serverInfo.name, version: d.serverInfo.version };
    }
    if (typeof d.sessionId === 'string') info.sessionId = d.sessionId;
    if (typeof d.reason === 'string') info.reason = d.reason;
    return [info];
  });
}

/**
 * describeDestination is a destination's state in a few words: "ready ·
 * /srv/ws", "lost: ssh exited 255", "reconnecting: resuming far session …,
 * attempt 2 of 5; …" (its handles stay, their commands go on), "idle".
 */
export function describeDestination(d: DestinationInfo): string {
  if (d.state === 'lost') return d.reason ? `lost: ${lastLine(d.reason)}` : 'lost';
  if (d.state === 'reconnecting') return d.reason ? `reconnecting: ${lastLine(d.reason)}` : 'reconnecting';
  return d.root ? `${d.state} · ${d.root}` : d.state;
}

/** DestinationPick is one row of the destination picker; name is THIS_MACHINE for the server's own. */
export interface DestinationPick {
  label: string;
  description: string;
  detail?: string;
  name: string;
}

/**
 * destinationPicks are the rows of the destination picker: this machine
 * first (with its root), then each destination with its state and the
 * command that reaches it. No destinations: no picker, so an empty list.
 */
export function destinationPicks(root: string, destinations: readonly DestinationInfo[]): DestinationPick[] {
  if (destinations.length === 0) return [];
  return [
    { label: THIS_MACHINE_LABEL, description: root, name: THIS_MACHINE },
    ...destinations.map((d) => ({ label: d.name, description: describeDestination(d), detail: d.command.join(' '), name: d.name })),
  ];
}

/** Group is one top-level node of the Tools view: a destination (or this machine) and its handles. */
export interface Group<T> {
  /** Name is the destination's name, THIS_MACHINE for the server's own handles. */
  name: string;
  /** Destination is what the server last said of it; undefined for this machine or a name it no longer lists. */
  destination?: DestinationInfo;
  tools: T[];
}

/**
 * groupByDestination groups handles by the destination their ids name, in
 * the order they come within each group: this machine first, then the
 * server's destinations in its order (each shown, even without handles, so
 * its state is seen), then any other name a handle id has. Without
 * destinations and without prefixed ids it is one group, this machine's:
 * the view then lists the handles flat.
 */
export function groupByDestination<T extends { handleId: string }>(tools: readonly T[], destinations: readonly DestinationInfo[]): Group<T>[] {
  const groups = new Map<string, Group<T>>();
  groups.set(THIS_MACHINE, { name: THIS_MACHINE, tools: [] });
  for (const d of destinations) groups.set(d.name, { name: d.name, destination: d, tools: [] });
  for (const t of tools) {
    const name = destinationOf(t.handleId);
    let g = groups.get(name);
    if (!g) groups.set(name, (g = { name, tools: [] }));
    g.tools.push(t);
  }
  return [...groups.values()];
}

function lastLine(s: string): string {
  const line = s.trim().split('\n').at(-1) ?? '';
  return line.length > 120 ? `${line.slice(0, 117)}…` : line;
}

function isState(v: unknown): v is DestinationState {
  return v === 'idle' || v === 'connecting' || v === 'ready' || v === 'reconnecting' || v === 'lost';
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}
