// The terminal's output side without VS Code: output notifications placed
// by byte offset (PtyOutputs), and the replay/follow join (TerminalFeed)
// against a fake artifact that answers readOutput as the server does:
// bytes from an offset, up to maxBytes, waiting (until bytes come or the
// command ends) when waitMs asks and there is nothing yet. The test moves
// the artifact and pushes the notifications itself; waits are on the text.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ReadOutput } from '../src/follow';
import type { OutputParams, ReadOutputParams, ReadOutputResult } from '../src/protocol';
import { exitLine, isEnded, outputBytes, type PtyChunk, PtyOutputs, TerminalFeed } from '../src/ptyStream';

/** A handle's artifact as the server keeps it, and a readOutput over it. */
class FakeArtifact {
  bytes = Buffer.alloc(0);
  ended = false;
  readonly sent: ReadOutputParams[] = [];
  private waiters: (() => void)[] = [];

  append(b: string | Buffer): void {
    this.bytes = Buffer.concat([this.bytes, typeof b === 'string' ? Buffer.from(b) : b]);
    for (const w of this.waiters.splice(0)) w();
  }

  end(): void {
    this.ended = true;
    for (const w of this.waiters.splice(0)) w();
  }

  read: ReadOutput = async (p, signal) => {
    this.sent.push(p);
    const from = p.offset ?? 0;
    for (;;) {
      if (signal.aborted) throw new Error('cancelled');
      const total = this.bytes.length;
      if (from < total || this.ended || !p.waitMs) {
        const chunk = this.bytes.subarray(from, Math.min(total, from + (p.maxBytes ?? 65536)));
        const valid = Buffer.from(chunk.toString('utf8')).equals(chunk);
        const r: ReadOutputResult = {
          data: valid ? chunk.toString('utf8') : chunk.toString('base64'),
          encoding: valid ? 'utf-8' : 'base64',
          offset: from,
          nextOffset: from + chunk.length,
          totalBytes: total,
          eof: this.ended && from + chunk.length >= total,
          running: !this.ended,
        };
        return r;
      }
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
    }
  };
}

