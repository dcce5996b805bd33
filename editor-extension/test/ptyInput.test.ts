// The terminal's input side without VS Code: keystrokes become writeInput
// requests one at a time, in order, batched while one is in flight; sizes
// become resize requests, the latest only; a handle that ended stops both
// quietly. The fake sends resolve when the test says, so every step is
// driven by the test, not by time.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { InputWriter, MAX_INPUT_CHARS, Resizer, takeChars, type Size } from '../src/ptyInput';

/** A send whose calls the test answers one by one. */
function controlledSend<T>(): {
  send: (x: T) => Promise<unknown>;
  calls: T[];
  inFlight: () => number;
  answer: (err?: unknown) => Promise<void>;
  called: (n: number) => Promise<void>;
} {
  const calls: T[] = [];
  const pending: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  return {
    calls,
    send: (x) =>
      new Promise<void>((resolve, reject) => {
        calls.push(x);
        pending.push({ resolve, reject });
        for (const w of waiters.filter((w) => calls.length >= w.n)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      }),
    inFlight: () => pending.length,
    answer: async (err) => {
      const p = pending.shift();
      assert.ok(p, 'a request is in flight');
      if (err === undefined) p.resolve();
      else p.reject(err);
      // Let the writer's continuation run.
      await new Promise((r) => setImmediate(r));
    },
    called: (n) => (calls.length >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }))),
  };
}

const notRunning = Object.assign(new Error('not running'), { code: -32011 });

describe('InputWriter', () => {
  test('one request at a time, in order; what is typed meanwhile goes together in the next', async () => {
    const errors: unknown[] = [];
    const w = new InputWriter((e) => errors.push(e));
    const c = controlledSend<string>();
    w.attach(c.send);
    w.write('e');
    await c.called(1);
    w.write('c');
    w.write('ho');
    w.write(' hi\r');
    assert.deepEqual(c.calls, ['e'], 'nothing more while the first is in flight');
    assert.equal(c.inFlight(), 1);
    await c.answer();
    assert.deepEqual(c.calls, ['e', 'cho hi\r']);
    w.write('x');
    assert.equal(c.inFlight(), 1, 'still one at a time');
    await c.answer();
    await c.answer();
    await w.idle();
    assert.deepEqual(c.calls, ['e', 'cho hi\r', 'x']);
    assert.deepEqual(errors, []);
  });

  test('keys typed before the handle exists are sent once it does, in one request', async () => {
    const w = new InputWriter(() => assert.fail('no error'));
    w.write('ab');
    w.write('c');
    const c = controlledSend<string>();
    w.attach(c.send);
    await c.called(1);
    assert.deepEqual(c.calls, ['abc']);
    await c.answer();
    await w.idle();
  });

  test('NotRunning ends the writer quietly: nothing more is sent, no error is shown', async () => {
    const errors: unknown[] = [];
    const w = new InputWriter((e) => errors.push(e));
    const c = controlledSend<string>();
    w.attach(c.send);
    w.write('a');
    w.write('b');
    await c.called(1);
    w.write('c');
    await c.answer(notRunning);
    assert.ok(w.ended);
    w.write('d');
    await w.idle();
    assert.deepEqual(c.calls, ['a'], 'bc and d are dropped');
    assert.deepEqual(errors, []);
  });

  test('another failure is reported and the writer goes on with what follows', async () => {
    const errors: unknown[] = [];
    const w = new InputWriter((e) => errors.push(e));
    const c = controlledSend<string>();
    w.attach(c.send);
    w.write('a');
    await c.called(1);
    w.write('b');
    const boom = Object.assign(new Error('boom'), { code: -32603 });
    await c.answer(boom);
    assert.deepEqual(errors, [boom]);
    assert.deepEqual(c.calls, ['a', 'b']);
    await c.answer();
    await w.idle();
    assert.ok(!w.ended);
  });

  test('a paste longer than one request goes in several, in order, none splitting a surrogate pair', async () => {
    const w = new InputWriter(() => assert.fail('no error'));
    const sent: string[] = [];
    w.attach(async (d) => void sent.push(d));
    const paste = 'x'.repeat(MAX_INPUT_CHARS - 1) + '😀' + 'y'.repeat(MAX_INPUT_CHARS + 10);
    w.write(paste);
    await w.idle();
    assert.equal(sent.join(''), paste);
    assert.ok(sent.length >= 3, `several requests (got ${sent.length})`);
    assert.ok(sent.every((s) => s.length <= MAX_INPUT_CHARS));
    assert.equal(sent[0]?.length, MAX_INPUT_CHARS - 1, 'the cut moved before the pair');
  });

  test('takeChars never splits a surrogate pair', () => {
    assert.equal(takeChars('ab😀c', 3), 'ab');
    assert.equal(takeChars('ab😀c', 4), 'ab😀');
    assert.equal(takeChars('abc', 10), 'abc');
  });
});

describe('Resizer', () => {
  test('only the latest size is sent after the one in flight', async () => {
    const r = new Resizer(() => assert.fail('no error'));
    const c = controlledSend<Size>();
    r.attach(c.send, { rows: 24, cols: 80 });
    r.resize({ rows: 30, cols: 100 });
    await c.called(1);
    r.resize({ rows: 31, cols: 101 });
    r.resize({ rows: 40, cols: 120 });
    assert.equal(c.inFlight(), 1);
    await c.answer();
    await c.answer();
    assert.deepEqual(c.calls, [
      { rows: 30, cols: 100 },
      { rows: 40, cols: 120 },
    ]);
  });

  test('a size that changed while the command started is sent at attach; the same size is not', async () => {
    const c = controlledSend<Size>();
    const r = new Resizer(() => assert.fail('no error'));
    r.resize({ rows: 24, cols: 80 });
    r.attach(c.send, { rows: 24, cols: 80 });
    r.resize({ rows: 24, cols: 80 });
    assert.deepEqual(c.calls, [], 'started with it: nothing to send');

    const c2 = controlledSend<Size>();
    const r2 = new Resizer(() => assert.fail('no error'));
    r2.resize({ rows: 50, cols: 200 });
    r2.attach(c2.send, { rows: 24, cols: 80 });
    await c2.called(1);
    assert.deepEqual(c2.calls, [{ rows: 50, cols: 200 }]);
    await c2.answer();
  });

  test('NotRunning ends it quietly', async () => {
    const c = controlledSend<Size>();
    const r = new Resizer(() => assert.fail('no error'));
    r.attach(c.send, { rows: 24, cols: 80 });
    r.resize({ rows: 25, cols: 80 });
    await c.called(1);
    r.resize({ rows: 26, cols: 80 });
    await c.answer(Object.assign(new Error('gone'), { code: -32004 }));
    r.resize({ rows: 27, cols: 80 });
    assert.deepEqual(c.calls, [{ rows: 25, cols: 80 }]);
  });
});
