// What the extension shows and does with a command's snapshot (issue 27):
// the "Changes (n)" row and its files, the file as the snapshot holds it,
// and "Undo this command". Nothing here imports vscode, so that the node
// tests run it; toolsView.ts, snapshotDocs.ts and extension.ts are the
// VS Code side.
import { PatchMismatch, reversePatch } from './reversePatch';
import {
  type Change,
  type ChangeKind,
  CodeSnapshotBusy,
  CodeSnapshotNotFound,
  type DiffResult,
  type RestoreParams,
  type RestoreResult,
  type ToolResult,
} from './protocol';

/** A result of a command run with a snapshot: restore of snapshotId undoes it. */
export type SnapshotResult = ToolResult & { snapshotId: string };

/** hasSnapshot says a result names the snapshot taken before its command. */
export function hasSnapshot(r: ToolResult | undefined): r is SnapshotResult {
  return typeof r?.snapshotId === 'string' && r.snapshotId !== '';
}

/** changesLabel is the row under a command run with a snapshot: "Changes (3)", "Changes (1000+)" when the server cut the list. */
export function changesLabel(r: Pick<ToolResult, 'changes' | 'changesTruncated'>): string {
  return `Changes (${r.changes?.length ?? 0}${r.changesTruncated ? '+' : ''})`;
}

/**
 * directories are the changed paths that are directories, as far as the
 * list tells: those with a changed path under them. (An empty directory
 * made or removed reads as a file; the server's Change has no type.)
 */
export function directories(changes: readonly Change[]): Set<string> {
  const paths = new Set(changes.map((c) => c.path));
  const dirs = new Set<string>();
  for (const c of changes) {
    for (let i = c.path.lastIndexOf('/'); i > 0; i = c.path.lastIndexOf('/', i - 1)) {
      const parent = c.path.slice(0, i);
      if (paths.has(parent)) dirs.add(parent);
    }
  }
  return dirs;
}

/** What the Tools view shows of one changed path. */
export interface ChangeRow {
  /** The file's name. */
  label: string;
  /** "modified · src/app", "added", "deleted · docs": its kind, and its directory when not the root. */
  description: string;
  tooltip: string;
  /** The codicon of its kind. */
  icon: string;
  /** The theme color of the icon. */
  color: string;
  /** A directory: no diff to open. */
  directory: boolean;
}

const kindWords: Record<ChangeKind, string> = {
  added: 'added',
  modified: 'modified',
  deleted: 'deleted',
  mode: 'mode changed',
  type: 'type changed',
};

const kindIcons: Record<ChangeKind, [string, string]> = {
  added: ['diff-added', 'gitDecoration.addedResourceForeground'],
  modified: ['diff-modified', 'gitDecoration.modifiedResourceForeground'],
  deleted: ['diff-removed', 'gitDecoration.deletedResourceForeground'],
  mode: ['diff-renamed', 'gitDecoration.renamedResourceForeground'],
  type: ['diff-renamed', 'gitDecoration.renamedResourceForeground'],
};

/** changeRow is how the Tools view shows a changed path (dirs: the list's directories()). */
export function changeRow(c: Change, dirs: ReadonlySet<string>): ChangeRow {
  const slash = c.path.lastIndexOf('/');
  const name = slash < 0 ? c.path : c.path.slice(slash + 1);
  const parent = slash < 0 ? '' : c.path.slice(0, slash);
  const directory = dirs.has(c.path);
  const kind = kindWords[c.kind] ?? c.kind;
  const [icon, color] = kindIcons[c.kind] ?? ['diff-modified', 'gitDecoration.modifiedResourceForeground'];
  const size = directory ? '' : c.kind === 'deleted' ? `, ${c.size} bytes before` : `, ${c.size} bytes`;
  const what = directory ? 'a directory: its files are listed too' : 'click to compare it as the snapshot before the command holds it with the file now';
  return {
    label: directory ? `${name}/` : name,
    description: parent ? `${kind} · ${parent}` : kind,
    tooltip: `${c.path}: ${kind}${size}; ${what}`,
    icon: directory ? 'folder' : icon,
    color,
    directory,
  };
}

/** What the left side of the diff editor shows: the file as the snapshot holds it, or why there is none. */
export type Before = { text: string } | { none: string };

