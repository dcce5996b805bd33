import { test } from 'node:test';
import assert from 'node:assert/strict';
import { toolTooltip, ToolsModel } from '../src/model';
import { describePort, isWildcard, portMessage, Ports, portUrl } from '../src/ports';
import type { Progress, ToolResult } from '../src/protocol';
import { parseRecipe, recipeParams } from '../src/recipes';

function snapshot(over: Partial<Progress>): Progress {
  return { handleId: 'h-1', commandId: 'cmd-1', label: 'dev', status: 'running', pid: 5, currentStep: 0, totalSteps: 0, stepName: '', elapsedMs: 1, updatedAt: '', outputBytes: 0, ...over };
}

function result(over: Partial<ToolResult>): ToolResult {
  return {
    commandId: 'cmd-1', handleId: 'h-1', status: 'cancelled', success: false, exitCode: null, signal: 'SIGTERM',
    startedAt: '', endedAt: '', durationMs: 1000, stdout: '', stderr: '', stdoutTruncated: false, stderrTruncated: false,
    artifacts: { stdoutPath: '/a/o', stderrPath: '/a/e', outputPath: '/a/out', byteCount: 0, lineCount: 0, sha256: '' },
    steps: [], ...over,
  };
}

test('portUrl opens localhost for a wildcard listener, else the address it listens on', () => {
  const cases: [string, string][] = [
    ['0.0.0.0', 'http://localhost:5173/'],
    ['::', 'http://localhost:5173/'],
    ['', 'http://localhost:5173/'],
    ['127.0.0.1', 'http://127.0.0.1:5173/'],
    ['::1', 'http://[::1]:5173/'],
    ['[::1]', 'http://[::1]:5173/'],
    ['192.168.1.20', 'http://192.168.1.20:5173/'],
    ['fe80::1', 'http://[fe80::1]:5173/'],
  ];
  for (const [address, want] of cases) assert.equal(portUrl({ port: 5173, address }), want, address);
  assert.ok(isWildcard('::ffff:0.0.0.0'));
  assert.ok(!isWildcard('127.0.0.1'));
});

test('Ports counts each listener once, by address and port, and a snapshot replaces them', () => {
  const p = new Ports();
  assert.equal(p.opened({ port: 80, address: '0.0.0.0', pid: 1 }), true);
  assert.equal(p.opened({ port: 80, address: '0.0.0.0', pid: 1 }), false, 'a repeat is not new');
  assert.equal(p.opened({ port: 80, address: '::', pid: 1 }), true, 'the same port on IPv6 is another listener');
  assert.equal(p.closed({ port: 80, address: '0.0.0.0' }), true);
  assert.equal(p.closed({ port: 80, address: '0.0.0.0' }), false);
  assert.deepEqual(p.list(), [{ port: 80, address: '::', pid: 1 }]);
  p.snapshot([{ port: 3000, address: '127.0.0.1', pid: 7 }]);
  assert.deepEqual(p.list(), [{ port: 3000, address: '127.0.0.1', pid: 7 }]);
  p.snapshot(undefined);
  assert.equal(p.size, 0);
});

