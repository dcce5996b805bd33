import { test } from 'node:test';
import assert from 'node:assert/strict';
import { progressHandles, workspaceOf } from '../src/answers';
import type { Progress } from '../src/protocol';

const snapshot: Progress = {
  handleId: 'h1', commandId: 'c1', label: 'l', status: 'running', pid: 1, currentStep: 0, totalSteps: 0, stepName: '',
  elapsedMs: 0, updatedAt: '2026-01-01T00:00:00Z', lastHeartbeatAt: null, outputBytes: 0, exitCode: null,
};

test('progressHandles reads a list answer and a single snapshot alike', () => {
  assert.deepEqual(progressHandles({ handles: [snapshot, { ...snapshot, handleId: 'h2' }] }).map((p) => p.handleId), ['h1', 'h2']);
  assert.deepEqual(progressHandles({ handles: [] }), []);
  assert.deepEqual(progressHandles(snapshot), [snapshot]);
});

test('workspaceOf takes the workspace of toolhost\'s initialize answer and nothing else', () => {
  const workspace = { root: '/w', readRoots: ['/r'], artifactsDir: '/a' };
  assert.deepEqual(workspaceOf({ capabilities: {}, workspace }), workspace);
  assert.equal(workspaceOf(undefined), undefined);
  assert.equal(workspaceOf({ capabilities: {} }), undefined, 'an LSP answer without a workspace');
  assert.equal(workspaceOf({ workspace: { ...workspace, artifactsDir: 7 } }), undefined);
  assert.equal(workspaceOf({ workspace: { ...workspace, readRoots: ['/r', 1] } }), undefined);
  assert.equal(workspaceOf({ workspace: [] }), undefined);
});
