import { isEnded } from './ptyStream';

/** MAX_INPUT_CHARS bounds the text of one writeInput; a longer paste goes in several, in order. */
export const MAX_INPUT_CHARS = 256 * 1024;

/** MAX_BUFFERED_CHARS bounds what waits before a handle exists; past it, typing is dropped. */
export const MAX_BUFFERED_CHARS = 1 << 20;

/**
 * InputWriter sends a terminal's keystrokes to its handle with writeInput,
 * in order: at most one request is in flight, and what is typed meanwhile
 * waits and goes in the next one, all of it together. Before attach (the
 * handle is still starting) keystrokes wait. Once a request says the handle
 * ended (NotRunning, or the handle is gone) nothing more is sent: that is
 * the normal end, not an error. Other failures go to onError, and the
 * writer goes on with what follows.
 */
export class InputWriter {
  /** Pending is typed text not yet sent; only flush takes from it. */
  private pending = '';
  /** Sending is set while flush runs: it alone sends, one request at a time. */
  private sending = false;
  private send: ((data: string) => Promise<unknown>) | undefined;
  private closed = false;
  /** Idle settles when nothing is in flight or pending, for tests and for the end. */
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly onError: (e: unknown) => void) {}

  /** attach names where writes go from now on, and sends what was typed before. */
  attach(send: (data: string) => Promise<unknown>): void {
    this.send = send;
    this.kick();
  }

  /** write queues text typed in the terminal. */
  write(data: string): void {
    if (this.closed || data === '') return;
    if (!this.send && this.pending.length + data.length > MAX_BUFFERED_CHARS) return;
    this.pending += data;
    this.kick();
  }

  /** close drops what waits and sends nothing more. */
  close(): void {
    this.closed = true;
    this.pending = '';
    this.settleIdle();
  }

  /** ended says a request found the handle no longer running. */
  get ended(): boolean {
    return this.closed;
  }

  /** idle resolves once nothing is pending or in flight. */
  idle(): Promise<void> {
    if (!this.sending && (this.pending === '' || !this.send)) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  private kick(): void {
    if (!this.sending && this.send && this.pending !== '') void this.flush(this.send);
  }

  private async flush(send: (data: string) => Promise<unknown>): Promise<void> {
    this.sending = true;
    while (this.pending !== '' && !this.closed) {
      const data = takeChars(this.pending, MAX_INPUT_CHARS);
      this.pending = this.pending.slice(data.length);
      try {
        await send(data);
      } catch (e) {
        if (isEnded(e)) {
          this.close();
          break;
        }
        this.onError(e);
      }
    }
    this.sending = false;
    this.settleIdle();
  }

  private settleIdle(): void {
    if (this.sending) return;
    for (const w of this.idleWaiters.splice(0)) w();
  }
}

/** takeChars is the first max UTF-16 units of s, one fewer if that would split a surrogate pair. */
export function takeChars(s: string, max: number): string {
  if (s.length <= max) return s;
  const c = s.charCodeAt(max - 1);
  return s.slice(0, c >= 0xd800 && c <= 0xdbff ? max - 1 : max);
}

/** Size is a terminal's size in character cells. */
export interface Size {
  rows: number;
  cols: number;
}

/**
 * Resizer sends a terminal's size to its handle with resize: one request
 * at a time, and when the size changed several times meanwhile only the
 * latest is sent. attach takes the size the command started with, so a
 * size that changed while it started is sent at once. A handle that ended
 * ends it quietly, as for InputWriter.
 */
export class Resizer {
  private want: Size | undefined;
  private sent: Size | undefined;
  private sending = false;
  private send: ((s: Size) => Promise<unknown>) | undefined;
  private closed = false;

  constructor(private readonly onError: (e: unknown) => void) {}

  /** attach names where sizes go, and the size the handle has now. */
  attach(send: (s: Size) => Promise<unknown>, current: Size): void {
    this.send = send;
    this.sent = current;
    this.kick();
  }

  /** resize records the terminal's new size. */
  resize(s: Size): void {
    if (this.closed) return;
    this.want = { rows: s.rows, cols: s.cols };
    this.kick();
  }

  /** latest is the newest size asked for, sent or not. */
  get latest(): Size | undefined {
    return this.want;
  }

  close(): void {
    this.closed = true;
  }

  private kick(): void {
    if (!this.sending && this.send) void this.flush(this.send);
  }

  private async flush(send: (s: Size) => Promise<unknown>): Promise<void> {
    this.sending = true;
    while (!this.closed && this.want && !sameSize(this.want, this.sent)) {
      const s = this.want;
      try {
        await send(s);
        this.sent = s;
      } catch (e) {
        if (isEnded(e)) {
          this.close();
          break;
        }
        this.onError(e);
        this.sent = s; // not retried: the next change sends again
      }
    }
    this.sending = false;
  }
}

function sameSize(a: Size, b: Size | undefined): boolean {
  return b !== undefined && a.rows === b.rows && a.cols === b.cols;
}
