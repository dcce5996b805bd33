// The protocol, checked from outside by an independent client: the real Go
// binary over pipes, in both framings.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { CancellationTokenSource, ProgressType, ResponseError } from 'vscode-jsonrpc/node';
import { progressHandles } from '../src/answers';
import {
  CancelRequest,
  ExitNotification,
  HeartbeatNotification,
  InitializedNotification,
  type InitializeResult,
  LongRunningRequest,
  MethodInitialize,
  ProgressRequest,
  ReadFileRequest,
  RunCommandRequest,
  ShutdownRequest,
  StepTransitionNotification,
  ToolResultNotification,
  WriteFileRequest,
} from '../src/protocol';
import { recipeParams } from '../src/recipes';
import { Framing, pidsWithArg, Session, startServer, until } from './client';

/** The error code a request fails with. */
async function codeOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
  } catch (e) {
    if (e instanceof ResponseError) return e.code;
    throw e;
  }
  assert.fail('the request succeeded');
}

for (const framing of ['header', 'ndjson'] as Framing[]) {
  describe(`toolhost over ${framing} framing`, () => {
    let s: Session;
    let init: InitializeResult;

    before(async () => {
      s = startServer(framing);
      // Before initialize: ServerNotInitialized.
      assert.equal(await codeOf(s.conn.sendRequest(ReadFileRequest, { path: 'x' })), -32002);
      // As LSP clients send it: rootUri null, which InitializeParams never holds.
      init = await s.conn.sendRequest<InitializeResult>(MethodInitialize, { processId: process.pid, rootUri: null, capabilities: {} });
      await s.conn.sendNotification(InitializedNotification, {});
    });

    after(async () => {
      await s?.close();
    });

    test('initialize describes the server, its framing and the workspace', () => {
      assert.equal(init.serverInfo.name, 'toolhost');
      assert.ok(init.serverInfo.version);
      for (const m of ['initialize', 'shutdown', 'runCommand', 'longRunning', 'cancel', 'readFile', 'writeFile', 'progress']) {
        assert.ok(init.capabilities.methods.includes(m), `methods has ${m}`);
      }
      for (const n of ['toolResult', 'stepTransition', 'heartbeat', 'output', '$/progress']) {
        assert.ok(init.capabilities.notifications.includes(n), `notifications has ${n}`);
      }
      assert.equal(init.capabilities.framing, framing, 'auto framing detected from the first byte');
      assert.equal(init.workspace.root, s.root);
      assert.ok(path.isAbsolute(init.workspace.artifactsDir));
    });

    test('runCommand runs argv without a shell and returns the ToolResult', async () => {
      const r = await s.conn.sendRequest(RunCommandRequest, { argv: ['sh', '-c', 'echo out; echo err >&2; exit 3'] });
      assert.equal(r.status, 'completed');
      assert.equal(r.success, false);
      assert.equal(r.exitCode, 3);
      assert.equal(r.stdout, 'out\n');
      assert.equal(r.stderr, 'err\n');
      assert.equal(r.handleId ?? '', '');
      const out = await s.conn.sendRequest(ReadFileRequest, { path: r.artifacts.outputPath });
      assert.match(out.content, /out\n/);
      assert.match(out.content, /err\n/);
      const ok = await s.conn.sendRequest(RunCommandRequest, { argv: ['echo', '$HOME', '*'] });
      assert.equal(ok.success, true);
      assert.equal(ok.stdout, '$HOME *\n', 'no shell expansion');
    });

    test('longRunning answers at once and ends in one toolResult', async () => {
      const started = await s.conn.sendRequest(LongRunningRequest, { argv: ['sh', '-c', 'echo hello'], label: 'greet' });
      assert.ok(started.handleId);
      assert.ok(started.pid > 0);
      const r = await s.waitFor(ToolResultNotification, (p) => p.handleId === started.handleId);
      assert.equal(r.commandId, started.commandId);
      assert.equal(r.success, true);
      assert.equal(r.stdout, 'hello\n');
      assert.equal(s.received(ToolResultNotification).filter((p) => p.handleId === started.handleId).length, 1);
    });

    test('a recipe reports a stepTransition per step and its steps in the result', async () => {
      const steps = [
        { name: 'fetch', argv: ['true'] },
        { name: 'build', argv: ['sh', '-c', 'echo building'] },
        { name: 'test', argv: ['sh', '-c', 'exit 0'] },
      ];
      // The params the extension sends for a recipe file.
      const started = await s.conn.sendRequest(LongRunningRequest, recipeParams({ label: 'recipe', steps }));
      assert.equal(started.command, "true && sh -c 'echo building' && sh -c 'exit 0'");
      const r = await s.waitFor(ToolResultNotification, (p) => p.handleId === started.handleId);
      assert.equal(r.success, true);
      assert.deepEqual(r.steps.map((x) => [x.name, x.status]), [['fetch', 'done'], ['build', 'done'], ['test', 'done']]);
      const transitions = s
        .received(StepTransitionNotification)
        .filter((p) => p.handleId === started.handleId)
        .map((p) => `${p.index}/${p.total} ${p.step} ${p.status}`);
      assert.deepEqual(transitions, ['1/3 fetch start', '1/3 fetch done', '2/3 build start', '2/3 build done', '3/3 test start', '3/3 test done']);
    });

    test('a failing step fails the recipe and skips the rest', async () => {
      const started = await s.conn.sendRequest(LongRunningRequest, {
        argv: [],
        label: 'fails',
        steps: [{ name: 'ok', argv: ['true'] }, { name: 'bad', argv: ['sh', '-c', 'exit 4'] }, { name: 'never', argv: ['true'] }],
      });
      const r = await s.waitFor(ToolResultNotification, (p) => p.handleId === started.handleId);
      assert.equal(r.success, false);
      assert.equal(r.exitCode, 4);
      assert.deepEqual(r.steps.map((x) => [x.name, x.status]), [['ok', 'done'], ['bad', 'fail'], ['never', 'skip']]);
    });

    test('cancel kills the whole process tree and answers with the final result', async () => {
      const marker = `1000.${randomInt(1e9)}`; // a unique argument to find the processes by
      const started = await s.conn.sendRequest(LongRunningRequest, { argv: ['sh', '-c', `sleep ${marker} & sleep ${marker}; wait`], label: 'sleeper' });
      await until(() => pidsWithArg(marker).length >= 3, 10_000, 'the sleeper processes');
      const all = progressHandles(await s.conn.sendRequest(ProgressRequest, {}));
      const mine = all.find((h) => h.handleId === started.handleId);
      assert.equal(mine?.status, 'running');
      assert.equal(mine?.label, 'sleeper');
      const one = progressHandles(await s.conn.sendRequest(ProgressRequest, { handleId: started.handleId }));
      assert.deepEqual(one.map((h) => [h.handleId, h.label]), [[started.handleId, 'sleeper']]);
      const r = await s.conn.sendRequest(CancelRequest, { handleId: started.handleId, graceMs: 500 });
      assert.equal(r.status, 'cancelled');
      assert.equal(r.success, false);
      assert.deepEqual(pidsWithArg(marker), [], 'no process of the handle is left');
      const n = await s.waitFor(ToolResultNotification, (p) => p.handleId === started.handleId);
      assert.equal(n.status, 'cancelled');
      assert.equal(await codeOf(s.conn.sendRequest(CancelRequest, { handleId: 'no-such-handle' })), -32004);
    });

    test('step markers a child writes become stepTransitions and heartbeats, and stay out of stderr', async () => {
      const script = [
        'echo "[STEP 00/02] compile @ 2026-03-23T14:05:58Z" >&2',
        'echo "[HEARTBEAT] compile — 10s elapsed" >&2',
        'echo "{\\"type\\":\\"step_transition\\",\\"step\\":\\"link\\",\\"status\\":\\"start\\",\\"ts\\":1743554401.12}" >&2',
        'echo real-error >&2',
      ].join('; ');
      const started = await s.conn.sendRequest(LongRunningRequest, { argv: ['sh', '-c', script], label: 'markers' });
      const r = await s.waitFor(ToolResultNotification, (p) => p.handleId === started.handleId);
      assert.equal(r.stderr, 'real-error\n', 'markers are kept out of stderr');
      const steps = s.received(StepTransitionNotification).filter((p) => p.handleId === started.handleId);
      assert.deepEqual(steps.filter((p) => p.status === 'start').map((p) => p.step), ['compile', 'link']);
      assert.equal(steps[0].index, 1);
      assert.equal(steps[0].total, 2);
      await s.waitFor(HeartbeatNotification, (p) => p.handleId === started.handleId && p.step === 'compile');
      const out = await s.conn.sendRequest(ReadFileRequest, { path: r.artifacts.outputPath });
      assert.match(out.content, /\[STEP 00\/02\] compile/, 'markers still go to the output file');
    });

    test('$/cancelRequest cancels an in-flight runCommand with -32800 and kills it', async () => {
      const marker = `1000.${randomInt(1e9)}`;
      const cts = new CancellationTokenSource();
      const pending = s.conn.sendRequest(RunCommandRequest, { argv: ['sleep', marker] }, cts.token);
      await until(() => pidsWithArg(marker).length === 1, 10_000, 'the sleep process');
      await s.conn.sendRequest(WriteFileRequest, { path: 'while-running.txt', content: 'x' });
      const read = await s.conn.sendRequest(ReadFileRequest, { path: 'while-running.txt' });
      assert.equal(read.content, 'x', 'a slow runCommand does not hold other requests up');
      cts.cancel();
      assert.equal(await codeOf(pending), -32800);
      await until(() => pidsWithArg(marker).length === 0, 10_000, 'the cancelled command to be gone');
    });

    test('runCommand with a workDoneToken reports $/progress begin and end', async () => {
      const token = `t-${randomInt(1e9)}`;
      const kinds: string[] = [];
      // vscode-jsonrpc routes $/progress to per-token handlers, not onNotification.
      const sub = s.conn.onProgress(new ProgressType<{ kind: string }>(), token, (v) => void kinds.push(v.kind));
      try {
        const r = await s.conn.sendRequest(RunCommandRequest, { argv: ['true'], workDoneToken: token });
        assert.equal(r.success, true);
        await until(() => kinds.includes('end'), 10_000, '$/progress end');
        assert.equal(kinds[0], 'begin');
        assert.equal(kinds[kinds.length - 1], 'end');
      } finally {
        sub.dispose();
      }
    });

    test('writeFile and readFile stay inside the root', async () => {
      const content = 'hello\nworld\n';
      const w = await s.conn.sendRequest(WriteFileRequest, { path: 'sub/a.txt', content, createDirs: true });
      assert.equal(w.path, path.join(s.root, 'sub', 'a.txt'));
      assert.equal(w.sha256, createHash('sha256').update(content).digest('hex'));
      assert.equal(readFileSync(w.path, 'utf8'), content);
      const all = await s.conn.sendRequest(ReadFileRequest, { path: 'sub/a.txt' });
      assert.equal(all.content, content);
      assert.equal(all.encoding, 'utf-8');
      assert.equal(all.totalLines, 2);
      const second = await s.conn.sendRequest(ReadFileRequest, { path: w.path, line: 2, limit: 1 });
      assert.equal(second.content, 'world\n');
      assert.equal(second.startLine, 2);
      const bin = await s.conn.sendRequest(WriteFileRequest, { path: 'b.bin', content: Buffer.from([0, 1, 255]).toString('base64'), encoding: 'base64' });
      assert.equal(bin.size, 3);
      const back = await s.conn.sendRequest(ReadFileRequest, { path: 'b.bin' });
      assert.equal(back.encoding, 'base64');
      assert.deepEqual([...Buffer.from(back.content, 'base64')], [0, 1, 255]);
      assert.equal(await codeOf(s.conn.sendRequest(WriteFileRequest, { path: 'sub/a.txt', content: 'x', expectedSha256: '0'.repeat(64) })), -32009);
      assert.equal(await codeOf(s.conn.sendRequest(ReadFileRequest, { path: '../outside.txt' })), -32001);
      assert.equal(await codeOf(s.conn.sendRequest(WriteFileRequest, { path: '/etc/toolhost-test', content: 'x' })), -32001);
      assert.equal(await codeOf(s.conn.sendRequest(ReadFileRequest, { path: 'missing.txt' })), -32003);
      assert.equal(await codeOf(s.conn.sendRequest(ReadFileRequest, { path: 'sub/a.txt', maxBytes: 3 })), -32006);
    });

    test('bad requests get the documented error codes and the session goes on', async () => {
      assert.equal(await codeOf(s.conn.sendRequest('noSuchMethod', {})), -32601);
      assert.equal(await codeOf(s.conn.sendRequest(RunCommandRequest, { argv: [] })), -32602);
      assert.equal(await codeOf(s.conn.sendRequest(RunCommandRequest, { argv: ['/nonexistent/toolhost-no-such-binary'] })), -32005);
      assert.equal(await codeOf(s.conn.sendRequest(RunCommandRequest, { argv: ['true'], cwd: 'no/such/dir' })), -32003);
      const r = await s.conn.sendRequest(RunCommandRequest, { argv: ['true'] });
      assert.equal(r.success, true);
    });

    test('shutdown then exit ends the session with code 0', async () => {
      assert.equal(await s.conn.sendRequest(ShutdownRequest), null);
      assert.equal(await codeOf(s.conn.sendRequest(ReadFileRequest, { path: 'x' })), -32600);
      await s.conn.sendNotification(ExitNotification);
      assert.equal(await s.exited, 0);
    });
  });
}
