import * as vscode from 'vscode';
import type { ReadOutput } from './follow';
import type { LongRunningResult, ToolResult } from './protocol';
import { InputWriter, Resizer, type Size } from './ptyInput';
import { exitLine, type FeedEnd, type PtyOutputs, TerminalFeed } from './ptyStream';

/** DEFAULT_SIZE is the size a command starts with when the terminal has not said its own yet. */
export const DEFAULT_SIZE: Size = { rows: 24, cols: 80 };

/** TerminalServer is what a terminal asks of the extension's connection to the server. */
export interface TerminalServer {
  read: ReadOutput;
  writeInput(handleId: string, data: string): Promise<unknown>;
  resize(handleId: string, size: Size): Promise<unknown>;
  /** cancel ends a handle the user closed the terminal of. */
  cancel(handleId: string): Promise<unknown>;
  outputs: PtyOutputs;
  errorText(e: unknown): string;
  log(line: string): void;
}

/**
 * How a terminal gets its handle: start runs a command in a terminal of the
 * given size (Run in Terminal: closing the terminal cancels it); attach
 * joins a running one (Open Terminal: closing the terminal only leaves it).
 */
export type TerminalTarget = { kind: 'start'; start: (size: Size) => Promise<LongRunningResult> } | { kind: 'attach'; handleId: string };

const RED = '\x1b[31m';
const DIM = '\x1b[2m';
const RESET = '\x1b[0m';

/**
 * HandleTerminal is a VS Code terminal backed by a toolhost handle that
 * runs in a pseudo-terminal: what is typed goes to writeInput, the panel's
 * size to resize, and the handle's output (replayed, then followed: see
 * TerminalFeed) to the screen. When the command ends it prints how, then
 * closes as VS Code's own terminals do: at once after exit code 0, else
 * after a key, so the end stays readable.
 */
export class HandleTerminal implements vscode.Pseudoterminal {
  private readonly written = new vscode.EventEmitter<string>();
  readonly onDidWrite = this.written.event;
  private readonly closed = new vscode.EventEmitter<number | void>();
  readonly onDidClose = this.closed.event;

  /** HandleId is set once the handle is known (at once for attach). */
  handleId: string | undefined;
  private readonly input: InputWriter;
  private readonly resizer: Resizer;
  private readonly stop = new AbortController();
  private feed: TerminalFeed | undefined;
  private subscription: { dispose(): void } | undefined;
  /** Result is the handle's final ToolResult once known. */
  private result: ToolResult | undefined;
  /** FeedEnded is set once the feed stopped: the output is all written. */
  private feedEnded: FeedEnd | undefined;
  /** Finished is set once the end was printed: a key then closes the terminal. */
  private finished = false;
  private disposed = false;
  private errorShown = false;
  /** AtLineStart says the screen's cursor is at the start of a line, as far as the text written says. */
  private atLineStart = true;

  constructor(
    private readonly server: TerminalServer,
    private readonly target: TerminalTarget,
    /** OnDispose is called once, when the terminal is gone. */
    private readonly onDispose: (t: HandleTerminal) => void,
  ) {
    const onError = (e: unknown) => this.requestFailed(e);
    this.input = new InputWriter(onError);
    this.resizer = new Resizer(onError);
    if (target.kind === 'attach') this.handleId = target.handleId;
  }

  /** ownsHandle says closing this terminal cancels its handle. */
  get ownsHandle(): boolean {
    return this.target.kind === 'start';
  }

  open(initialDimensions: vscode.TerminalDimensions | undefined): void {
    if (initialDimensions) this.resizer.resize({ rows: initialDimensions.rows, cols: initialDimensions.columns });
    if (this.target.kind === 'attach') {
      this.attached(this.target.handleId, undefined);
      return;
    }
    const size = this.resizer.latest ?? DEFAULT_SIZE;
    this.target.start(size).then(
      (r) => {
        if (this.disposed) {
          // Closed while it started: closing a terminal cancels its command.
          void this.server.cancel(r.handleId).catch(() => undefined);
          return;
        }
        this.attached(r.handleId, size);
      },
      (e: unknown) => {
        if (this.disposed) return;
        this.print(`${RED}toolhost: the command did not start: ${this.server.errorText(e)}${RESET}`);
        this.end();
      },
    );
  }