/**
 * beforeText is a file as the snapshot holds it, from `diff {from, path}`
 * answered against the root now (diff) and the file's text now (now:
 * undefined when there is no file there now). A file that did not change
 * since is the file now; one made since was not there (empty); one whose
 * patch the server gave is the file now with it reversed. With no patch
 * (binary, over the server's 8 MiB, a directory or a symlink), there is no
 * text to show: `none` says why.
 */
export function beforeText(path: string, diff: Pick<DiffResult, 'changes' | 'patch'>, now: string | undefined): Before {
  const mine = diff.changes.find((c) => c.path === path);
  if (diff.changes.some((c) => c.path.startsWith(`${path}/`))) return { none: 'it is a directory' };
  if (!mine) return now === undefined ? { none: 'it is not in the snapshot, nor in the workspace now' } : { text: now };
  switch (mine.kind) {
    case 'added':
      return { text: '' };
    case 'mode':
      return now === undefined ? { none: 'it is not a file now' } : { text: now };
    case 'type':
      return { none: 'it changed type (a file, a directory or a symlink became another)' };
  }
  if (diff.patch) {
    try {
      return { text: reversePatch(now ?? '', diff.patch) };
    } catch (e) {
      if (e instanceof PatchMismatch) return { none: `it changed while it was read (${e.message}): try again` };
      throw e;
    }
  }
  // An empty file deleted: nothing to diff, and nothing was lost.
  if (mine.kind === 'deleted' && mine.size === 0) return { text: '' };
  return { none: 'it is a binary file, or larger than the server diffs (8 MiB): no text to compare' };
}

/** The query of a snapshot document's URI (toolhost-snapshot:/<path>?…). */
export interface SnapshotRef {
  /** The snapshot, as the result names it ("NAME/…" for a destination's). */
  snapshotId: string;
  /** The path in the root, with "/" separators. */
  path: string;
  /** The session that ran the command. */
  session: string;
  /** "before": the file as the snapshot holds it; "now": the file now, for a side the editor cannot open (gone, a destination's). */
  side: 'before' | 'now';
}

/** snapshotQuery is the query of a snapshot document's URI; its path is "/" + ref.path. */
export function snapshotQuery(ref: SnapshotRef): string {
  return new URLSearchParams({ snapshot: ref.snapshotId, session: ref.session, side: ref.side }).toString();
}

/** parseSnapshotRef reads a snapshot document's URI path and query back; undefined when it is not one. */
export function parseSnapshotRef(uriPath: string, query: string): SnapshotRef | undefined {
  const q = new URLSearchParams(query);
  const snapshotId = q.get('snapshot');
  const side = q.get('side');
  if (!snapshotId || (side !== 'before' && side !== 'now') || !uriPath.startsWith('/')) return undefined;
  return { snapshotId, path: uriPath.slice(1), session: q.get('session') ?? '', side };
}

/** isCode says an error (of any copy of vscode-jsonrpc) has this JSON-RPC code. */
export function isCode(e: unknown, code: number): boolean {
  return typeof e === 'object' && e !== null && (e as { code?: unknown }).code === code;
}

