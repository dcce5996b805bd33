import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contextValue, describeStatus, describeStep, formatDuration, ToolsModel } from '../src/model';
import { parseRecipe, recipeParams, usesPty } from '../src/recipes';
import { RestartPolicy } from '../src/restartPolicy';
import type { ToolResult } from '../src/protocol';

function result(over: Partial<ToolResult>): ToolResult {
  return {
    commandId: 'c1', handleId: 'h1', status: 'completed', success: true, exitCode: 0, signal: null,
    startedAt: '2026-01-01T00:00:00Z', endedAt: '2026-01-01T00:00:01Z', durationMs: 1000,
    stdout: '', stderr: '', stdoutTruncated: false, stderrTruncated: false,
    artifacts: { stdoutPath: '/a/o', stderrPath: '/a/e', outputPath: '/a/out', byteCount: 0, lineCount: 0, sha256: '' },
    steps: [], ...over,
  };
}

test('model follows a recipe through its notifications, whatever their order', () => {
  let clock = 1000;
  const m = new ToolsModel(() => clock);
  const changes: string[] = [];
  m.onDidChange((t) => changes.push(t?.handleId ?? '*'));
  // a notification may overtake longRunning's answer
  m.stepTransition({ handleId: 'h1', commandId: 'c1', step: 'fetch', status: 'start', index: 1, total: 3, elapsedMs: 5, ts: '' });
  m.started({ handleId: 'h1', commandId: 'c1', pid: 1, processGroupId: 1, startedAt: '2026-01-01T00:00:00Z', command: 'fetch build test' }, 'my recipe');
  let t = m.get('h1')!;
  assert.equal(t.label, 'my recipe');
  assert.equal(describeStep(t), 'step 1/3: fetch');
  m.stepTransition({ handleId: 'h1', commandId: 'c1', step: 'fetch', status: 'done', index: 1, total: 3, elapsedMs: 50, ts: '' });
  m.stepTransition({ handleId: 'h1', commandId: 'c1', step: 'build', status: 'start', index: 2, total: 3, elapsedMs: 60, ts: '' });
  assert.deepEqual(t.steps.map((s) => `${s.name}:${s.status}`), ['fetch:done', 'build:running']);
  clock += 500;
  assert.equal(m.elapsedNow(t), 560);
  m.heartbeat({ handleId: 'h1', commandId: 'c1', step: 'build', elapsedMs: 2000 });
  assert.equal(m.running().length, 1);
  m.toolResult(result({ status: 'completed', success: false, exitCode: 2, durationMs: 2100,
    steps: [{ name: 'fetch', status: 'done', durationMs: 45, exitCode: 0 }, { name: 'build', status: 'fail', durationMs: 2000, exitCode: 2 }, { name: 'test', status: 'skip', durationMs: 0, exitCode: null }] }));
  t = m.get('h1')!;
  assert.equal(m.running().length, 0);
  assert.equal(describeStatus(t), 'failed (exit 2)');
  assert.deepEqual(t.steps.map((s) => `${s.name}:${s.status}`), ['fetch:done', 'build:fail', 'test:skip']);
  // a late heartbeat changes nothing
  m.heartbeat({ handleId: 'h1', commandId: 'c1', step: 'zzz', elapsedMs: 9999 });
  assert.equal(m.elapsedNow(m.get('h1')!), 2100);
  assert.ok(changes.length >= 6);
});

test('model merges progress snapshots and marks handles lost when the server goes', () => {
  const m = new ToolsModel(() => 0);
  m.progress({ handleId: 'h2', commandId: 'c2', label: 'sleep 100', status: 'running', pid: 9, currentStep: 0, totalSteps: 0, stepName: '', elapsedMs: 3000, updatedAt: '', lastHeartbeatAt: null, outputBytes: 0, exitCode: null });
  assert.equal(m.get('h2')!.label, 'sleep 100');
  m.serverLost();
  assert.equal(describeStatus(m.get('h2')!), 'lost (server restarted)');
  assert.equal(m.running().length, 0);
});

