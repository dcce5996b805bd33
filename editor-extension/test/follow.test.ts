// The live-output follow loop against the real Go binary: a command prints,
// blocks on a FIFO the test writes to once the first line has arrived, then
// prints again, so the loop is seen waiting on readOutput's waitMs and going
// on from nextOffset, without any sleep.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { CancellationTokenSource } from 'vscode-jsonrpc/node';
import { DEFAULT_WAIT_MS, followOutput, type ReadOutput } from '../src/follow';
import {
  InitializedNotification,
  LongRunningRequest,
  MethodInitialize,
  ReadOutputRequest,
  ToolResultNotification,
  type ReadOutputParams,
} from '../src/protocol';
import { Session, startServer } from './client';

describe('followOutput', () => {
  let s: Session;

  before(async () => {
    s = startServer('header');
    await s.conn.sendRequest(MethodInitialize, { processId: process.pid, rootUri: null, capabilities: {} });
    await s.conn.sendNotification(InitializedNotification, {});
  });

  after(async () => {
    await s?.close();
  });

  /** A ReadOutput over the test's connection that records every request it sends. */
  function recordingRead(sent: ReadOutputParams[]): ReadOutput {
    return (params, signal) => {
      sent.push(params);
      const cts = new CancellationTokenSource();
      signal.addEventListener('abort', () => cts.cancel(), { once: true });
      return s.conn.sendRequest(ReadOutputRequest, params, cts.token).finally(() => cts.dispose());
    };
  }

  /** Resolves once the text so far includes want. */
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

  function fifo(name: string): string {
    const p = path.join(s.root, name);
    execFileSync('mkfifo', [p]);
    return p;
  }

  test('follows a running command to eof: its text is the artifact\'s, a non-UTF-8 byte included', async () => {
    const gate = fifo('gate-eof');
    // é is two bytes; \377 is no UTF-8 at all, so that chunk comes as base64.
    const script = 'echo "first é"; read x < "$1"; printf "second %s \\377 after\\n" "$x"';
    const started = await s.conn.sendRequest(LongRunningRequest, { argv: ['sh', '-c', script, 'sh', gate], label: 'follow' });
    const sent: ReadOutputParams[] = [];
    const out = textWaiter();
    const stop = new AbortController();
    const loop = followOutput({ handleId: started.handleId, read: recordingRead(sent), onText: out.onText, signal: stop.signal });

    await out.seen('first é\n');
    assert.ok(!out.text().includes('second'), 'the command is blocked on its gate');
    writeFileSync(gate, 'go\n'); // unblocks the command's read

    const end = await loop;
    const result = await s.waitFor(ToolResultNotification, (p) => p.handleId === started.handleId);
    const artifact = readFileSync(result.artifacts.outputPath);
    assert.deepEqual(end, { reason: 'eof', nextOffset: artifact.length });
    assert.equal(out.text(), artifact.toString('utf8'));
    assert.match(out.text(), /first é\n[^]*second go \uFFFD after\n/);
    // Every read went on from where the previous one stopped, and waited.
    assert.equal(sent[0]?.offset, 0);
    assert.ok(sent.length >= 2, `more than one read (got ${sent.length})`);
    assert.ok(sent.every((p) => p.waitMs === DEFAULT_WAIT_MS && p.handleId === started.handleId && p.stream === 'output'));
  });

  test('stopping cancels the waiting read and sends no other, even as more output comes', async () => {
    const gate = fifo('gate-stop');
    const started = await s.conn.sendRequest(LongRunningRequest, {
      argv: ['sh', '-c', 'echo "before stop"; read x < "$1"; echo "after stop"', 'sh', gate],
      label: 'stopped',
    });
    const sent: ReadOutputParams[] = [];
    const out = textWaiter();
    const stop = new AbortController();
    const loop = followOutput({ handleId: started.handleId, read: recordingRead(sent), onText: out.onText, signal: stop.signal });

    await out.seen('before stop\n');
    const sentBefore = sent.length;
    stop.abort(); // the view closed, while a read waits (up to 30 s) for bytes
    const end = await loop;
    assert.equal(end.reason, 'stopped');
    assert.equal(sent.length, sentBefore, 'no read after the stop');

    writeFileSync(gate, 'go\n');
    await s.waitFor(ToolResultNotification, (p) => p.handleId === started.handleId);
    assert.equal(sent.length, sentBefore, 'no read after the command printed more and ended');
    assert.ok(!out.text().includes('after stop'), `nothing passed on after the stop: ${JSON.stringify(out.text())}`);
  });

  test('a failing read ends the loop once, with the error', async () => {
    const sent: ReadOutputParams[] = [];
    const end = await followOutput({ handleId: 'no-such-handle', read: recordingRead(sent), onText: () => assert.fail('no text'), signal: new AbortController().signal });
    assert.equal(end.reason, 'error');
    assert.equal(sent.length, 1, 'no retry');
  });
});
