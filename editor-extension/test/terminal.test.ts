// The terminal's pieces against the real Go binary, as the extension joins
// them, without VS Code: `sh` in a pseudo-terminal with streamed output;
// keystrokes through InputWriter, sizes through Resizer, the screen's text
// through TerminalFeed fed by PtyOutputs. A second feed attaches while the
// shell runs (replay from offset 0, then the notifications). Both end with
// the artifact's text exactly: nothing lost, nothing twice.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { CancellationTokenSource } from 'vscode-jsonrpc/node';
import type { ReadOutput } from '../src/follow';
import {
  InitializedNotification,
  LongRunningRequest,
  MethodInitialize,
  OutputNotification,
  ProgressRequest,
  ReadOutputRequest,
  ResizeRequest,
  StepTransitionNotification,
  ToolResultNotification,
  WriteInputRequest,
} from '../src/protocol';
import { InputWriter, Resizer } from '../src/ptyInput';
import { PtyOutputs, TerminalFeed } from '../src/ptyStream';
import { Session, startServer } from './client';

describe('a terminal on a pty handle, through the binary', { timeout: 60_000 }, () => {
  let s: Session;
  const outputs = new PtyOutputs();

  before(async () => {
    s = startServer('header');
    s.conn.onNotification(OutputNotification, (p) => outputs.output(p));
    await s.conn.sendRequest(MethodInitialize, { processId: process.pid, rootUri: null, capabilities: {} });
    await s.conn.sendNotification(InitializedNotification, {});
  });

  after(async () => {
    await s?.close();
  });

  const read: ReadOutput = (params, signal) => {
    const cts = new CancellationTokenSource();
    signal.addEventListener('abort', () => cts.cancel(), { once: true });
    return s.conn.sendRequest(ReadOutputRequest, params, cts.token).finally(() => cts.dispose());
  };

  /** A feed on the handle, as a terminal makes it, with its text and a wait on it. */
  function screen(handleId: string) {
    let text = '';
    const waiters: { want: RegExp; resolve: (m: RegExpMatchArray) => void }[] = [];
    const stop = new AbortController();
    const feed = new TerminalFeed({
      handleId,
      read,
      placed: outputs.placed(handleId),
      signal: stop.signal,
      onText: (t) => {
        text += t;
        for (const w of [...waiters]) {
          const m = text.match(w.want);
          if (m) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(m);
          }
        }
      },
    });
    const sub = outputs.subscribe(handleId, (c) => feed.push(c));
    return {
      feed,
      stop,
      sub,
      text: () => text,
      /** seen resolves once the text matches want, and fails (not hangs) after 20 s. */
      seen: (want: RegExp) => {
        const m = text.match(want);
        if (m) return Promise.resolve(m);
        return new Promise<RegExpMatchArray>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`no ${String(want)} on the screen within 20 s: ${JSON.stringify(text)}`)), 20_000);
          waiters.push({ want, resolve: (m) => (clearTimeout(timer), resolve(m)) });
        });
      },
    };
  }

  test('sh: typed commands answer, stty size follows resize, a late terminal replays and follows, both equal the artifact', async () => {
    const started = await s.conn.sendRequest(LongRunningRequest, { argv: ['sh'], label: 'sh', pty: { rows: 24, cols: 80 }, streamOutput: true });
    const id = started.handleId;
    outputs.expect(id);
    const first = screen(id);
    const errors: unknown[] = [];
    const input = new InputWriter((e) => errors.push(e));
    input.attach((data) => s.conn.sendRequest(WriteInputRequest, { handleId: id, data }));
    const resizer = new Resizer((e) => errors.push(e));
    // Each answered resize, so that stty runs after the size it should see is set.
    const resized: string[] = [];
    let onResized: (() => void) | undefined;
    resizer.attach(async (size) => {
      await s.conn.sendRequest(ResizeRequest, { handleId: id, ...size });
      resized.push(`${size.rows}x${size.cols}`);
      onResized?.();
    }, { rows: 24, cols: 80 });

    // Typed key by key, as a terminal sends them.
    for (const k of 'echo hi-$((6*7))\r') input.write(k);
    await first.seen(/\r\nhi-42\r\n/);
    input.write('stty size\r');
    await first.seen(/\r\n24 80\r\n/);
    const answered = new Promise<void>((r) => (onResized = r));
    resizer.resize({ rows: 33, cols: 111 });
    await answered;
    assert.deepEqual(resized, ['33x111']);
    input.write('stty size\r');
    await first.seen(/\r\n33 111\r\n/);

    // A second terminal, attached now: the screen so far, then what follows.
    const second = screen(id);
    await second.seen(/33 111/);
    input.write('echo after-$((1+1))\r');
    await first.seen(/\r\nafter-2\r\n/);
    await second.seen(/\r\nafter-2\r\n/);

    input.write('exit 3\r');
    const result = await s.waitFor(ToolResultNotification, (p) => p.handleId === id);
    first.feed.end();
    second.feed.end();
    assert.equal((await first.feed.done).reason, 'eof');
    assert.equal((await second.feed.done).reason, 'eof');
    outputs.forget(id);
    first.sub.dispose();
    second.sub.dispose();
    await input.idle();

    assert.equal(result.exitCode, 3);
    const artifact = readFileSync(result.artifacts.stdoutPath, 'utf8');
    assert.equal(first.text(), artifact);
    assert.equal(second.text(), artifact);
    assert.equal(errors.length, 0, `no request failed: ${String(errors)}`);

    // After the end, writes and resizes meet NotRunning, which ends them quietly.
    const late = new InputWriter((e) => errors.push(e));
    late.attach((data) => s.conn.sendRequest(WriteInputRequest, { handleId: id, data }));
    late.write('x');
    await late.idle();
    assert.ok(late.ended);
    assert.equal(errors.length, 0, `NotRunning is no error: ${String(errors)}`);
  });

  test('a recipe\'s terminal step, without output notifications: progress says pty, the feed follows by reading', async () => {
    const started = await s.conn.sendRequest(LongRunningRequest, {
      argv: [],
      label: 'recipe',
      steps: [
        { name: 'plain', argv: ['sh', '-c', 'echo plain-step'] },
        { name: 'term', argv: ['sh', '-c', 'read x; echo "got-$x"; [ -t 0 ] && echo tty-yes'], pty: true },
      ],
    });
    const id = started.handleId;
    assert.ok(!outputs.placed(id), 'no notifications: not placed');
    const screenOf = screen(id);
    await screenOf.seen(/plain-step\n/);
    // The step's start is announced once its terminal is set up; progress then says so.
    await s.waitFor(StepTransitionNotification, (p) => p.handleId === id && p.step === 'term' && p.status === 'start');
    const p = await s.conn.sendRequest(ProgressRequest, { handleId: id });
    assert.ok('pty' in p && p.pty !== undefined && p.pty !== false && p.inputOpen === true, `progress: ${JSON.stringify(p)}`);
    await s.conn.sendRequest(WriteInputRequest, { handleId: id, data: 'abc\r' });
    await screenOf.seen(/got-abc\r\ntty-yes\r\n/);
    const result = await s.waitFor(ToolResultNotification, (p) => p.handleId === id);
    assert.equal((await screenOf.feed.done).reason, 'eof');
    screenOf.sub.dispose();
    assert.equal(screenOf.text(), readFileSync(result.artifacts.stdoutPath, 'utf8'));
    assert.equal(result.exitCode, 0);
  });
});
