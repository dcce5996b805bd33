import * as vscode from 'vscode';
import { parseSnapshotRef, type SnapshotRef, snapshotQuery } from './snapshots';

/** SNAPSHOT_SCHEME is the URI scheme of a file as a snapshot holds it (and of a "now" the editor cannot open itself). */
export const SNAPSHOT_SCHEME = 'toolhost-snapshot';

/**
 * snapshotUri names a snapshot document: toolhost-snapshot:/<path>?snapshot=…&session=…&side=before|now.
 * The path is the file's, so that the tab shows its name.
 */
export function snapshotUri(ref: SnapshotRef): vscode.Uri {
  return vscode.Uri.from({ scheme: SNAPSHOT_SCHEME, path: `/${ref.path}`, query: snapshotQuery(ref) });
}

/**
 * SnapshotDocs provides the read-only documents of the diff editor's sides
 * that are no file of this machine: a file as the snapshot before a
 * command holds it, and, for a file that is gone (or a destination's), the
 * file now. Their text is computed before the diff editor opens
 * (set); a document VS Code asks for again (reopened after it was closed,
 * a tab restored after a reload) is computed anew by load.
 */
export class SnapshotDocs implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly texts = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly disposables: vscode.Disposable[];

  constructor(private readonly load: (ref: SnapshotRef) => Promise<string>) {
    this.disposables = [
      this.changed,
      vscode.workspace.registerTextDocumentContentProvider(SNAPSHOT_SCHEME, this),
      // A closed document is asked for again when it is reopened: its text is then the server's then.
      vscode.workspace.onDidCloseTextDocument((d) => {
        if (d.uri.scheme === SNAPSHOT_SCHEME) this.texts.delete(d.uri.toString());
      }),
    ];
  }

  /** set gives a document its text, and tells an open one. */
  set(uri: vscode.Uri, text: string): void {
    const key = uri.toString();
    const old = this.texts.get(key);
    this.texts.set(key, text);
    if (old !== undefined && old !== text) this.changed.fire(uri);
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const known = this.texts.get(uri.toString());
    if (known !== undefined) return known;
    const ref = parseSnapshotRef(uri.path, uri.query);
    if (!ref) return '';
    try {
      const text = await this.load(ref);
      this.texts.set(uri.toString(), text);
      return text;
    } catch (e) {
      return `[toolhost] ${ref.path} as the snapshot ${ref.snapshotId} holds it cannot be shown: ${e instanceof Error ? e.message : String(e)}\n`;
    }
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
    this.texts.clear();
  }
}