  private attached(handleId: string, startSize: Size | undefined): void {
    this.handleId = handleId;
    const s = this.server;
    const placed = s.outputs.placed(handleId);
    const feed = new TerminalFeed({
      handleId,
      read: s.read,
      placed,
      signal: this.stop.signal,
      onText: (t) => this.write(t),
      onReadError: (e) => this.print(`${DIM}[toolhost: output skipped: ${s.errorText(e)}]${RESET}`),
    });
    this.feed = feed;
    if (placed) this.subscription = s.outputs.subscribe(handleId, (c) => feed.push(c));
    if (this.result) feed.end();
    void feed.done.then((end) => {
      this.feedEnded = end;
      this.subscription?.dispose(); // the feed takes nothing more
      if (end.reason === 'error') this.print(`${RED}[toolhost: output no longer followed: ${s.errorText(end.error)}]${RESET}`);
      this.maybeFinish();
    });
    this.input.attach((data) => s.writeInput(handleId, data));
    // An attached terminal has not told its size yet; the size it learns next is sent.
    this.resizer.attach((size) => s.resize(handleId, size), startSize ?? { rows: 0, cols: 0 });
    s.log(`Terminal on ${handleId}: ${this.ownsHandle ? 'started' : 'attached'}${placed ? ', following output notifications' : ', following by reading'}.`);
  }

  /** ended takes the handle's final result (its toolResult, or a cancel's answer). */
  ended(r: ToolResult): void {
    if (this.result) return;
    this.result = r;
    this.input.close();
    this.resizer.close();
    this.feed?.end();
    this.maybeFinish();
  }

  /** serverStopped ends a terminal whose server went away: its handle is gone with it. */
  serverStopped(): void {
    // Its handle is gone: a later server's handle of the same id is another one.
    this.handleId = undefined;
    if (this.finished) return;
    this.stop.abort();
    this.input.close();
    this.resizer.close();
    this.print(`${RED}[toolhost: the server stopped]${RESET}`);
    this.end();
  }

  private maybeFinish(): void {
    if (this.finished || this.disposed || !this.feedEnded) return;
    if (!this.result && this.feedEnded.reason === 'eof') return; // the result is on its way
    if (this.result) this.print(exitLine(this.result));
    if (this.result?.status === 'completed' && this.result.exitCode === 0) {
      this.finished = true;
      this.closed.fire(0);
      this.dispose();
      return;
    }
    this.end();
  }

  /** end prints the closing prompt; the next key closes the terminal. */
  private end(): void {
    this.finished = true;
    this.print(`${DIM}Press any key to close the terminal.${RESET}`);
  }

  private write(text: string): void {
    if (this.disposed || text === '') return;
    this.atLineStart = text.endsWith('\n');
    this.written.fire(text);
  }

  /** print writes a line of the extension's own, on a line of its own. */
  private print(line: string): void {
    this.write(`${this.atLineStart ? '' : '\r\n'}${line}\r\n`);
  }

  private requestFailed(e: unknown): void {
    if (this.result || this.errorShown) return;
    this.errorShown = true; // once: a failing request would fail again at each key
    this.print(`${RED}[toolhost: ${this.server.errorText(e)}]${RESET}`);
  }

  handleInput(data: string): void {
    if (this.disposed) return;
    if (this.finished) {
      this.closed.fire();
      this.dispose();
      return;
    }
    this.input.write(data);
  }

  setDimensions(d: vscode.TerminalDimensions): void {
    this.resizer.resize({ rows: d.rows, cols: d.columns });
  }

  /** close is VS Code's: the user closed the terminal. */
  close(): void {
    this.dispose();
  }

  /** dispose lets go of the handle: cancelled if this terminal started it and it still runs. */
  private dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    const id = this.handleId;
    if (this.ownsHandle && id && !this.result) {
      this.server.log(`Terminal on ${id} closed: cancelling it.`);
      this.server.cancel(id).catch((e: unknown) => this.server.log(`Cancelling ${id} failed: ${this.server.errorText(e)}`));
    }
    this.stop.abort();
    this.input.close();
    this.resizer.close();
    this.subscription?.dispose();
    this.written.dispose();
    this.closed.dispose();
    this.onDispose(this);
  }
}
