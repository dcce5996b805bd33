import type { Progress, ProgressResult, Sandbox, SandboxCapability, WorkspaceInfo } from './protocol';

/** The snapshots a `progress` answer holds: the list's, or the one. */
export function progressHandles(r: ProgressResult): Progress[] {
  return 'handles' in r ? r.handles : [r];
}

/**
 * The workspace an initialize answer names, or undefined when the answer is
 * not toolhost's. The language client types the answer as LSP's, which has
 * no `workspace`: this checks the value instead of trusting a cast.
 */
export function workspaceOf(init: unknown): WorkspaceInfo | undefined {
  if (!isRecord(init) || !isRecord(init.workspace)) return undefined;
  const { root, readRoots, artifactsDir } = init.workspace;
  if (typeof root !== 'string' || typeof artifactsDir !== 'string' || !isStringArray(readRoots)) return undefined;
  return { root, readRoots, artifactsDir };
}

/**
 * sandboxOf is the confinement an initialize answer says the server offers,
 * or undefined when the answer has none (a server from before confinement)
 * or it is malformed: then the extension promises no confinement.
 */
export function sandboxOf(init: unknown): SandboxCapability | undefined {
  if (!isRecord(init) || !isRecord(init.capabilities) || !isRecord(init.capabilities.sandbox)) return undefined;
  const { available, abi, reason, mode, default: def, layers } = init.capabilities.sandbox;
  if (typeof available !== 'boolean' || typeof abi !== 'number' || typeof mode !== 'string' || !isStringArray(layers)) return undefined;
  if (reason !== undefined && typeof reason !== 'string') return undefined;
  if (!isSandbox(def)) return undefined;
  return { available, abi, mode, default: def, layers, ...(reason !== undefined && { reason }) };
}

/**
 * snapshotsOf says an initialize answer offers snapshots
 * (`capabilities.snapshots`): `snapshot: true` on commands, restore and
 * diff. A server from before them says nothing, and is asked none.
 */
export function snapshotsOf(init: unknown): boolean {
  return isRecord(init) && isRecord(init.capabilities) && init.capabilities.snapshots === true;
}

/**
 * isSandbox checks a sandbox as the server says it: a filesystem mode, a
 * network that is true, false or an allow-list ({allow: [...]}), and the
 * protected and unreadable paths.
 */
function isSandbox(v: unknown): v is Sandbox {
  if (!isRecord(v)) return false;
  const { filesystem, network, protect, denyRead } = v;
  const fsOK = filesystem === undefined || filesystem === 'workspace-write' || filesystem === 'read-only' || filesystem === 'full';
  const netOK = network === undefined || typeof network === 'boolean' || (isRecord(network) && isStringArray(network.allow));
  const pathsOK = (protect === undefined || isStringArray(protect)) && (denyRead === undefined || isStringArray(denyRead));
  return fsOK && netOK && pathsOK;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}