test('a restarted server\'s handles are new ones, though their ids start again: the last server\'s stay in the view, apart', () => {
  let clock = 1000;
  const m = new ToolsModel(() => clock);
  m.serverStarted(undefined);
  m.started({ handleId: 'h-1', commandId: 'cmd-1', pid: 1, processGroupId: 1, startedAt: '', command: 'recipe' }, 'E2E Build');
  m.stepTransition({ handleId: 'h-1', commandId: 'cmd-1', step: 'check', status: 'start', index: 3, total: 3, elapsedMs: 5, ts: '' });
  m.toolResult(result({ handleId: 'h-1', commandId: 'cmd-1', steps: [{ name: 'check', status: 'done', durationMs: 5, exitCode: 0 }] }));
  clock += 5;
  m.started({ handleId: 'h-2', commandId: 'cmd-2', pid: 2, processGroupId: 2, startedAt: '', command: 'sleep' }, 'sleep 100');
  const old = m.get('h-1')!;
  const changes: string[] = [];
  m.onDidChange((t) => changes.push(t?.handleId ?? '*'));

  m.serverStarted(undefined); // the same model, a new server
  assert.deepEqual(changes, ['*', '*'], 'the view is told, once for the lost handle and once for the retirement');
  assert.equal(m.get('h-1'), undefined, 'the new server has no h-1 yet');
  assert.equal(describeStatus(m.list().find((t) => t.handleId === 'h-2')!), 'lost (server restarted)', 'what ran is lost');
  clock += 10;
  const fresh = m.started({ handleId: 'h-1', commandId: 'cmd-1', pid: 3, processGroupId: 3, startedAt: '', command: 'curl' }, 'curl');
  assert.notEqual(fresh, old);
  assert.deepEqual(fresh.steps, [], 'none of the old recipe\'s steps');
  assert.equal(fresh.status, 'running');
  assert.equal(m.get('h-1'), fresh);
  assert.notEqual(fresh.key, old.key, 'the Tools view\'s rows are distinct');
  assert.deepEqual(m.list().map((t) => `${t.key} ${t.label}`), ['1:h-1 curl', '0:h-2 sleep 100', '0:h-1 E2E Build']);
  assert.deepEqual(m.running(), [fresh]);
  // The old one is untouched by the new one's notifications.
  m.toolResult(result({ handleId: 'h-1', commandId: 'cmd-1', success: false, exitCode: 7 }));
  assert.equal(describeStatus(old), 'completed');
  assert.equal(describeStatus(fresh), 'failed (exit 7)');
  // A first start retires nothing.
  const first = new ToolsModel(() => 0);
  first.started({ handleId: 'h-1', commandId: 'cmd-1', pid: 1, processGroupId: 1, startedAt: '', command: 'x' }, 'x');
  first.serverStarted(undefined);
  assert.equal(first.list().length, 1);
});

test('describeStatus and formatDuration', () => {
  const m = new ToolsModel(() => 0);
  const t = m.toolResult(result({ status: 'cancelled', success: false, exitCode: null, signal: 'SIGTERM' }))!;
  assert.equal(describeStatus(t), 'cancelled');
  assert.equal(describeStatus(m.toolResult(result({ handleId: 'h3', status: 'timedOut', success: false }))!), 'timed out');
  assert.equal(describeStatus(m.toolResult(result({ handleId: 'h4', exitCode: null, signal: 'SIGSEGV', success: false }))!), 'failed (SIGSEGV)');
  assert.deepEqual([1234, 45_000, 185_000, 3_725_000].map(formatDuration), ['1.2s', '45s', '3m 05s', '1h 02m']);
});

test('parseRecipe accepts a recipe and names what is wrong in a bad one', () => {
  const r = parseRecipe(JSON.stringify({ label: 'Build', steps: [{ name: 'a', argv: ['true'], cwd: 'sub', env: { X: '1', Y: null }, continueOnError: true }] }), 'build.json');
  assert.deepEqual(recipeParams(r), { argv: [], label: 'Build', steps: [{ name: 'a', argv: ['true'], cwd: 'sub', env: { X: '1', Y: null }, continueOnError: true }] });
  const bad: [unknown, RegExp][] = [
    [[], /the recipe must be an object/],
    [{ steps: [] }, /label must be/],
    [{ label: 'x', steps: [] }, /steps must be a non-empty array/],
    [{ label: 'x', steps: [{ name: 'a', argv: [1] }] }, /steps\[0\]\.argv must be/],
    [{ label: 'x', steps: [{ name: 'a', argv: ['t'], env: { A: 1 } }] }, /steps\[0\]\.env must be/],
  ];
  for (const [v, re] of bad) assert.throws(() => parseRecipe(JSON.stringify(v), 'r.json'), re);
  assert.throws(() => parseRecipe('{', 'r.json'), /r\.json: not JSON/);
});