function reasonOf(e: unknown): string {
  const data = typeof e === 'object' && e !== null ? (e as { data?: { reason?: unknown } }).data : undefined;
  if (typeof data?.reason === 'string') return data.reason;
  return e instanceof Error ? e.message : String(e);
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** The confirmation asked before an undo: a modal warning. */
export interface UndoQuestion {
  message: string;
  detail: string;
}

/**
 * undoQuestion asks to undo a command: how many files go back (pending:
 * what restore would change now, as `diff {from}` says; the command's own
 * changes when that could not be asked), which, and that anything changed
 * since in them is lost too.
 */
export function undoQuestion(label: string, pending: Pick<DiffResult, 'changes' | 'truncated'>, fromCommand: boolean): UndoQuestion {
  const dirs = directories(pending.changes);
  const files = pending.changes.filter((c) => !dirs.has(c.path));
  const n = `${files.length}${pending.truncated ? '+' : ''}`;
  const shown = files.slice(0, 8).map((c) => `${c.path} (${kindWords[c.kind] ?? c.kind})`);
  if (files.length > shown.length) shown.push(`and ${files.length - shown.length}${pending.truncated ? '+' : ''} more`);
  const one = files.length === 1 && !pending.truncated;
  return {
    message: `Undo "${label}"? ${n} file${one ? ' goes' : 's go'} back to how ${one ? 'it was' : 'they were'} before it ran.`,
    detail: [
      shown.join(', '),
      fromCommand ? 'These are the files the command changed (what changed since could not be asked).' : '',
      'The workspace goes back to the snapshot taken before the command started: files made since are removed, deleted ones come back, and edits made since, by anything, are undone too.',
    ]
      .filter(Boolean)
      .join('\n\n'),
  };
}

/** What undoCommand needs of the editor and the server. */
export interface UndoDeps {
  /** What restore would change now (`diff {from: snapshotId}`). */
  pending(snapshotId: string): Promise<DiffResult>;
  /** Asks the question as a modal warning; true to go on. */
  confirm(q: UndoQuestion): Promise<boolean>;
  /** The server's restore. */
  restore(params: RestoreParams): Promise<RestoreResult>;
  /** Asked after SnapshotBusy (a modal warning, detail: the server's reason): true to restore anyway (force). */
  confirmForce(q: UndoQuestion): Promise<boolean>;
  /** Tells the user how it went. */
  info(message: string): void;
  /** A line for the server's log. */
  log(line: string): void;
}

/** How an undo ended. */
export type UndoOutcome = { restored: RestoreResult; forced: boolean } | { declined: 'nothing' | 'confirm' | 'force' };

/**
 * undoCommand undoes a command run with a snapshot: it asks what restore
 * would change, asks the user (a modal naming how many files), sends
 * `restore {snapshotId}`, and on -32032 SnapshotBusy (commands of the
 * session run) asks again and sends it with force. It reports written and
 * removed. SnapshotNotFound becomes an error that says the snapshot is gone;
 * other errors are the server's.
 */
export async function undoCommand(label: string, r: SnapshotResult, deps: UndoDeps): Promise<UndoOutcome> {
  let pending: Pick<DiffResult, 'changes' | 'truncated'>;
  let fromCommand = false;
  try {
    pending = await deps.pending(r.snapshotId);
  } catch (e) {
    if (isCode(e, CodeSnapshotNotFound)) throw goneError(label, r.snapshotId);
    deps.log(`diff of ${r.snapshotId}: ${reasonOf(e)}; counting the command's own changes`);
    pending = { changes: r.changes ?? [], truncated: r.changesTruncated ?? false };
    fromCommand = true;
  }
  if (pending.changes.length === 0) {
    deps.info(`Toolhost: nothing to undo for "${label}": the workspace is as it was before it ran.`);
    return { declined: 'nothing' };
  }
  if (!(await deps.confirm(undoQuestion(label, pending, fromCommand)))) return { declined: 'confirm' };
  const params: RestoreParams = { snapshotId: r.snapshotId };
  let forced = false;
  let restored: RestoreResult;
  try {
    restored = await deps.restore(params);
  } catch (e) {
    if (isCode(e, CodeSnapshotNotFound)) throw goneError(label, r.snapshotId);
    if (!isCode(e, CodeSnapshotBusy)) throw e;
    const why = reasonOf(e);
    deps.log(`restore of ${r.snapshotId}: busy (${why})`);
    const ok = await deps.confirmForce({
      message: 'Commands of this session are running: restoring now changes files under them, and they may write again after. Restore anyway?',
      detail: `The server says: ${why}.`,
    });
    if (!ok) return { declined: 'force' };
    forced = true;
    try {
      restored = await deps.restore({ ...params, force: true });
    } catch (e2) {
      if (isCode(e2, CodeSnapshotNotFound)) throw goneError(label, r.snapshotId);
      throw e2;
    }
  }
  deps.info(`Toolhost: undid "${label}": ${plural(restored.written, 'file')} written back, ${restored.removed} removed (${restored.ms} ms).`);
  return { restored, forced };
}

function goneError(label: string, snapshotId: string): Error {
  return new Error(`the snapshot taken before "${label}" (${snapshotId}) is gone from the server's store (dropped, or another state directory): it cannot be undone`);
}
