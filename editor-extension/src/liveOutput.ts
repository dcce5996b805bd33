import * as vscode from 'vscode';
import { followOutput, type FollowEnd, type ReadOutput } from './follow';

/** SCHEME is the URI scheme of the live output documents. */
export const SCHEME = 'toolhost-output';

/** One handle's live output: its text so far and the loop that feeds it. */
interface Live {
  uri: vscode.Uri;
  label: string;
  text: string;
  /** Stop aborts the loop; set until the loop has ended or was stopped. */
  stop: AbortController | undefined;
  /** Done says the loop read to eof: the text is the whole output. */
  done: boolean;
  /** Following says the editors showing it keep its last line in view. */
  following: boolean;
  /** Pending is the timer of a change not yet fired (see append). */
  pending: NodeJS.Timeout | undefined;
}

/**
 * CHANGE_MS is how often at most a document is told it changed: VS Code
 * fetches the whole text at each change, so a fast command's many chunks
 * are shown together.
 */
const CHANGE_MS = 100;

/**
 * LiveOutput shows the output of running handles as read-only documents
 * (toolhost-output:/<handleId>/<label>.log), each fed by a followOutput loop
 * while it is open. A document keeps its last line in view while the user
 * has scrolled to the end, and stays put while they read higher up. The loop
 * stops at eof, when the last tab showing the document is closed, or when
 * stopAll is called (the server stopped); a failed read is said once, at the
 * end of the document and in a warning, and not retried.
 */
export class LiveOutput implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  /** Lives by URI string: the handles whose document is open, or whose loop still runs. */
  private readonly lives = new Map<string, Live>();
  /** Opening holds the keys of documents on their way to a tab: no tab shows them yet. */
  private readonly opening = new Set<string>();
  private readonly disposables: vscode.Disposable[] = [];
  /**
   * Session names the session whose handles the documents opened now show
   * (in their URI's query): a handle id names another command in another
   * session, and a tab restored after a reload is followed again only when
   * the session is the one resumed.
   */
  session = '';

  /**
   * errorText says what went wrong with a read, for the user; log takes a
   * line for the server's log when a loop starts and ends.
   */
  constructor(
    private readonly errorText: (e: unknown) => string,
    private readonly log: (line: string) => void,
  ) {
    this.disposables.push(
      this.changed,
      vscode.workspace.registerTextDocumentContentProvider(SCHEME, this),
      vscode.window.tabGroups.onDidChangeTabs((e) => {
        if (e.closed.length > 0) this.stopUnshown();
      }),
      // A document is closed some time after its last tab: by then the
      // same URI may be open again, so the tabs decide here too.
      vscode.workspace.onDidCloseTextDocument((d) => {
        if (d.uri.scheme === SCHEME) this.stopUnshown();
      }),
      vscode.window.onDidChangeTextEditorVisibleRanges((e) => {
        const live = this.lives.get(e.textEditor.document.uri.toString());
        const last = e.visibleRanges[e.visibleRanges.length - 1];
        if (live && last) live.following = last.end.line >= e.textEditor.document.lineCount - 2;
      }),
      vscode.workspace.onDidChangeTextDocument((e) => {
        const live = this.lives.get(e.document.uri.toString());
        if (!live?.following) return;
        const end = new vscode.Position(e.document.lineCount - 1, 0);
        for (const ed of vscode.window.visibleTextEditors) {
          if (ed.document === e.document) ed.revealRange(new vscode.Range(end, end), vscode.TextEditorRevealType.Default);
        }
      }),
    );
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.lives.get(uri.toString())?.text ?? '';
  }

  /**
   * open shows a handle's live output, starting a loop over read unless one
   * already follows it (or has read it to eof).
   */
  async open(handleId: string, label: string, read: ReadOutput): Promise<void> {
    const uri = outputUri(handleId, label, this.session);
    const key = uri.toString();
    const live = this.lives.get(key);
    // New, or stopped before the end (failed, or the server stopped): read it from the start.
    if (!live || (!live.stop && !live.done)) this.follow(uri, handleId, label, read);
    this.opening.add(key);
    try {
      const doc = await vscode.workspace.openTextDocument(uri);
      await vscode.window.showTextDocument(doc, { preview: false });
    } finally {
      this.opening.delete(key);
    }
  }

  /**
   * resume follows again, from the start, each document a tab shows whose
   * reading stopped before the end: when the server serves the same
   * session again (--persist) after it stopped, and after a window reload,
   * whose restored tabs this window knows nothing of yet (their URI names
   * the handle).
   */
  resume(read: ReadOutput): void {
    for (const uri of this.shown()) {
      const live = this.lives.get(uri.toString());
      if (live && (live.stop || live.done)) continue;
      const named = parseOutputUri(uri);
      if (named && sessionOf(uri) === this.session) this.follow(uri, named.handleId, live?.label ?? named.label, read);
    }
  }

  /** follow starts a loop that reads a handle's output from the start into its document. */
  private follow(uri: vscode.Uri, handleId: string, label: string, read: ReadOutput): void {
    const old = this.lives.get(uri.toString());
    if (old?.pending) clearTimeout(old.pending);
    const stop = new AbortController();
    const fresh: Live = { uri, label, text: '', stop, done: false, following: true, pending: undefined };
    this.lives.set(uri.toString(), fresh);
    this.changed.fire(uri);
    const onText = (t: string) => this.append(fresh, t);
    this.log(`Live output of "${label}" (${handleId}): following.`);
    void followOutput({ handleId, read, onText, signal: stop.signal }).then((end) => this.ended(fresh, stop, end));
  }

  /** stopAll stops every loop, saying why at the end of each document. */
  stopAll(why: string): void {
    for (const live of this.lives.values()) {
      if (!live.stop) continue;
      this.stop(live.uri.toString(), why);
      this.append(live, `\n[toolhost] ${why}: output no longer followed\n`);
    }
  }

  private ended(live: Live, stop: AbortController, end: FollowEnd): void {
    if (live.stop === stop) live.stop = undefined;
    const at = `${end.nextOffset} bytes read`;
    if (end.reason !== 'stopped') this.log(`Live output of "${live.label}": ${end.reason === 'eof' ? 'ended' : 'failed'} (${at}).`);
    if (end.reason === 'eof') {
      live.done = true;
      this.append(live, EOF_NOTE);
    } else if (end.reason === 'error') {
      const why = this.errorText(end.error);
      this.append(live, `\n[toolhost] output no longer followed: ${why}\n`);
      void vscode.window.showWarningMessage(`Toolhost: the live output of "${live.label}" stopped: ${why}`);
    }
  }

  private append(live: Live, text: string): void {
    live.text += text;
    live.pending ??= setTimeout(() => {
      live.pending = undefined;
      this.changed.fire(live.uri);
    }, CHANGE_MS);
  }

  private stop(key: string, why: string): void {
    const live = this.lives.get(key);
    if (!live?.stop) return;
    live.stop.abort();
    live.stop = undefined;
    this.log(`Live output of "${live.label}": stopped, ${why}.`);
  }

  /** Forget stops a document's loop and drops its text: opening it again reads anew. */
  private forget(key: string, why: string): void {
    this.stop(key, why);
    const live = this.lives.get(key);
    if (live?.pending) clearTimeout(live.pending);
    this.lives.delete(key);
  }

  /** The live output documents the tabs show. */
  private shown(): vscode.Uri[] {
    const uris = new Map<string, vscode.Uri>();
    for (const g of vscode.window.tabGroups.all) {
      for (const t of g.tabs) if (t.input instanceof vscode.TabInputText && t.input.uri.scheme === SCHEME) uris.set(t.input.uri.toString(), t.input.uri);
    }
    return [...uris.values()];
  }

  /** Forgets the documents no tab shows any more. */
  private stopUnshown(): void {
    const shown = new Set(this.shown().map((u) => u.toString()));
    for (const key of [...this.lives.keys()]) if (!shown.has(key) && !this.opening.has(key)) this.forget(key, 'its tab was closed');
  }

  dispose(): void {
    for (const live of this.lives.values()) {
      live.stop?.abort();
      if (live.pending) clearTimeout(live.pending);
    }
    for (const d of this.disposables) d.dispose();
  }
}

