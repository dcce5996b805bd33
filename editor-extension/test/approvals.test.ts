// Issue 35's questions to the user, without VS Code: the capability the
// setting declares, the notification's buttons and text, the answer a click
// makes, the queue that shows one question at a time and drops those the
// server gave up on, and the decisions the Tools view shows under a command.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sandboxOf } from '../src/answers';
import {
  answerOf,
  approvalButtons,
  approvalMessage,
  approvalsCapability,
  approvalsFeature,
  ApprovalQueue,
  approvalTimeoutOf,
  approvalTooltip,
  askedFor,
  type CancelToken,
  describeApproval,
} from '../src/approvals';
import { toolChildren } from '../src/treeNodes';
import { ToolsModel } from '../src/model';
import {
  type ApprovalRequestParams,
  ApprovalRequestRequest,
  type ApprovalScope,
  type InitializeResult,
  MethodInitialize,
  RunCommandRequest,
  type ToolResult,
} from '../src/protocol';
import { initializationOptions } from '../src/settings';
import { startServer } from './client';

const ALL: ApprovalScope[] = ['once', 'command', 'session', 'always'];

function params(id: string, scopes: ApprovalScope[] = ALL): ApprovalRequestParams {
  return { approvalId: id, handleId: 'h1', argv: ['curl', '-s', 'http://127.0.0.1:8080/'], cwd: '/w', kind: 'network', target: '127.0.0.1:8080', scopes };
}

/** A CancellationToken the test fires. */
class Token implements CancelToken {
  isCancellationRequested = false;
  private readonly listeners = new Set<() => void>();
  onCancellationRequested(l: () => void) {
    this.listeners.add(l);
    return { dispose: () => void this.listeners.delete(l) };
  }
  cancel(): void {
    this.isCancellationRequested = true;
    for (const l of [...this.listeners]) l();
  }
  get listening(): number {
    return this.listeners.size;
  }
}

/** A fake notification API: each show waits for the test to click. */
class Notifications {
  readonly shown: string[] = [];
  private readonly clicks = new Map<string, (click: string | undefined) => void>();
  show = (p: ApprovalRequestParams): Promise<string | undefined> => {
    this.shown.push(p.approvalId);
    return new Promise((resolve) => this.clicks.set(p.approvalId, resolve));
  };
  click(id: string, button: string | undefined): void {
    const c = this.clicks.get(id);
    assert.ok(c, `${id} was shown`);
    c(button);
  }
}

const tick = () => new Promise((r) => setImmediate(r));

test('the setting: on (or unset) declares capabilities.approvals {}, off declares nothing', () => {
  assert.deepEqual(approvalsCapability(undefined), {});
  assert.deepEqual(approvalsCapability(true), {});
  assert.equal(approvalsCapability(false), undefined);
  let enabled: unknown = true;
  const feature = approvalsFeature(() => enabled);
  const on: Record<string, unknown> = { window: { workDoneProgress: true } };
  feature.fillClientCapabilities(on);
  assert.deepEqual(on, { window: { workDoneProgress: true }, approvals: {} });
  enabled = false;
  const off: Record<string, unknown> = { window: { workDoneProgress: true } };
  feature.fillClientCapabilities(off);
  assert.deepEqual(off, { window: { workDoneProgress: true } }, 'setting off: not declared');
  assert.deepEqual(feature.getState(), { kind: 'static' });
});

test('the buttons are exactly the offered scopes, in order, then Deny', () => {
  assert.deepEqual(approvalButtons(ALL), ['Allow once', 'Allow for this command', 'Allow for this session', 'Always', 'Deny']);
  assert.deepEqual(approvalButtons(['session', 'once']), ['Allow once', 'Allow for this session', 'Deny']);
  assert.deepEqual(approvalButtons(['once', 'command', 'session']), ['Allow once', 'Allow for this command', 'Allow for this session', 'Deny'], 'no Always where the server keeps no grants file');
  assert.deepEqual(approvalButtons([]), ['Deny']);
});

test('a click maps to {decision, scope}; Deny, closing and a scope not offered are a deny', () => {
  assert.deepEqual(answerOf('Allow once', ALL), { decision: 'allow', scope: 'once' });
  assert.deepEqual(answerOf('Allow for this command', ALL), { decision: 'allow', scope: 'command' });
  assert.deepEqual(answerOf('Allow for this session', ALL), { decision: 'allow', scope: 'session' });
  assert.deepEqual(answerOf('Always', ALL), { decision: 'allow', scope: 'always' });
  assert.deepEqual(answerOf('Deny', ALL), { decision: 'deny' });
  assert.deepEqual(answerOf(undefined, ALL), { decision: 'deny' }, 'closed');
  assert.deepEqual(answerOf('Always', ['once', 'command', 'session']), { decision: 'deny' }, 'not offered');
  assert.deepEqual(answerOf('Something else', ALL), { decision: 'deny' });
});

