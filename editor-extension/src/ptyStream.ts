import type { ReadOutput } from './follow';
import type { OutputParams, OutputStream, ReadOutputParams, ReadOutputResult, ToolResult } from './protocol';

/** PtyChunk is a run of a handle's terminal output and where it sits in the artifact. */
export interface PtyChunk {
  /** Start is the byte offset of bytes[0] in the handle's output artifact. */
  start: number;
  bytes: Uint8Array;
}

/** outputBytes decodes the data of an output notification or a readOutput answer to the bytes it carries. */
export function outputBytes(p: { data: string; encoding?: string }): Uint8Array {
  return p.encoding === 'base64' ? Buffer.from(p.data, 'base64') : Buffer.from(p.data, 'utf8');
}

/** PtyListener receives a handle's chunks in order; undefined says offsets are lost from then on. */
export type PtyListener = (chunk: PtyChunk | undefined) => void;

/** One handle's place in its notification stream. */
interface Tracked {
  /** Seq is the seq of the last notification seen; 0 before any. */
  seq: number;
  /** End is the artifact offset after the last notification's bytes. */
  end: number;
  /** Placed says every notification from seq 1 was seen, so offsets are exact. */
  placed: boolean;
}

/**
 * PtyOutputs gives every `output` notification of stream "pty" its place in
 * the handle's artifact. PROTOCOL.md promises that the notifications of a
 * stream, their `skipped` bytes taken from the artifact, are the artifact
 * byte for byte, with seq counting up by one from 1; so the offset of a
 * notification's data is the sum of every earlier notification's `skipped`
 * and byte length, plus its own `skipped`. That holds only for a handle seen
 * from seq 1: one seen from later on (or with a gap in seq) is not placed,
 * and its listeners are told so once. It knows nothing of VS Code.
 */
export class PtyOutputs {
  /** Handles by id, from their first notification (or expect) until forget. */
  private readonly handles = new Map<string, Tracked>();
  private readonly listeners = new Map<string, Set<PtyListener>>();

  /**
   * expect says a handle was started with streamOutput by this client, so
   * its notifications will be seen from seq 1 (some may already have been).
   */
  expect(handleId: string): void {
    if (!this.handles.has(handleId)) this.handles.set(handleId, { seq: 0, end: 0, placed: true });
  }

  /** placed says the handle's notifications are being seen with exact offsets. */
  placed(handleId: string): boolean {
    return this.handles.get(handleId)?.placed ?? false;
  }

  /**
   * output takes one `output` notification. A terminal's bytes are kept in
   * stdout.log, so stdout notifications of the same handle (a recipe whose
   * other steps have no terminal) put bytes between them there: from the
   * first one on, the handle's pty notifications are not placed.
   */
  output(p: OutputParams): void {
    if (p.stream !== 'pty' && p.stream !== 'stdout') return;
    let t = this.handles.get(p.handleId);
    if (!t) {
      t = { seq: 0, end: 0, placed: true };
      this.handles.set(p.handleId, t);
    }
    if (p.stream === 'stdout') {
      if (t.placed) this.lose(p.handleId, t);
      return;
    }
    const bytes = outputBytes(p);
    const start = t.end + (p.skipped ?? 0);
    t.end = start + bytes.length;
    const inOrder = p.seq === t.seq + 1;
    t.seq = p.seq;
    if (!t.placed) return;
    if (!inOrder) {
      this.lose(p.handleId, t);
      return;
    }
    for (const fn of [...(this.listeners.get(p.handleId) ?? [])]) fn({ start, bytes });
  }

  /** lose marks a handle's offsets unknown from now on, and tells its listeners once. */
  private lose(handleId: string, t: Tracked): void {
    t.placed = false;
    for (const fn of [...(this.listeners.get(handleId) ?? [])]) fn(undefined);
  }

  /** subscribe calls fn with each later chunk of the handle, in order. */
  subscribe(handleId: string, fn: PtyListener): { dispose(): void } {
    let set = this.listeners.get(handleId);
    if (!set) this.listeners.set(handleId, (set = new Set()));
    set.add(fn);
    return {
      dispose: () => {
        set.delete(fn);
        if (set.size === 0 && this.listeners.get(handleId) === set) this.listeners.delete(handleId);
      },
    };
  }

