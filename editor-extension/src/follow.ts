import type { ReadOutputParams, ReadOutputResult } from './protocol';

/**
 * ReadOutput sends one readOutput request. Aborting signal cancels it
 * ($/cancelRequest); the promise may then settle either way.
 */
export type ReadOutput = (params: ReadOutputParams, signal: AbortSignal) => Promise<ReadOutputResult>;

/** FollowEnd says why a follow loop ended, and where it stopped reading. */
export type FollowEnd =
  | { reason: 'eof'; nextOffset: number }
  | { reason: 'stopped'; nextOffset: number }
  | { reason: 'error'; nextOffset: number; error: unknown };

/** FollowOptions are what followOutput reads and where the text goes. */
export interface FollowOptions {
  handleId: string;
  read: ReadOutput;
  /** OnText receives the decoded text of each chunk, in order. */
  onText: (text: string) => void;
  /** Signal stops the loop: the pending read is cancelled and no other is sent. */
  signal: AbortSignal;
  /** WaitMs is how long each read waits for new bytes. Default: 30000. */
  waitMs?: number;
  /** MaxBytes bounds each read. Default: the server's (65536). */
  maxBytes?: number;
}

/** DEFAULT_WAIT_MS is how long one readOutput waits for bytes while following. */
export const DEFAULT_WAIT_MS = 30_000;

/**
 * followOutput reads a handle's output.log from the start and passes its
 * text to onText as bytes arrive: each readOutput waits up to waitMs for new
 * bytes and goes on from the previous nextOffset, until eof (the command
 * ended and everything was read), until signal aborts, or until a read fails.
 * A failure ends the loop at once (no retry): an evicted artifact or a
 * server gone does not come back by asking again. Base64 chunks (bytes that
 * are not UTF-8) are decoded with the UTF-8 ones by one streaming decoder,
 * so their invalid bytes become U+FFFD as a file read would show them.
 */
export async function followOutput(o: FollowOptions): Promise<FollowEnd> {
  const decoder = new TextDecoder('utf-8');
  const waitMs = o.waitMs ?? DEFAULT_WAIT_MS;
  let offset = 0;
  const flush = () => {
    const rest = decoder.decode();
    if (rest) o.onText(rest);
  };
  while (!o.signal.aborted) {
    let r: ReadOutputResult;
    try {
      const params: ReadOutputParams = { handleId: o.handleId, stream: 'output', offset, waitMs };
      if (o.maxBytes !== undefined) params.maxBytes = o.maxBytes;
      r = await o.read(params, o.signal);
    } catch (error) {
      if (o.signal.aborted) break;
      flush();
      return { reason: 'error', nextOffset: offset, error };
    }
    if (o.signal.aborted) break;
    const bytes = r.encoding === 'base64' ? Buffer.from(r.data, 'base64') : Buffer.from(r.data, 'utf8');
    const text = decoder.decode(bytes, { stream: true });
    if (text) o.onText(text);
    offset = r.nextOffset;
    if (r.eof) {
      flush();
      return { reason: 'eof', nextOffset: offset };
    }
  }
  return { reason: 'stopped', nextOffset: offset };
}
