// The session the extension keeps for the next window (toolhost.persist):
// the resume it sends from the workspace state, the fallback to a new
// session when the server no longer has it, and the seq it tracks; then the
// whole round against the real binary under --persist: a window's server
// ended without shutdown (as deactivate ends it), a command that went on and
// ended meanwhile, and the next window's server resuming the session.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { ResponseError } from 'vscode-jsonrpc/node';
import { progressHandles } from '../src/answers';
import { ToolsModel } from '../src/model';
import {
  CodeSessionNotFound,
  ExitNotification,
  InitializedNotification,
  type InitializeParams,
  type InitializeResult,
  LongRunningRequest,
  ProgressRequest,
  ReadOutputRequest,
  ShutdownRequest,
  type ToolResult,
  ToolResultNotification,
  WaitRequest,
} from '../src/protocol';
import { type Memento, readSessionState, resumeCapability, SeqTracker, SESSION_KEY, sessionIdOf, sessionNotFound, SessionStore, withResume } from '../src/session';
import { type Session, startServer, until } from './client';

/** A workspace state in memory, as context.workspaceState keeps it. */
class FakeMemento implements Memento {
  readonly values = new Map<string, unknown>();
  constructor(init?: Record<string, unknown>) {
    for (const [k, v] of Object.entries(init ?? {})) this.values.set(k, v);
  }
  get<T>(key: string): T | undefined {
    return this.values.get(key) as T | undefined;
  }
  update(key: string, value: unknown): Thenable<void> {
    if (value === undefined) this.values.delete(key);
    else this.values.set(key, structuredClone(value));
    return Promise.resolve();
  }
}

