import type { Progress, ProgressResult, WorkspaceInfo } from './protocol';

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

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}