test('the message names the command, its directory and the target; a justification is shown', () => {
  const m = approvalMessage(params('a1'));
  assert.match(m, /"curl -s http:\/\/127\.0\.0\.1:8080\/"/);
  assert.match(m, /in \/w/);
  assert.match(m, /connect to 127\.0\.0\.1:8080/);
  assert.match(approvalMessage({ ...params('a1'), justification: 'fetch the fixture' }), /Reason given: fetch the fixture/);
});

test('the queue shows one ask at a time, in order, the next once the current is answered', async () => {
  const n = new Notifications();
  const q = new ApprovalQueue(n.show);
  const a = q.ask(params('a1'));
  const b = q.ask(params('a2', ['once', 'session']));
  const c = q.ask(params('a3'));
  await tick();
  assert.deepEqual(n.shown, ['a1'], 'one at a time');
  assert.equal(q.pending, 3);
  n.click('a1', 'Allow once');
  assert.deepEqual(await a, { decision: 'allow', scope: 'once' });
  await tick();
  assert.deepEqual(n.shown, ['a1', 'a2']);
  n.click('a2', 'Allow for this session');
  assert.deepEqual(await b, { decision: 'allow', scope: 'session' });
  await tick();
  assert.deepEqual(n.shown, ['a1', 'a2', 'a3']);
  n.click('a3', undefined);
  assert.deepEqual(await c, { decision: 'deny' }, 'closed is a deny');
  assert.equal(q.pending, 0);
});

test('an ask cancelled while queued is dropped unseen; one cancelled while shown is denied at once, and its later click is ignored', async () => {
  const n = new Notifications();
  const q = new ApprovalQueue(n.show);
  const t1 = new Token();
  const t2 = new Token();
  const a = q.ask(params('a1'), t1);
  const b = q.ask(params('a2'), t2);
  const c = q.ask(params('a3'));
  await tick();
  assert.deepEqual(n.shown, ['a1']);
  t2.cancel(); // the server gave up on a2 before it was shown
  assert.deepEqual(await b, { decision: 'deny' });
  assert.equal(t2.listening, 0);
  t1.cancel(); // the server's timeout on the one shown
  assert.deepEqual(await a, { decision: 'deny' });
  await tick();
  assert.deepEqual(n.shown, ['a1', 'a3'], 'a2 never shown; a3 shown as a1 was given up');
  n.click('a1', 'Always'); // too late: counts for nothing
  await tick();
  assert.deepEqual(n.shown, ['a1', 'a3']);
  assert.equal(q.pending, 1);
  n.click('a3', 'Allow for this command');
  assert.deepEqual(await c, { decision: 'allow', scope: 'command' });
  assert.equal(q.pending, 0);
});

test('an ask already cancelled is never shown; a failing notification is a deny; clear denies every ask', async () => {
  const n = new Notifications();
  const q = new ApprovalQueue(n.show);
  const t = new Token();
  t.cancel();
  assert.deepEqual(await q.ask(params('a0'), t), { decision: 'deny' });
  assert.deepEqual(n.shown, []);

  const failing = new ApprovalQueue(() => Promise.reject(new Error('no window')));
  assert.deepEqual(await failing.ask(params('a1')), { decision: 'deny' });

  const a = q.ask(params('a1'));
  const b = q.ask(params('a2'));
  await tick();
  q.clear();
  assert.deepEqual(await Promise.all([a, b]), [{ decision: 'deny' }, { decision: 'deny' }]);
  assert.equal(q.pending, 0);
  assert.deepEqual(n.shown, ['a1']);
});

test('an ask past the server\'s timeout is given up like a cancelled one: the server denies it without $/cancelRequest', async () => {
  const n = new Notifications();
  const q = new ApprovalQueue(n.show);
  const a = q.ask(params('a1'), new Token(), 30);
  const b = q.ask(params('a2'), new Token(), 60_000);
  await tick();
  assert.deepEqual(n.shown, ['a1']);
  assert.deepEqual(await a, { decision: 'deny' });
  await tick();
  assert.deepEqual(n.shown, ['a1', 'a2'], 'the next one shows');
  n.click('a2', 'Allow once');
  assert.deepEqual(await b, { decision: 'allow', scope: 'once' }, 'answered in time; its timer is cleared');
  assert.equal(approvalTimeoutOf({ capabilities: { approvals: { ask: true, timeoutMs: 60000, scopes: ['once'] } } }), 60000);
  assert.equal(approvalTimeoutOf({ capabilities: {} }), undefined);
  assert.equal(approvalTimeoutOf(undefined), undefined);
});

function result(over: Partial<ToolResult>): ToolResult {
  return {
    commandId: 'c1', handleId: 'h1', status: 'completed', success: true, exitCode: 0, signal: null,
    startedAt: '2026-01-01T00:00:00Z', endedAt: '2026-01-01T00:00:01Z', durationMs: 1000,
    stdout: '', stderr: '', stdoutTruncated: false, stderrTruncated: false,
    artifacts: { stdoutPath: '/a/o', stderrPath: '/a/e', outputPath: '/a/out', byteCount: 0, lineCount: 0, sha256: '' },
    steps: [], ...over,
  };
}