  /** forget drops a handle that ended: its toolResult came, after all its output. */
  forget(handleId: string): void {
    this.handles.delete(handleId);
  }

  /** clear forgets every handle: their server stopped, and a new one numbers its handles anew. */
  clear(): void {
    this.handles.clear();
  }

  /** size is how many handles are tracked, for tests. */
  get size(): number {
    return this.handles.size;
  }
}

/** FeedEnd says why a TerminalFeed stopped. */
export type FeedEnd = { reason: 'eof'; offset: number } | { reason: 'stopped'; offset: number } | { reason: 'error'; offset: number; error: unknown };

/** FeedOptions say what a TerminalFeed reads and where its text goes. */
export interface FeedOptions {
  handleId: string;
  read: ReadOutput;
  /** OnText receives the decoded text, in order, without gaps or repeats. */
  onText: (text: string) => void;
  /**
   * Placed says output notifications with exact offsets will be pushed
   * (PtyOutputs.placed); otherwise the feed follows by reading, each read
   * waiting for new bytes.
   */
  placed: boolean;
  /** Signal stops the feed: the pending read is cancelled and nothing more is written. */
  signal: AbortSignal;
  /** OnReadError is told of a read that failed while notifications go on; the feed skips what it could not read. */
  onReadError?: (error: unknown) => void;
  /** Stream is the artifact to read. Default: "pty". */
  stream?: OutputStream;
  /** WaitMs is how long a read waits for bytes that must come. Default: 30000. */
  waitMs?: number;
  /** MaxBytes bounds each read. Default: the server's (65536). */
  maxBytes?: number;
}

/** MAX_READ_BYTES is the most one readOutput may ask for (the server's limit, 1 MiB). */
const MAX_READ_BYTES = 1 << 20;

/** Event is what the feed's loop takes from its queue, in arrival order. */
type Event = { kind: 'chunk'; chunk: PtyChunk } | { kind: 'lost' } | { kind: 'end' };

/**
 * TerminalFeed writes a running handle's terminal output to one terminal: it
 * first replays the artifact from offset 0 with readOutput, then follows the
 * output notifications pushed to it, joining the two by byte offset: a
 * chunk wholly before the cursor (already read) is dropped, one that
 * overlaps it is cut, and one that starts past it (the server skipped bytes,
 * or the replay stopped short) has the gap read from the artifact first. So
 * the text is the artifact's, once each, in order. Without placed
 * notifications it follows by reading alone. One streaming decoder takes
 * every byte, so a character split between chunks arrives whole, and bytes
 * that are not UTF-8 become U+FFFD. end (the handle's toolResult) reads to
 * the artifact's end and stops.
 */
export class TerminalFeed {
  private cursor = 0;
  private readonly decoder = new TextDecoder('utf-8');
  private readonly queue: Event[] = [];
  private wake: (() => void) | undefined;
  private placed: boolean;
  /** Done settles once the feed stopped: read to the end, stopped, or failed. */
  readonly done: Promise<FeedEnd>;

  constructor(private readonly o: FeedOptions) {
    this.placed = o.placed;
    o.signal.addEventListener('abort', () => this.poke(), { once: true });
    this.done = this.run();
  }

  /** push takes the next placed chunk of the handle's output. */
  push(chunk: PtyChunk | undefined): void {
    this.queue.push(chunk ? { kind: 'chunk', chunk } : { kind: 'lost' });
    this.poke();
  }

  /** end says the handle ended: every notification of its output has been pushed. */
  end(): void {
    this.queue.push({ kind: 'end' });
    this.poke();
  }