/** Collects text and resolves once it includes what is wanted. */
function textWaiter(): { onText: (t: string) => void; text: () => string; seen: (want: string) => Promise<void> } {
  let text = '';
  const waiters: { want: string; resolve: () => void }[] = [];
  return {
    onText: (t) => {
      text += t;
      for (const w of waiters.filter((w) => text.includes(w.want))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    },
    text: () => text,
    seen: (want) => (text.includes(want) ? Promise.resolve() : new Promise((resolve) => waiters.push({ want, resolve }))),
  };
}

/** A chunk of the artifact from start to end, as a placed notification carries it. */
function chunkOf(a: FakeArtifact, start: number, end: number): PtyChunk {
  return { start, bytes: a.bytes.subarray(start, end) };
}

function out(seq: number, data: string, extra: Partial<OutputParams> = {}): OutputParams {
  return { handleId: 'h-1', stream: 'pty', seq, data, ...extra };
}

describe('PtyOutputs', () => {
  test('places each pty notification at its byte offset: lengths in bytes, base64 decoded, skipped counted', () => {
    const o = new PtyOutputs();
    const got: (PtyChunk | undefined)[] = [];
    o.expect('h-1');
    const sub = o.subscribe('h-1', (c) => got.push(c));
    o.output(out(1, 'é!')); // 3 bytes
    o.output(out(2, Buffer.from([0xff, 0x41]).toString('base64'), { encoding: 'base64' }));
    o.output(out(3, 'x', { skipped: 5 }));
    o.output({ handleId: 'h-1', stream: 'stderr', seq: 1, data: 'not in stdout.log' });
    o.output(out(1, 'another handle', { handleId: 'h-2' }));
    assert.deepEqual(
      got.map((c) => c && { start: c.start, bytes: [...c.bytes] }),
      [
        { start: 0, bytes: [0xc3, 0xa9, 0x21] },
        { start: 3, bytes: [0xff, 0x41] },
        { start: 10, bytes: [0x78] },
      ],
    );
    assert.ok(o.placed('h-1'));
    sub.dispose();
    o.output(out(4, 'after'));
    assert.equal(got.length, 3, 'no call after dispose');
    o.forget('h-1');
    o.forget('h-2');
    assert.equal(o.size, 0);
    o.output(out(1, 'x', { handleId: 'h-3' }));
    o.clear();
    assert.equal(o.size, 0);
    assert.ok(!o.placed('h-3'));
  });

  test('a gap in seq (or a handle first seen past seq 1) loses the offsets: listeners are told once', () => {
    const o = new PtyOutputs();
    const got: (PtyChunk | undefined)[] = [];
    o.subscribe('h-1', (c) => got.push(c));
    o.output(out(1, 'a'));
    o.output(out(3, 'c'));
    o.output(out(4, 'd'));
    assert.equal(got.length, 2);
    assert.equal(got[1], undefined);
    assert.ok(!o.placed('h-1'));

    const late: (PtyChunk | undefined)[] = [];
    o.subscribe('h-9', (c) => late.push(c));
    o.output(out(7, 'x', { handleId: 'h-9' }));
    assert.deepEqual(late, [undefined]);
    assert.ok(!o.placed('h-9'));
    assert.ok(!o.placed('h-unknown'));
  });

  test('stdout notifications of the same handle (a recipe with steps without a terminal) lose the offsets', () => {
    const o = new PtyOutputs();
    const got: (PtyChunk | undefined)[] = [];
    o.subscribe('h-1', (c) => got.push(c));
    o.output(out(1, 'pty first'));
    o.output({ handleId: 'h-1', stream: 'stdout', seq: 1, data: 'plain step' });
    o.output(out(2, 'pty again'));
    assert.equal(got.length, 2);
    assert.equal(got[1], undefined);
    assert.ok(!o.placed('h-1'));
  });

  test('outputBytes decodes text and base64', () => {
    assert.deepEqual([...outputBytes({ data: 'hé' })], [0x68, 0xc3, 0xa9]);
    assert.deepEqual([...outputBytes({ data: '/w==', encoding: 'base64' })], [0xff]);
  });
});

describe('TerminalFeed', () => {
  test('replays the artifact, then joins the notifications without repeats or gaps', async () => {
    const a = new FakeArtifact();
    a.append('$ echo hello wor');
    const t = textWaiter();
    const stop = new AbortController();
    const feed = new TerminalFeed({ handleId: 'h-1', read: a.read, onText: t.onText, placed: true, signal: stop.signal, waitMs: 10_000 });
    await t.seen('hello wor');
    // Notifications of bytes the replay already wrote: dropped, or cut.
    a.append('ld\r\n');
    feed.push(chunkOf(a, 0, 7)); // "$ echo " again
    feed.push(chunkOf(a, 7, 18)); // "hello world": overlaps the replay by "hello wor"
    feed.push(chunkOf(a, 18, 20));
    await t.seen('\r\n');
    assert.equal(t.text(), '$ echo hello world\r\n');
    // Bytes the server skipped: read from the artifact before the next chunk.
    a.append('skipped part|seen part');
    const seenAt = a.bytes.indexOf('seen part');
    feed.push(chunkOf(a, seenAt, a.bytes.length));
    await t.seen('seen part');
    assert.equal(t.text(), '$ echo hello world\r\nskipped part|seen part');
    const gapRead = a.sent.find((p) => p.offset === 20);
    assert.deepEqual(gapRead && { offset: gapRead.offset, maxBytes: gapRead.maxBytes }, { offset: 20, maxBytes: seenAt - 20 });
    // The end: what is left is read to eof.
    a.append('bye\r\n');
    a.end();
    feed.end();
    const end = await feed.done;
    assert.deepEqual(end, { reason: 'eof', offset: a.bytes.length });
    assert.equal(t.text(), a.bytes.toString('utf8'));
  });

  test('a chunk wholly past what the replay read waits for the artifact to catch up, then writes once', async () => {
    const a = new FakeArtifact();
    const t = textWaiter();
    const feed = new TerminalFeed({ handleId: 'h-1', read: a.read, onText: t.onText, placed: true, signal: new AbortController().signal, waitMs: 10_000 });
    // The notification of bytes 0-5 is lost to the coalescer (skipped 5): the
    // chunk of 5-8 arrives before the file holds bytes 0-5 for the reader.
    feed.push({ start: 5, bytes: Buffer.from('def') });
    a.append('abcde');
    a.append('def');
    await t.seen('def');
    assert.equal(t.text(), 'abcdedef');
    a.end();
    feed.end();
    assert.equal((await feed.done).reason, 'eof');
    assert.equal(t.text(), 'abcdedef');
  });

  test('characters split between chunks arrive whole; bytes that are not UTF-8 become U+FFFD', async () => {
    const a = new FakeArtifact();
    const t = textWaiter();
    const feed = new TerminalFeed({ handleId: 'h-1', read: a.read, onText: t.onText, placed: true, signal: new AbortController().signal });
    const bytes = Buffer.concat([Buffer.from('aé'), Buffer.from([0xff]), Buffer.from('z')]);
    a.append(bytes);
    feed.push({ start: 0, bytes: bytes.subarray(0, 2) }); // "a" and half of é
    feed.push({ start: 2, bytes: bytes.subarray(2) });
    a.end();
    feed.end();
    await feed.done;
    assert.equal(t.text(), 'aé\uFFFDz');
  });

  test('without placed notifications it follows by reading, each read waiting, to eof', async () => {
    const a = new FakeArtifact();
    a.append('one\r\n');
    const t = textWaiter();
    const feed = new TerminalFeed({ handleId: 'h-1', read: a.read, onText: t.onText, placed: false, signal: new AbortController().signal, waitMs: 10_000 });
    await t.seen('one\r\n');
    a.append('two\r\n');
    await t.seen('two\r\n');
    a.end();
    assert.deepEqual(await feed.done, { reason: 'eof', offset: 10 });
    assert.equal(t.text(), 'one\r\ntwo\r\n');
    assert.ok(a.sent.slice(1).every((p) => p.waitMs === 10_000), 'the follow reads wait');
    assert.equal(a.sent[0]?.waitMs, 0, 'the replay does not');
  });

  test('offsets lost mid-way: it goes on by reading from where it was', async () => {
    const a = new FakeArtifact();
    const t = textWaiter();
    const feed = new TerminalFeed({ handleId: 'h-1', read: a.read, onText: t.onText, placed: true, signal: new AbortController().signal, waitMs: 10_000 });
    a.append('ab');
    feed.push({ start: 0, bytes: Buffer.from('ab') });
    await t.seen('ab');
    feed.push(undefined);
    a.append('cd');
    await t.seen('abcd');
    a.end();
    assert.equal((await feed.done).reason, 'eof');
    assert.equal(t.text(), 'abcd');
  });

  test('stopping cancels the waiting read and writes nothing more', async () => {
    const a = new FakeArtifact();
    a.append('x');
    const t = textWaiter();
    const stop = new AbortController();
    const feed = new TerminalFeed({ handleId: 'h-1', read: a.read, onText: t.onText, placed: false, signal: stop.signal, waitMs: 10_000 });
    await t.seen('x');
    stop.abort();
    assert.equal((await feed.done).reason, 'stopped');
    a.append('y');
    a.end();
    assert.equal(t.text(), 'x');
  });

  test('a failing read of a gap is reported, the gap skipped, and the notifications go on', async () => {
    const errors: unknown[] = [];
    const t = textWaiter();
    let reads = 0;
    const read: ReadOutput = async (p) => {
      if (reads++ === 0) return { data: '', encoding: 'utf-8', offset: 0, nextOffset: 0, totalBytes: 0, eof: false, running: true };
      throw Object.assign(new Error(`evicted at ${p.offset}`), { code: -32003 });
    };
    const feed = new TerminalFeed({ handleId: 'h-1', read, onText: t.onText, placed: true, signal: new AbortController().signal, onReadError: (e) => errors.push(e) });
    feed.push({ start: 4, bytes: Buffer.from('tail') });
    await t.seen('tail');
    assert.equal(errors.length, 1);
    assert.equal(t.text(), 'tail');
  });
});

test('exitLine says how the command ended', () => {
  assert.equal(exitLine({ status: 'completed', exitCode: 0, signal: null }), '[process exited with code 0]');
  assert.equal(exitLine({ status: 'cancelled', exitCode: null, signal: 'SIGTERM' }), '[process ended by SIGTERM, cancelled]');
  assert.equal(exitLine({ status: 'timedOut', exitCode: 7, signal: null, timeoutReason: 'inactivity' }), '[process exited with code 7, timed out (inactivity)]');
});

test('isEnded knows NotRunning and a handle gone, nothing else', () => {
  assert.ok(isEnded({ code: -32011 }));
  assert.ok(isEnded({ code: -32004 }));
  assert.ok(!isEnded({ code: -32603 }));
  assert.ok(!isEnded(new Error('x')));
});
