// The confinement the Tools view shows and the toolhost.sandbox setting,
// driven with protocol values as the server sends them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ResponseError } from 'vscode-jsonrpc/node';
import { sandboxOf } from '../src/answers';
import { confinementOf, describeStepView, describeTool, CONFINED, isConfined, toolTooltip, ToolsModel } from '../src/model';
import {
  CodeInvalidParams,
  CodePathOutsideWorkspace,
  type InitializeResult,
  MethodInitialize,
  RunCommandRequest,
  type SandboxApplied,
  type SandboxCapability,
  type ToolResult,
} from '../src/protocol';
import { initializationOptions, initializeFailure, readSandboxSetting, refusedSetting } from '../src/settings';
import { startServer } from './client';

const started = { commandId: 'c1', pid: 1, processGroupId: 1, startedAt: '2026-01-01T00:00:00Z', command: 'make' };

function capability(over: Partial<SandboxCapability>): SandboxCapability {
  return { available: true, abi: 7, mode: 'auto', default: { filesystem: 'workspace-write', network: true }, layers: ['landlock-abi-7', 'netns'], ...over };
}

function result(handleId: string, over: Partial<ToolResult>): ToolResult {
  return {
    commandId: 'c1', handleId, status: 'completed', success: true, exitCode: 0, signal: null,
    startedAt: '2026-01-01T00:00:00Z', endedAt: '2026-01-01T00:00:01Z', durationMs: 1000,
    stdout: '', stderr: '', stdoutTruncated: false, stderrTruncated: false,
    artifacts: { stdoutPath: '/a/o', stderrPath: '/a/e', outputPath: '/a/out', byteCount: 0, lineCount: 0, sha256: '' },
    steps: [], ...over,
  };
}

const confined: SandboxApplied = {
  filesystem: 'read-only', network: false, enforcedBy: 'landlock-abi-7+mntns+netns',
  limits: { memory: 'cgroup-v1', cpu: 'rlimit' },
};
const unconfined: SandboxApplied = { filesystem: 'full', network: true, enforcedBy: '' };

test('a running handle shows the confined marker of the session default, and the tooltip says it is only asked', () => {
  const m = new ToolsModel(() => 0);
  m.serverStarted(capability({}));
  const t = m.started({ ...started, handleId: 'h1' }, 'make');
  // The marker is a word every machine draws, not an emoji (an empty box without an emoji font).
  assert.equal(CONFINED, 'confined');
  assert.equal(describeTool(t, 1200), 'confined · running · 1.2s');
  assert.doesNotMatch(describeTool(t, 1200), /\p{Extended_Pictographic}/u);
  assert.deepEqual(confinementOf(t), {
    locked: true,
    lines: ['confined (asked): filesystem workspace-write, network on; what was applied is known when it ends'],
  });
  m.serverLost();
  assert.deepEqual(confinementOf(t).lines, ['confined (asked): filesystem workspace-write, network on; the server went away before saying what was applied']);
});

test('the request\'s sandbox overrides the default while running: confined for network off, not for full', () => {
  const m = new ToolsModel(() => 0);
  m.serverStarted(capability({ default: { filesystem: 'full', network: true } }));
  assert.equal(confinementOf(m.started({ ...started, handleId: 'h1' }, 'a', { network: false })).locked, true);
  const open = m.started({ ...started, handleId: 'h2' }, 'b');
  assert.equal(confinementOf(open).locked, false);
  assert.equal(describeTool(open, 0), 'running · 0.0s');
  // A handle the model first hears of through a notification gets the default.
  m.heartbeat({ handleId: 'h3', commandId: 'c3', step: '', elapsedMs: 10 });
  assert.deepEqual(m.get('h3')!.asked, { filesystem: 'full', network: true });
});

test('a server that cannot confine promises no confined marker before the result', () => {
  for (const cap of [undefined, capability({ available: false, mode: 'off', reason: '--sandbox off' })]) {
    const m = new ToolsModel(() => 0);
    m.serverStarted(cap);
    const t = m.started({ ...started, handleId: 'h1' }, 'make', { filesystem: 'read-only' });
    assert.deepEqual(confinementOf(t), { locked: false, lines: [] });
    assert.ok(!describeTool(t, 0).includes(CONFINED));
  }
});