test('the model announces a port once, lists it under its handle, and forgets it when it closes or the handle ends', () => {
  const m = new ToolsModel(() => 0);
  m.started({ handleId: 'h-1', commandId: 'cmd-1', pid: 5, processGroupId: 5, startedAt: '', command: 'npm run dev' }, 'npm run dev');
  const open = { handleId: 'h-1', port: 5173, address: '127.0.0.1', pid: 6 };
  const first = m.portOpened(open);
  assert.equal(first?.fresh, true);
  assert.equal(portMessage(open, first!.tool.label, ''), 'Port 5173 opened by npm run dev');
  assert.equal(m.portOpened(open)?.fresh, false, 'announced once');
  assert.deepEqual(m.get('h-1')!.ports.list(), [{ port: 5173, address: '127.0.0.1', pid: 6 }]);
  assert.ok(toolTooltip(m.get('h-1')!).includes('listening: 127.0.0.1:5173 (pid 6)'));
  m.portClosed({ handleId: 'h-1', port: 5173, address: '127.0.0.1' });
  assert.equal(m.get('h-1')!.ports.size, 0);
  // A refresh's snapshot brings the ports the handle listens on now.
  m.progress(snapshot({ ports: [{ port: 8000, address: '0.0.0.0', pid: 6 }] }));
  assert.deepEqual(m.get('h-1')!.ports.list().map(describePort), ['0.0.0.0 · pid 6']);
  assert.equal(m.portOpened({ handleId: 'h-1', port: 8000, address: '0.0.0.0', pid: 6 })?.fresh, false, 'known from the snapshot');
  m.toolResult(result({}));
  assert.equal(m.get('h-1')!.ports.size, 0, 'an ended handle listens on nothing');
  assert.equal(m.portOpened({ handleId: 'h-1', port: 9000, address: '::', pid: 6 })?.fresh, false, 'a late portOpened of an ended handle is not announced');
  assert.equal(m.get('h-1')!.ports.size, 0);
  // A destination's port says where it opened.
  assert.equal(portMessage({ port: 8080 }, 'serve', 'build'), 'Port 8080 opened by serve on build');
});

test('a port of a handle not yet known is kept, and the handle gets its command id later', () => {
  const m = new ToolsModel(() => 0);
  assert.equal(m.portOpened({ handleId: 'h-9', port: 1, address: '::', pid: 2 })?.fresh, true);
  const t = m.started({ handleId: 'h-9', commandId: 'cmd-9', pid: 2, processGroupId: 2, startedAt: '', command: 'srv' }, 'srv');
  assert.equal(t.commandId, 'cmd-9');
  assert.equal(t.ports.size, 1);
  m.serverLost();
  assert.equal(t.ports.size, 0, 'a lost server\'s ports are gone with it');
});

test('a recipe asks for a progress file; the view knows its path from progress, then from the result', () => {
  const r = parseRecipe(JSON.stringify({ label: 'CI', progressFile: '.toolhost/ci.json', steps: [{ name: 'a', argv: ['true'] }] }), 'ci.json');
  assert.deepEqual(recipeParams(r), { argv: [], label: 'CI', progressFile: '.toolhost/ci.json', steps: [{ name: 'a', argv: ['true'] }] });
  assert.equal(recipeParams(parseRecipe(JSON.stringify({ label: 'CI', progressFile: true, steps: [{ name: 'a', argv: ['t'] }] }), 'ci.json')).progressFile, true);
  assert.ok(!('progressFile' in recipeParams(parseRecipe(JSON.stringify({ label: 'CI', progressFile: false, steps: [{ name: 'a', argv: ['t'] }] }), 'ci.json'))));
  for (const pf of ['', 3, {}]) {
    assert.throws(() => parseRecipe(JSON.stringify({ label: 'CI', progressFile: pf, steps: [{ name: 'a', argv: ['t'] }] }), 'ci.json'), /ci\.json: progressFile must be/);
  }
  const m = new ToolsModel(() => 0);
  m.progress(snapshot({ progressPath: '/ws/.toolhost/ci.json' }));
  assert.equal(m.get('h-1')!.progressPath, '/ws/.toolhost/ci.json');
  assert.ok(toolTooltip(m.get('h-1')!).includes('progress file: `/ws/.toolhost/ci.json`'));
  m.toolResult(result({ status: 'completed', success: true, exitCode: 0, artifacts: { stdoutPath: '', stderrPath: '', outputPath: '', byteCount: 0, lineCount: 0, sha256: '', progressPath: '/ws/.toolhost/ci2.json' } }));
  assert.equal(m.get('h-1')!.progressPath, '/ws/.toolhost/ci2.json');
});