/** EOF_NOTE ends a document read to eof: the command ended and all of its output is shown. */
export const EOF_NOTE = '\n[toolhost] the command ended: end of output\n';

/**
 * outputUri names a handle's live output document:
 * toolhost-output:/<handleId>/<label>.log?session=<sessionId>.
 */
export function outputUri(handleId: string, label: string, session: string): vscode.Uri {
  return vscode.Uri.from({ scheme: SCHEME, path: outputPath(handleId, label), query: new URLSearchParams({ session }).toString() });
}

function sessionOf(uri: vscode.Uri): string {
  return new URLSearchParams(uri.query).get('session') ?? '';
}

/** outputPath is the path of a handle's live output document (a destination's handle id has a slash). */
export function outputPath(handleId: string, label: string): string {
  return `/${handleId}/${fileName(label)}.log`;
}

/** parseOutputPath is the handle and label a live output document's path names; undefined for another path. */
export function parseOutputPath(p: string): { handleId: string; label: string } | undefined {
  const m = /^\/(.+)\/([^/]+)\.log$/.exec(p);
  return m ? { handleId: m[1], label: m[2] } : undefined;
}

function parseOutputUri(uri: vscode.Uri): { handleId: string; label: string } | undefined {
  return uri.scheme === SCHEME ? parseOutputPath(uri.path) : undefined;
}

/** fileName makes a label fit a path segment: no slashes or control characters, at most 60 characters. */
export function fileName(label: string): string {
  const s = label.replace(/[\\/\x00-\x1f]+/g, ' ').trim().slice(0, 60);
  return s || 'output';
}