test('the result says what was applied: marker and tooltip for confined, none for full with network', () => {
  const m = new ToolsModel(() => 0);
  m.serverStarted(capability({}));
  m.started({ ...started, handleId: 'h1' }, 'make');
  const t = m.toolResult(result('h1', { sandbox: confined }))!;
  assert.equal(describeTool(t, t.elapsedMs), 'confined · completed · 1.0s');
  assert.deepEqual(toolTooltip(t), [
    '**make**',
    'status: completed',
    'handle: `h1`',
    'command: `c1`',
    'output: `/a/out`',
    'confined: filesystem read-only, network off',
    'enforced by: `landlock-abi-7+mntns+netns`',
    'limits: memory (cgroup-v1), cpu (rlimit)',
  ]);

  // Asked for, not enforced (--sandbox auto on a kernel without it): the
  // result replaces the asked lock, and says what is missing.
  m.started({ ...started, handleId: 'h2' }, 'curl', { network: false });
  const missing = m.toolResult(result('h2', {
    sandbox: { ...unconfined, notEnforced: ['network off: no network namespace and Landlock ABI < 4'] },
  }))!;
  assert.equal(describeTool(missing, missing.elapsedMs), 'completed · 1.0s');
  assert.deepEqual(confinementOf(missing), {
    locked: false,
    lines: [
      'not confined: filesystem full, network on',
      'enforced by: nothing',
      'not enforced: network off: no network namespace and Landlock ABI < 4',
    ],
  });

  // Network off alone is confinement too; a partial one keeps its lock.
  const net = m.toolResult(result('h3', { sandbox: { filesystem: 'full', network: false, enforcedBy: 'netns', notEnforced: ['memory limit: no cgroup'] } }))!;
  assert.deepEqual(confinementOf(net), {
    locked: true,
    lines: ['confined: filesystem full, network off', 'enforced by: `netns`', 'not enforced: memory limit: no cgroup'],
  });

  // A result without a sandbox (--sandbox off) shows no lock.
  assert.deepEqual(confinementOf(m.toolResult(result('h4', {}))!), { locked: false, lines: ['not confined: the server applied no sandbox'] });
});

test('a recipe: each step shows its own marker, the handle one only when every step that ran was confined', () => {
  const m = new ToolsModel(() => 0);
  const step = (name: string, sandbox: SandboxApplied | undefined) => ({ name, status: 'done' as const, durationMs: 1500, exitCode: 0, sandbox });
  const t = m.toolResult(result('h1', {
    sandbox: confined,
    steps: [step('fetch', confined), step('build', unconfined), { name: 'test', status: 'skip', durationMs: 0, exitCode: null }],
  }))!;
  assert.deepEqual(t.steps.map(describeStepView), ['confined · done · 1.5s', 'done · 1.5s', 'skip · 0.0s']);
  assert.deepEqual(confinementOf(t), { locked: false, lines: ['not every step confined: each step has its own sandbox (see the steps)'] });

  const same = m.toolResult(result('h2', { sandbox: confined, steps: [step('a', confined), step('b', confined)] }))!;
  assert.equal(confinementOf(same).locked, true);
  assert.equal(confinementOf(same).lines[0], 'confined: filesystem read-only, network off');
  const tighter = m.toolResult(result('h3', { sandbox: { ...confined, network: true }, steps: [step('a', { ...confined, network: true }), step('b', confined)] }))!;
  assert.deepEqual(confinementOf(tighter), { locked: true, lines: ['confined: each step has its own sandbox (see the steps)'] });
});

test('toolhost.sandbox becomes initializationOptions.sandbox; what cannot be read stops the start and names the setting', () => {
  assert.deepEqual(initializationOptions({ readRoots: ['../lib'], sandbox: { filesystem: 'read-only', network: false } }, '/ws/p'), {
    readRoots: ['/ws/lib'],
    sandbox: { filesystem: 'read-only', network: false },
  });
  assert.deepEqual(initializationOptions({ readRoots: [], sandbox: { network: false } }, '/ws/p'), { readRoots: [], sandbox: { network: false } });
  // Unset or empty: no sandbox key at all, the server's defaults.
  for (const empty of [undefined, null, {}]) {
    assert.deepEqual(initializationOptions({ readRoots: [], sandbox: empty }, '/ws/p'), { readRoots: [] });
  }
  const bad: [unknown, RegExp][] = [
    ['read-only', /^toolhost\.sandbox must be an object/],
    [[], /^toolhost\.sandbox must be an object/],
    [{ filesystem: 'readonly' }, /^toolhost\.sandbox\.filesystem must be "workspace-write", "read-only" or "full", not "readonly"$/],
    [{ network: 'false' }, /^toolhost\.sandbox\.network must be true or false, not "false" \(an allow-list of hosts goes in toolhost\.networkAllow\)$/],
    [{ netwrok: false }, /^toolhost\.sandbox has an unknown key "netwrok"/],
  ];
  for (const [v, re] of bad) assert.throws(() => readSandboxSetting(v), { message: re });
});

test('an initialize refused for a setting names the setting; for the sandbox, says it can only tighten', () => {
  const looser = new ResponseError(CodeInvalidParams, 'invalid params: initializationOptions.sandbox.filesystem: "full" is looser than --sandbox-default workspace-write', {
    field: 'initializationOptions.sandbox.filesystem',
    reason: '"full" is looser than --sandbox-default workspace-write',
  });
  assert.deepEqual(refusedSetting(looser), {
    setting: 'toolhost.sandbox',
    detail: 'initializationOptions.sandbox.filesystem: "full" is looser than --sandbox-default workspace-write',
  });
  assert.equal(
    initializeFailure(looser, '/bin/toolhost', looser.message),
    'Toolhost: the server refused the toolhost.sandbox setting: initializationOptions.sandbox.filesystem: "full" is looser than --sandbox-default workspace-write. ' +
      "It can only tighten the confinement the server's command line allows (--sandbox-default, --sandbox-network), never loosen it: change or remove it.",
  );
  const outside = new ResponseError(CodePathOutsideWorkspace, 'read root "/etc" is outside the server\'s --root and --read-root', {
    field: 'initializationOptions.readRoots[0]',
    path: '/etc',
    reason: 'the client may narrow the command line\'s roots, never widen them',
  });
  assert.equal(
    initializeFailure(outside, '/bin/toolhost', 'x'),
    'Toolhost: the server refused the toolhost.readRoots setting: read root "/etc" is outside the server\'s --root and --read-root (the client may narrow the command line\'s roots, never widen them).',
  );
  // About no setting: the generic message.
  for (const e of [new ResponseError(CodeInvalidParams, 'invalid params: rootUri: not a directory', { field: 'rootUri' }), new Error('spawn ENOENT')]) {
    assert.equal(refusedSetting(e), undefined);
    assert.equal(initializeFailure(e, '/bin/toolhost', e.message), `Toolhost: the server (/bin/toolhost) did not start: ${e.message}`);
  }
});