  private poke(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  private async next(): Promise<Event | undefined> {
    while (this.queue.length === 0 && !this.o.signal.aborted) await new Promise<void>((r) => (this.wake = r));
    return this.o.signal.aborted ? undefined : this.queue.shift();
  }

  private async run(): Promise<FeedEnd> {
    try {
      // The replay: what the artifact holds now.
      if ((await this.readOn(Infinity, 0)) === 'eof') return this.finish();
      if (this.placed) {
        for (;;) {
          const e = await this.next();
          if (!e) return { reason: 'stopped', offset: this.cursor };
          if (e.kind === 'lost') {
            this.placed = false;
            break;
          }
          if (e.kind === 'end') {
            await this.readOn(Infinity, this.waitMs, true);
            return this.finish();
          }
          await this.chunk(e.chunk);
        }
      }
      // Follow by reading, each read waiting for bytes, to the end.
      while (!this.o.signal.aborted) {
        if ((await this.readOn(Infinity, this.waitMs)) === 'eof') return this.finish();
      }
      return { reason: 'stopped', offset: this.cursor };
    } catch (error) {
      if (this.o.signal.aborted) return { reason: 'stopped', offset: this.cursor };
      this.flush();
      return { reason: 'error', offset: this.cursor, error };
    }
  }

  private get waitMs(): number {
    return this.o.waitMs ?? 30_000;
  }

  private async chunk(c: PtyChunk): Promise<void> {
    const end = c.start + c.bytes.length;
    if (end <= this.cursor) return;
    if (c.start > this.cursor) {
      // A gap: its bytes are in the artifact (they were written before the chunk).
      try {
        await this.readOn(c.start, this.waitMs);
      } catch (error) {
        if (this.o.signal.aborted) throw error;
        this.o.onReadError?.(error);
      }
      if (this.o.signal.aborted) return;
      if (this.cursor < c.start) this.cursor = c.start; // unreadable: skipped, said by onReadError
    }
    this.write(c.bytes.subarray(this.cursor - c.start));
    this.cursor = end;
  }

  /**
   * readOn reads from the cursor up to limit: with waitMs 0 only what the
   * artifact holds now; with a wait, until limit (or, without a limit, until
   * some bytes came, or the end when toEnd), each read waiting for bytes.
   * It says "eof" once the command ended and everything was read.
   */
  private async readOn(limit: number, waitMs: number, toEnd = false): Promise<'eof' | 'more'> {
    while (this.cursor < limit && !this.o.signal.aborted) {
      const params: ReadOutputParams = { handleId: this.o.handleId, stream: this.o.stream ?? 'pty', offset: this.cursor, waitMs };
      const max = Math.min(this.o.maxBytes ?? Infinity, limit - this.cursor, MAX_READ_BYTES);
      if (Number.isFinite(max) && max < MAX_READ_BYTES) params.maxBytes = max;
      const r: ReadOutputResult = await this.o.read(params, this.o.signal);
      if (this.o.signal.aborted) break;
      const bytes = outputBytes(r);
      // A read may start before the cursor only if the artifact shrank; never write twice.
      const skip = Math.max(0, this.cursor - r.offset);
      if (bytes.length > skip) this.write(bytes.subarray(skip));
      this.cursor = Math.max(this.cursor, r.nextOffset);
      if (r.eof) return 'eof';
      // Caught up; or only an incomplete character is there, which waits for its end.
      if (waitMs === 0 && (r.nextOffset >= r.totalBytes || bytes.length === 0)) break;
      if (waitMs > 0 && bytes.length > 0 && limit === Infinity && !toEnd) break;
    }
    return 'more';
  }

  private write(bytes: Uint8Array): void {
    const text = this.decoder.decode(bytes, { stream: true });
    if (text) this.o.onText(text);
  }

  private flush(): void {
    const rest = this.decoder.decode();
    if (rest) this.o.onText(rest);
  }

  private finish(): FeedEnd {
    this.flush();
    return { reason: 'eof', offset: this.cursor };
  }
}

/** exitLine is the line a terminal prints when its command ended: "[process exited with code 0]". */
export function exitLine(r: Pick<ToolResult, 'status' | 'exitCode' | 'signal' | 'timeoutReason'>): string {
  const how = r.exitCode !== null && r.exitCode !== undefined ? `exited with code ${r.exitCode}` : r.signal ? `ended by ${r.signal}` : 'ended';
  const why = r.status === 'cancelled' ? ', cancelled' : r.status === 'timedOut' ? `, timed out${r.timeoutReason === 'inactivity' ? ' (inactivity)' : ''}` : '';
  return `[process ${how}${why}]`;
}

/** isEnded says an error answers a request to a handle that is no longer running (NotRunning, or a handle gone). */
export function isEnded(e: unknown): boolean {
  const code = typeof e === 'object' && e !== null && 'code' in e ? (e as { code: unknown }).code : undefined;
  return code === -32011 || code === -32004;
}