test('the Tools view shows each decision of a command under it, in order', () => {
  const model = new ToolsModel();
  const approvals: ToolResult['approvals'] = [
    { kind: 'network', target: '127.0.0.1:8080', decision: 'allow', scope: 'once', decidedBy: 'user' },
    { kind: 'network', target: 'example.com:443', decision: 'deny', decidedBy: 'timeout' },
    { kind: 'network', target: 'pkg.dev:443', decision: 'allow', scope: 'always', decidedBy: 'grant' },
  ];
  const tool = model.toolResult(result({ approvals }));
  assert.ok(tool);
  const rows = toolChildren(tool).filter((n) => n.kind === 'approval');
  assert.deepEqual(
    rows.map((n) => (n.kind === 'approval' ? describeApproval(n.outcome) : '')),
    [
      'connect to 127.0.0.1:8080 · allowed once · by you',
      'connect to example.com:443 · denied · no answer in time',
      'connect to pkg.dev:443 · allowed always · remembered grant',
    ],
  );
  assert.deepEqual(approvalTooltip(approvals[1]).slice(0, 3), ['**network** `example.com:443`', 'decision: deny', 'decided by: timeout (no answer in time)']);
  assert.deepEqual(toolChildren(model.toolResult(result({ handleId: 'h2' }))!).filter((n) => n.kind === 'approval'), [], 'none without asks');
});

function hasCurl(): boolean {
  try {
    execFileSync('curl', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

test('the real server: the capability the feature declares makes it ask; Allow once lets curl fetch the body, an unanswered ask times out and leaves the queue, Deny refuses', async (t) => {
  const s = startServer('header', ['--approval-timeout', '2s']);
  let hits = 0;
  const origin = createServer((_, res) => {
    hits++;
    res.end('hello-asked\n');
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  const port = (origin.address() as AddressInfo).port;
  try {
    const capabilities: Record<string, unknown> = {};
    approvalsFeature(() => true).fillClientCapabilities(capabilities);
    const init = await s.conn.sendRequest<InitializeResult>(MethodInitialize, {
      processId: process.pid,
      rootUri: null,
      capabilities,
      // An allow-list that does not name the origin: reaching it is asked about.
      initializationOptions: initializationOptions({ readRoots: [], sandbox: undefined, networkAllow: ['127.0.0.1:9'] }, s.root),
    });
    const cap = sandboxOf(init);
    if (!cap?.available || !cap.layers.includes('proxy') || !hasCurl()) {
      t.skip(`no allow-list here (layers ${JSON.stringify(cap?.layers)}), or no curl`);
      return;
    }
    assert.equal(init.capabilities.approvals.ask, true, 'the server asks this client');
    assert.equal(approvalTimeoutOf(init), 2000);
    const shown: ApprovalRequestParams[] = [];
    let click: (p: ApprovalRequestParams) => Promise<string | undefined> = async () => 'Allow once';
    const q = new ApprovalQueue((p) => {
      shown.push(p);
      return click(p);
    });
    s.conn.onRequest(ApprovalRequestRequest, (p, token) => q.ask(p, token, approvalTimeoutOf(init)));
    const target = `127.0.0.1:${port}`;
    const argv = ['curl', '-sS', `http://${target}/`];

    const allowed = await s.conn.sendRequest(RunCommandRequest, { argv });
    assert.match(allowed.stdout, /hello-asked/);
    assert.equal(hits, 1);
    assert.equal(shown.length, 1);
    assert.equal(shown[0].kind, 'network');
    assert.equal(shown[0].target, target);
    assert.deepEqual(shown[0].argv, argv);
    assert.ok(shown[0].scopes.includes('once'), JSON.stringify(shown[0].scopes));
    assert.match(approvalMessage(shown[0]), new RegExp(`asks to connect to ${target.replace(/\./g, '\\.')}`));
    assert.deepEqual(allowed.approvals, [{ kind: 'network', target, decision: 'allow', scope: 'once', decidedBy: 'user' }]);

    // Never clicked: the server gives up after 2 s, and so does the queue.
    click = () => new Promise(() => undefined);
    const unanswered = await s.conn.sendRequest(RunCommandRequest, { argv });
    assert.equal(hits, 1, 'not reached');
    assert.deepEqual(unanswered.approvals, [{ kind: 'network', target, decision: 'deny', decidedBy: 'timeout' }]);
    const deadline = Date.now() + 5000;
    while (q.pending > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    assert.equal(q.pending, 0, 'the unanswered ask left the queue');

    // The next ask is shown, not stuck behind it; Deny refuses.
    click = async () => 'Deny';
    const denied = await s.conn.sendRequest(RunCommandRequest, { argv });
    assert.equal(shown.length, 3);
    assert.equal(hits, 1, 'not reached');
    assert.match(denied.stdout + denied.stderr, /denied by the user/);
    assert.deepEqual(denied.approvals, [{ kind: 'network', target, decision: 'deny', decidedBy: 'user' }]);
  } finally {
    origin.close();
    await s.close();
  }
});

test('a sandbox ask says the widening it would run with', () => {
  assert.equal(
    askedFor({ kind: 'sandbox', target: 'filesystem full, where the server allows workspace-write' }),
    'run with filesystem full, where the server allows workspace-write',
  );
});