describe('the session kept for the next window', () => {
  test('resume params are built from the stored state: its id and lastSeq, for this root, when persisting', () => {
    const stored = { sessionId: 's-abc', lastSeq: 7, root: '/ws' };
    const store = new SessionStore(new FakeMemento({ [SESSION_KEY]: stored }));
    assert.deepEqual(store.resume('/ws', true), { sessionId: 's-abc', lastSeq: 7 });
    assert.equal(store.resume('/ws', false), undefined, 'toolhost.persist off: no resume');
    assert.equal(store.resume('/other', true), undefined, 'another first folder: the server has no such session for it');
    // initializationOptions keep the settings' options beside resume.
    assert.deepEqual(withResume({ readRoots: ['/r'] }, store.resume('/ws', true)), { readRoots: ['/r'], resume: { sessionId: 's-abc', lastSeq: 7 } });
    assert.deepEqual(withResume({ readRoots: [] }, undefined), { readRoots: [] });
    // Nothing stored, or something that is not a session: a new session.
    assert.equal(new SessionStore(new FakeMemento()).resume('/ws', true), undefined);
    for (const junk of ['s-abc', { sessionId: '', lastSeq: 0, root: '/ws' }, { sessionId: 's', lastSeq: -1, root: '/ws' }, { sessionId: 's', lastSeq: 1.5, root: '/ws' }, { sessionId: 's', root: '/ws' }]) {
      assert.equal(readSessionState(junk), undefined, JSON.stringify(junk));
      assert.equal(new SessionStore(new FakeMemento({ [SESSION_KEY]: junk })).resume('/ws', true), undefined);
    }
    // lastSeq 0 is sent as 0: every result of the session after none.
    assert.deepEqual(new SessionStore(new FakeMemento({ [SESSION_KEY]: { ...stored, lastSeq: 0 } })).resume('/ws', true), { sessionId: 's-abc', lastSeq: 0 });
  });

  test('the session an initialize answers is stored; the one resumed goes on from the lastSeq sent, another from 0', () => {
    const memento = new FakeMemento();
    const store = new SessionStore(memento);
    assert.equal(store.started('s-1', '/ws', undefined), false);
    assert.deepEqual(memento.get(SESSION_KEY), { sessionId: 's-1', lastSeq: 0, root: '/ws' });
    store.received(1);
    store.received(2);
    assert.deepEqual(memento.get(SESSION_KEY), { sessionId: 's-1', lastSeq: 2, root: '/ws' });

    // The next window: it resumes from the stored state.
    const next = new SessionStore(memento);
    const sent = next.resume('/ws', true);
    assert.deepEqual(sent, { sessionId: 's-1', lastSeq: 2 });
    assert.equal(next.started('s-1', '/ws', sent), true, 'the session resumed');
    assert.equal(next.received(2), false, 'a seq at lastSeq is a repeat');
    assert.equal(next.received(3), true);
    assert.deepEqual(memento.get(SESSION_KEY), { sessionId: 's-1', lastSeq: 3, root: '/ws' });

    // A crash restart in the same window resumes again: what it received stays.
    assert.equal(next.started('s-1', '/ws', next.resume('/ws', true)), true);
    assert.equal(next.received(3), false);

    // A new session (no resume, or a server that answered another id) starts from 0.
    assert.equal(next.started('s-2', '/ws', undefined), false);
    assert.deepEqual(memento.get(SESSION_KEY), { sessionId: 's-2', lastSeq: 0, root: '/ws' });
    assert.equal(next.received(1), true, 'seq 1 of another session is new');
  });

  test('-32030 SessionNotFound for the resume sent: the session is forgotten and a new one starts; other failures are the user\'s', () => {
    const stored = { sessionId: 's-gone', lastSeq: 4, root: '/ws' };
    const memento = new FakeMemento({ [SESSION_KEY]: stored });
    const store = new SessionStore(memento);
    const sent = store.resume('/ws', true);
    const notFound = new ResponseError(CodeSessionNotFound, 'session not found: it was detached longer than --linger', { sessionId: 's-gone', reason: 'expired' });
    assert.deepEqual(sessionNotFound(notFound), { sessionId: 's-gone', reason: 'expired' });
    // Read by shape: another copy of vscode-jsonrpc's ResponseError, or a plain object.
    assert.deepEqual(sessionNotFound({ code: -32030, message: 'x', data: { sessionId: 's', reason: 'ended' } }), { sessionId: 's', reason: 'ended' });
    assert.deepEqual(sessionNotFound({ code: -32030 }), { sessionId: '', reason: 'unknown' });

    // Another error (a refused setting) keeps the session: that failure is shown.
    const invalid = new ResponseError(-32602, 'invalid params: initializationOptions.sandbox: looser', { field: 'initializationOptions.sandbox' });
    assert.equal(sessionNotFound(invalid), undefined);
    assert.equal(store.failed(invalid, sent), undefined);
    assert.deepEqual(store.state, stored);
    // -32030 without a resume sent is no session of ours to forget.
    assert.equal(store.failed(notFound, undefined), undefined);
    assert.deepEqual(store.state, stored);

    assert.deepEqual(store.failed(notFound, sent), { sessionId: 's-gone', reason: 'expired' });
    assert.equal(store.state, undefined);
    assert.equal(memento.get(SESSION_KEY), undefined, 'cleared in the workspace state');
    assert.equal(store.resume('/ws', true), undefined, 'the next initialize asks for a new session');
    assert.equal(store.started('s-new', '/ws', undefined), false);
    assert.deepEqual(memento.get(SESSION_KEY), { sessionId: 's-new', lastSeq: 0, root: '/ws' });
  });

  test('lastSeq is the highest contiguous seq received; repeats are told apart', () => {
    const t = new SeqTracker();
    assert.equal(t.lastSeq, 0);
    assert.equal(t.receive(1), true);
    assert.equal(t.receive(2), true);
    assert.equal(t.lastSeq, 2);
    // A gap: 3 missing. lastSeq stays below it, so a resume asks for 3 again.
    assert.equal(t.receive(4), true);
    assert.equal(t.receive(5), true);
    assert.equal(t.lastSeq, 2);
    assert.equal(t.receive(4), false, 'had above the gap');
    assert.equal(t.receive(3), true);
    assert.equal(t.lastSeq, 5, 'the gap filled: contiguous up to 5');
    assert.equal(t.receive(1), false);
    assert.equal(t.receive(5), false);
    assert.equal(t.receive(undefined), true, 'an answer\'s result has no seq: never a repeat');
    assert.equal(t.lastSeq, 5);
    // From a resumed lastSeq.
    const r = new SeqTracker(10);
    assert.equal(r.receive(10), false);
    assert.equal(r.receive(12), true);
    assert.equal(r.lastSeq, 10);
    assert.equal(r.receive(11), true);
    assert.equal(r.lastSeq, 12);
  });

  test('the initialize answer: sessionId and capabilities.resume, read by shape', () => {
    assert.equal(sessionIdOf({ sessionId: 's-1' }), 's-1');
    assert.equal(sessionIdOf({ sessionId: '' }), undefined);
    assert.equal(sessionIdOf({}), undefined);
    assert.equal(sessionIdOf(undefined), undefined);
    assert.equal(resumeCapability({ capabilities: { resume: true } }), true);
    assert.equal(resumeCapability({ capabilities: { resume: false } }), false);
    assert.equal(resumeCapability({ capabilities: {} }), false);
    assert.equal(resumeCapability(undefined), false);
  });

  test('the Tools view: a resumed session\'s handles keep their rows; another session\'s are apart', () => {
    let clock = 1000;
    const m = new ToolsModel(() => clock);
    m.serverStarted(undefined, 's-1');
    const running = m.started({ handleId: 'h-1', commandId: 'cmd-1', pid: 1, processGroupId: 1, startedAt: '', command: 'sleep' }, 'sleep 9');
    const key = running.key;
    assert.equal(key, 's-1:h-1', 'the row id names the session');
    m.serverLost(); // the server process crashed
    assert.equal(running.lost, true);
    assert.equal(m.serverStarted(undefined, 's-1'), true, 'the same session, resumed');
    assert.equal(m.get('h-1'), running, 'the same handle, the same row');
    assert.equal(running.key, key);
    assert.equal(running.status, 'running');
    assert.equal(running.lost, false);
    assert.equal(m.list().length, 1, 'no row duplicated');
    // Another session: the old rows are retired, the new h-1 is another row.
    clock += 10;
    assert.equal(m.serverStarted(undefined, 's-2'), false);
    const other = m.started({ handleId: 'h-1', commandId: 'cmd-1', pid: 2, processGroupId: 2, startedAt: '', command: 'true' }, 'true');
    assert.equal(other.key, 's-2:h-1');
    assert.deepEqual(m.list().map((t) => t.key), ['s-2:h-1', 's-1:h-1']);

    // A window after a reload knows the handles first by their re-sent
    // result or a progress snapshot; the label comes with progress either way.
    const fresh = new ToolsModel(() => 50_000);
    fresh.serverStarted(undefined, 's-1');
    fresh.toolResult({ ...resultOf('h-2'), startedAt: '1970-01-01T00:00:20.000Z' });
    fresh.progress(progressOf('h-2', 'completed', 'echo done'));
    fresh.progress(progressOf('h-1', 'running', 'sleep 9', 20_000));
    assert.deepEqual(fresh.list().map((t) => `${t.key} ${t.label} ${t.status}`), ['s-1:h-1 sleep 9 running', 's-1:h-2 echo done completed']);
    assert.equal(fresh.get('h-1')!.startedAt, 30_000, 'started elapsedMs before the snapshot');
    assert.equal(fresh.get('h-2')!.startedAt, 20_000, 'its result says when it started');
  });
});