test('sandboxOf reads capabilities.sandbox from an initialize answer, and nothing from one without it', () => {
  const cap = capability({ reason: 'no cgroup v2' });
  assert.deepEqual(sandboxOf({ capabilities: { methods: [], sandbox: cap } }), cap);
  assert.equal(sandboxOf({ capabilities: { methods: [] } }), undefined);
  assert.equal(sandboxOf({ capabilities: { sandbox: { ...cap, default: { filesystem: 'nowhere' } } } }), undefined);
  assert.equal(sandboxOf({ capabilities: { sandbox: { ...cap, available: 'yes' } } }), undefined);
  // A network allow-list (issue 25), protected and unreadable paths: still a sandbox.
  const allow = capability({ default: { filesystem: 'workspace-write', network: { allow: ['127.0.0.1:8080'] }, protect: ['/ws/.git/hooks'], denyRead: ['/root/.ssh'] } });
  assert.deepEqual(sandboxOf({ capabilities: { sandbox: allow } }), allow);
  assert.equal(sandboxOf({ capabilities: { sandbox: { ...cap, default: { network: { allow: 'x' } } } } }), undefined);
  assert.equal(sandboxOf({ capabilities: { sandbox: { ...cap, default: { network: true, protect: '.git' } } } }), undefined);
  assert.equal(sandboxOf(null), undefined);
});

test('the real server: a tightening toolhost.sandbox is accepted; a refused setting is named from its error', async () => {
  const ok = startServer('header');
  try {
    const init = await ok.conn.sendRequest<InitializeResult>(MethodInitialize, {
      processId: process.pid,
      rootUri: null,
      capabilities: {},
      initializationOptions: initializationOptions({ readRoots: [], sandbox: { filesystem: 'read-only', network: false } }, ok.root),
    });
    assert.equal(init.workspace.root, ok.root);
  } finally {
    await ok.close();
  }
  const refused = startServer('header');
  try {
    const e = await refused.conn
      .sendRequest(MethodInitialize, {
        processId: process.pid,
        rootUri: null,
        capabilities: {},
        initializationOptions: initializationOptions({ readRoots: ['/etc'], sandbox: undefined }, refused.root),
      })
      .then(() => assert.fail('initialize accepted a read root outside --root'), (err: unknown) => err);
    assert.equal(refusedSetting(e)?.setting, 'toolhost.readRoots');
    assert.match(initializeFailure(e, 'toolhost', 'x'), /^Toolhost: the server refused the toolhost\.readRoots setting: read root "\/etc" is outside/);
  } finally {
    await refused.close();
  }
});

test('the real server: the session default reflects toolhost.sandbox, a looser one is refused naming the setting, and results say what was applied', async () => {
  const tight = startServer('header');
  try {
    const init = await tight.conn.sendRequest<InitializeResult>(MethodInitialize, {
      processId: process.pid,
      rootUri: null,
      capabilities: {},
      initializationOptions: initializationOptions({ readRoots: [], sandbox: { network: false } }, tight.root),
    });
    const cap = sandboxOf(init);
    assert.ok(cap, 'initialize answers capabilities.sandbox');
    assert.deepEqual(cap.default, { filesystem: 'workspace-write', network: false });
    const res = await tight.conn.sendRequest(RunCommandRequest, { argv: ['true'] });
    if (cap.available) {
      assert.equal(res.sandbox?.network, false);
      assert.ok(res.sandbox && isConfined(res.sandbox), 'a confined result shows the confined marker');
    }
  } finally {
    await tight.close();
  }
  const loose = startServer('header');
  try {
    const e = await loose.conn
      .sendRequest(MethodInitialize, {
        processId: process.pid,
        rootUri: null,
        capabilities: {},
        initializationOptions: initializationOptions({ readRoots: [], sandbox: { filesystem: 'full' } }, loose.root),
      })
      .then(() => assert.fail('initialize accepted a looser sandbox than --sandbox-default'), (err: unknown) => err);
    assert.ok(e instanceof ResponseError && e.code === CodeInvalidParams);
    assert.equal(refusedSetting(e)?.setting, 'toolhost.sandbox');
  } finally {
    await loose.close();
  }
});