test('parseRecipe takes a step\'s pty; usesPty says whether any step (or the argv) runs in one', () => {
  const r = parseRecipe(JSON.stringify({ label: 'R', steps: [{ name: 'a', argv: ['true'] }, { name: 'b', argv: ['sh'], pty: { rows: 40, cols: 120 } }] }), 'r.json');
  assert.deepEqual(r.steps[1], { name: 'b', argv: ['sh'], pty: { rows: 40, cols: 120 } });
  assert.ok(usesPty(recipeParams(r)));
  assert.ok(!usesPty(recipeParams(parseRecipe(JSON.stringify({ label: 'R', steps: [{ name: 'a', argv: ['true'], pty: false }] }), 'r.json'))));
  assert.ok(usesPty({ argv: ['sh'], pty: true }));
  assert.ok(!usesPty({ argv: ['sh'] }));
  assert.ok(usesPty({ argv: [], pty: true, steps: [{ name: 'a', argv: ['true'] }] }), 'the request\'s pty is each step\'s default');
  for (const pty of [{ rows: 0, cols: 80 }, { rows: 24 }, 'yes', { rows: 24, cols: 80, x: 1 }]) {
    assert.throws(() => parseRecipe(JSON.stringify({ label: 'R', steps: [{ name: 'a', argv: ['t'], pty }] }), 'r.json'), /steps\[0\]\.pty must be/);
  }
});

test('a handle offers Open Terminal while its step has a pty: from the request, then progress, never once ended', () => {
  const m = new ToolsModel(() => 0);
  const t = m.started({ handleId: 'h1', commandId: 'c1', pid: 1, processGroupId: 1, startedAt: '', command: 'sh' }, 'sh', undefined, { rows: 24, cols: 80 });
  assert.equal(contextValue(t), 'toolhost.running.pty');
  const snapshot = { handleId: 'h1', commandId: 'c1', label: 'sh', status: 'running' as const, pid: 1, currentStep: 0, totalSteps: 0, stepName: '', elapsedMs: 1, updatedAt: '', lastHeartbeatAt: null, outputBytes: 0, exitCode: null };
  m.progress({ ...snapshot });
  assert.equal(contextValue(m.get('h1')!), 'toolhost.running', 'progress says no pty now');
  m.progress({ ...snapshot, pty: { rows: 30, cols: 90 } });
  assert.equal(contextValue(m.get('h1')!), 'toolhost.running.pty');
  m.toolResult(result({ handleId: 'h1', commandId: 'c1' }));
  assert.equal(contextValue(m.get('h1')!), 'toolhost.done');
  const plain = m.started({ handleId: 'h2', commandId: 'c2', pid: 2, processGroupId: 2, startedAt: '', command: 'true' }, 'true');
  assert.equal(contextValue(plain), 'toolhost.running');
});

test('RestartPolicy restarts a bounded number of times within its window', () => {
  let clock = 0;
  const p = new RestartPolicy(3, 60_000, () => clock);
  assert.deepEqual([p.crashed(), p.crashed(), p.crashed(), p.crashed()], [true, true, true, false]);
  clock += 61_000; // old crashes age out
  assert.equal(p.crashed(), true);
  p.reset();
  assert.equal(p.recent, 0);
});

test('resolveServerPath: setting, then PATH, then the shipped binary', async () => {
  const { mkdtempSync, writeFileSync, mkdirSync, chmodSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { tmpdir } = await import('node:os');
  const { resolveServerPath } = await import('../src/serverPath');
  const dir = mkdtempSync(join(tmpdir(), 'toolhost-path-'));
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  assert.equal(resolveServerPath(' /opt/toolhost ', '/ext', bin), '/opt/toolhost');
  assert.equal(resolveServerPath('~/t', '/ext', bin, '/home/u'), '/home/u/t');
  assert.equal(resolveServerPath('', '/ext', bin), '/ext/bin/toolhost');
  writeFileSync(join(bin, 'toolhost'), '', { mode: 0o644 });
  assert.equal(resolveServerPath('', '/ext', bin), '/ext/bin/toolhost', 'not executable: skipped');
  chmodSync(join(bin, 'toolhost'), 0o755);
  assert.equal(resolveServerPath('', '/ext', `/nonexistent:${bin}`), join(bin, 'toolhost'));
});

test('resolveReadRoots: absolute as given, relative from the root, file URIs kept, junk dropped', async () => {
  const { resolveReadRoots } = await import('../src/serverPath');
  assert.deepEqual(resolveReadRoots(['/usr/share/doc', '../lib', 'file:///opt/x', '', 3], '/ws/project'), ['/usr/share/doc', '/ws/lib', 'file:///opt/x']);
});