function resultOf(handleId: string): ToolResult {
  return {
    commandId: 'cmd', handleId, seq: 1, status: 'completed', success: true, exitCode: 0, signal: null,
    startedAt: '', endedAt: '', durationMs: 5, stdout: '', stderr: '', stdoutTruncated: false, stderrTruncated: false,
    artifacts: { stdoutPath: '', stderrPath: '', outputPath: '/a/out', byteCount: 0, lineCount: 0, sha256: '' }, steps: [],
  };
}

function progressOf(handleId: string, status: 'running' | 'completed', label: string, elapsedMs = 5) {
  return { handleId, commandId: 'cmd', label, status, pid: 1, currentStep: 0, totalSteps: 0, stepName: '', elapsedMs, updatedAt: '', lastHeartbeatAt: null, outputBytes: 0, exitCode: null };
}

describe('a session resumed through the real binary (--persist)', () => {
  const state = mkdtempSync(path.join(tmpdir(), 'toolhost-state-'));
  const args = ['--persist', '--state-dir', state, '--linger', '2m'];
  const servers: Session[] = [];
  const start = (root?: string) => {
    const s = startServer('header', args, root);
    servers.push(s);
    return s;
  };
  const initialize = async (s: Session, store: SessionStore, root: string) => {
    const sent = store.resume(root, true);
    const params = { processId: process.pid, rootUri: null, capabilities: {}, initializationOptions: withResume({}, sent) } as unknown as InitializeParams;
    return { sent, init: await s.conn.sendRequest<InitializeResult>('initialize', params) };
  };

  after(async () => {
    for (const s of servers) await s.close();
    // The holder of the sessions ends with its last session; none is left.
    await until(() => holders(state).length === 0, 10_000, 'the holder to end').catch(() => {
      for (const pid of holders(state)) process.kill(pid, 'SIGKILL');
    });
  });

  test('a bogus stored session falls back to a new one; a window ended without shutdown is resumed: output so far, each result once', async () => {
    const memento = new FakeMemento();
    const first = start();
    const root = first.root;
    mkdirSync(path.join(root, '.gates'));
    // A stored session the server never had: -32030, then a new session.
    memento.values.set(SESSION_KEY, { sessionId: 's-0000', lastSeq: 3, root });
    const store = new SessionStore(memento);
    let error: unknown;
    await initialize(first, store, root).catch((e: unknown) => (error = e));
    assert.deepEqual(store.failed(error, store.resume(root, true)), { sessionId: 's-0000', reason: 'unknown' });
    // The extension ends that server (it has no session) and starts another, without resume.
    await first.close();
    const one = start(root);
    const a = await initialize(one, store, root);
    assert.equal(a.sent, undefined);
    assert.equal(a.init.capabilities.resume, true);
    assert.equal(store.started(a.init.sessionId, root, a.sent), false);
    await one.conn.sendNotification(InitializedNotification, {});

    const quick = await one.conn.sendRequest(LongRunningRequest, { argv: ['echo', 'quick'], label: 'quick' });
    await one.waitFor(ToolResultNotification, (r) => r.handleId === quick.handleId);
    for (const r of one.received(ToolResultNotification)) store.received(r.seq);
    const long = await one.conn.sendRequest(LongRunningRequest, {
      argv: ['sh', '-c', 'echo before-reload; until [ -e .gates/go ]; do sleep 0.05; done; echo after-reload'],
      label: 'long',
    });
    const before = await one.conn.sendRequest(ReadOutputRequest, { handleId: long.handleId, offset: 0, waitMs: 10_000 });
    assert.equal(before.data, 'before-reload\n');
    assert.deepEqual(store.state, { sessionId: a.init.sessionId, lastSeq: 1, root });

    // The window goes: its server is ended by its pid, without shutdown, as
    // deactivate does; a readOutput waiting for bytes is in flight.
    void one.conn.sendRequest(ReadOutputRequest, { handleId: long.handleId, offset: before.nextOffset, waitMs: 30_000 }).catch(() => undefined);
    const t0 = Date.now();
    one.child.kill('SIGTERM');
    await one.exited;
    assert.ok(Date.now() - t0 < 5000, 'the front ends at once, not after the in-flight read');
    // The command goes on, and ends while no window is attached.
    writeFileSync(path.join(root, '.gates/go'), '');

    // The next window resumes from the workspace state.
    const next = new SessionStore(memento);
    const two = start(root);
    const b = await initialize(two, next, root);
    assert.deepEqual(b.sent, { sessionId: a.init.sessionId, lastSeq: 1 });
    assert.equal(b.init.sessionId, a.init.sessionId, 'the same session');
    assert.equal(next.started(b.init.sessionId, root, b.sent), true);
    await two.conn.sendNotification(InitializedNotification, {});
    // Every handle is there: progress {} lists both.
    const listed = progressHandles(await two.conn.sendRequest(ProgressRequest, {}));
    assert.deepEqual(listed.map((p) => `${p.handleId} ${p.label}`).sort(), [`${quick.handleId} quick`, `${long.handleId} long`].sort());
    // The long one's result comes (after lastSeq 1), once; the quick one's (seq 1) not again.
    const done = await two.waitFor(ToolResultNotification, (r) => r.handleId === long.handleId);
    assert.equal(done.status, 'completed');
    const all = two.received(ToolResultNotification);
    assert.deepEqual(all.map((r) => `${r.handleId}#${r.seq}`), [`${long.handleId}#2`], 'only what came after lastSeq');
    assert.deepEqual(all.map((r) => next.received(r.seq)), [true]);
    assert.equal(next.state?.lastSeq, 2);
    // Its output from the start: what it printed before and after the reload.
    const out = await two.conn.sendRequest(ReadOutputRequest, { handleId: long.handleId, offset: 0 });
    assert.equal(out.data, 'before-reload\nafter-reload\n');
    assert.equal(out.eof, true);
    // The quick one's result, which came to the first window, is there by wait.
    const q = await two.conn.sendRequest(WaitRequest, { handleId: quick.handleId, timeoutMs: 0 });
    assert.equal(q.status, 'completed');
    assert.equal(q.seq, undefined, 'an answer carries no seq');

    // Ending the session on purpose (Restart Server): shutdown, and the next resume is -32030 "ended".
    await two.conn.sendRequest(ShutdownRequest);
    await two.conn.sendNotification(ExitNotification);
    await two.exited;
    const three = start(root);
    const c = await initialize(three, next, root).catch((e: unknown) => e);
    assert.deepEqual(sessionNotFound(c), { sessionId: a.init.sessionId, reason: 'ended' });
    await three.close();
  });
});

/** The pids of toolhost holders whose state directory is dir. */
function holders(dir: string): number[] {
  const pids: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const argv = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      if (argv[1] === 'holder' && argv.includes(dir)) pids.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}
