// Issue 25's extension points: the toolhost.networkAllow setting and how
// initialize's refusal of it is told, the hosts a command was refused in
// the Tools view, the confined marker every machine draws, and ports
// forwarded out of a command's network namespace. Model tests with protocol
// values as the server sends them, then the real binary.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ResponseError } from 'vscode-jsonrpc/node';
import { sandboxOf } from '../src/answers';
import {
  CONFINED,
  confinementOf,
  describeCapability,
  describeAllowed,
  describeRefused,
  describeSandbox,
  describeTool,
  formatBytes,
  hostPort,
  isConfined,
  networkLines,
  refusedHosts,
  toolTooltip,
  ToolsModel,
} from '../src/model';
import { describePort, forwardedFrom, portMessage, portOf, Ports, portUrl } from '../src/ports';
import {
  CancelRequest,
  CodeInvalidParams,
  type InitializeResult,
  LongRunningRequest,
  MethodInitialize,
  PortOpenedNotification,
  RunCommandRequest,
  type SandboxCapability,
  type ToolResult,
  ToolResultNotification,
} from '../src/protocol';
import { initializationOptions, initializeFailure, readNetworkAllow, refusedSetting, SettingError } from '../src/settings';
import { startServer, type Session } from './client';

function result(handleId: string, over: Partial<ToolResult>): ToolResult {
  return {
    commandId: 'c1', handleId, status: 'completed', success: true, exitCode: 0, signal: null,
    startedAt: '2026-01-01T00:00:00Z', endedAt: '2026-01-01T00:00:01Z', durationMs: 1000,
    stdout: '', stderr: '', stdoutTruncated: false, stderrTruncated: false,
    artifacts: { stdoutPath: '/a/o', stderrPath: '/a/e', outputPath: '/a/out', byteCount: 0, lineCount: 0, sha256: '' },
    steps: [], ...over,
  };
}

const started = { commandId: 'c1', pid: 1, processGroupId: 1, startedAt: '2026-01-01T00:00:00Z', command: 'curl' };

function capability(over: Partial<SandboxCapability>): SandboxCapability {
  return { available: true, abi: 7, mode: 'auto', default: { filesystem: 'workspace-write', network: true }, layers: ['landlock-abi-7', 'netns', 'proxy'], ...over };
}

test('toolhost.networkAllow becomes sandbox.network {allow}, merged with toolhost.sandbox; network false stays', () => {
  const allow = ['proxy.golang.org', '*.npmjs.org', '127.0.0.1:8080'];
  // Empty or unset: no narrowing, no sandbox key at all.
  for (const none of [undefined, null, []]) {
    assert.deepEqual(initializationOptions({ readRoots: [], sandbox: undefined, networkAllow: none }, '/ws'), { readRoots: [] });
    assert.deepEqual(initializationOptions({ readRoots: [], sandbox: { filesystem: 'read-only' }, networkAllow: none }, '/ws'), {
      readRoots: [],
      sandbox: { filesystem: 'read-only' },
    });
  }
  assert.deepEqual(initializationOptions({ readRoots: [], sandbox: undefined, networkAllow: allow }, '/ws'), { readRoots: [], sandbox: { network: { allow } } });
  // Beside a filesystem mode; over network true (the allow-list is narrower).
  assert.deepEqual(initializationOptions({ readRoots: [], sandbox: { filesystem: 'read-only', network: true }, networkAllow: allow }, '/ws'), {
    readRoots: [],
    sandbox: { filesystem: 'read-only', network: { allow } },
  });
  // toolhost.sandbox.network false is stricter: it stays, the list is not sent.
  assert.deepEqual(initializationOptions({ readRoots: [], sandbox: { network: false }, networkAllow: allow }, '/ws'), { readRoots: [], sandbox: { network: false } });

  assert.deepEqual(readNetworkAllow(['a.com']), ['a.com']);
  for (const [v, re] of [
    ['a.com', /^toolhost\.networkAllow must be an array of host patterns/],
    [{ allow: ['a.com'] }, /^toolhost\.networkAllow must be an array/],
    [['a.com', 443], /^toolhost\.networkAllow\[1\] must be a string such as "example.com:443", not 443$/],
  ] as [unknown, RegExp][]) {
    assert.throws(() => initializationOptions({ readRoots: [], sandbox: undefined, networkAllow: v }, '/ws'), (e: unknown) => {
      assert.ok(e instanceof SettingError);
      assert.equal(e.setting, 'toolhost.networkAllow', 'Open Settings goes to the setting');
      assert.match(e.message, re);
      return true;
    });
  }
});

test('initialize refusing an allow-list entry names toolhost.networkAllow and the entry; a wider list says it only narrows', () => {
  const sent = initializationOptions({ readRoots: [], sandbox: undefined, networkAllow: ['ok.example.com', '*.'] }, '/ws');
  const reason = 'malformed network allow-list entry "*.": "*." needs a domain after it, as in *.example.com';
  const malformed = new ResponseError(CodeInvalidParams, `invalid params: initializationOptions.sandbox.network.allow[1]: ${reason}`, {
    field: 'initializationOptions.sandbox.network.allow[1]',
    reason,
  });
  assert.deepEqual(refusedSetting(malformed, sent), {
    setting: 'toolhost.networkAllow',
    detail: `${reason} (toolhost.networkAllow[1])`,
    entry: { index: 1, pattern: '*.' },
  });
  assert.equal(
    initializeFailure(malformed, 'toolhost', malformed.message, sent),
    `Toolhost: the server refused the toolhost.networkAllow setting: ${reason} (toolhost.networkAllow[1]). Fix or remove that entry; the server is not started.`,
  );
  // A reason that does not quote the entry gets it named.
  const terse = new ResponseError(CodeInvalidParams, 'invalid params', { field: 'initializationOptions.sandbox.network.allow[0]', reason: 'bad port' });
  assert.equal(refusedSetting(terse, sent)?.detail, 'entry "ok.example.com": bad port (toolhost.networkAllow[0])');

  const wider = new ResponseError(CodeInvalidParams, 'invalid params: initializationOptions.sandbox.network.allow: …', {
    field: 'initializationOptions.sandbox.network.allow',
    reason: 'network allow-list entry would widen the server\'s list: "evil.com" (port 80) is not within the server\'s list good.com; a client may narrow the server\'s list, never widen it',
  });
  assert.equal(refusedSetting(wider, sent)?.setting, 'toolhost.networkAllow');
  assert.match(initializeFailure(wider, 'toolhost', 'x', sent), /^Toolhost: the server refused the toolhost\.networkAllow setting: network allow-list entry would widen.*It can only narrow the network the server's command line allows \(--sandbox-network, --network-allow\)/);
  const off = new ResponseError(CodeInvalidParams, 'invalid params: …', { field: 'initializationOptions.sandbox.network', reason: 'the network is off for this session' });
  assert.equal(refusedSetting(off, sent)?.setting, 'toolhost.networkAllow');
  // Without an allow-list sent, the network is toolhost.sandbox's.
  assert.equal(refusedSetting(off, { readRoots: [], sandbox: { network: true } })?.setting, 'toolhost.sandbox');
  assert.equal(refusedSetting(off)?.setting, 'toolhost.sandbox');
});

test('an allow-listed command is confined, says its list, and shows the hosts it was refused', () => {
  const m = new ToolsModel(() => 0);
  m.serverStarted(capability({}));
  const t = m.started({ ...started, handleId: 'h1' }, 'curl', { network: { allow: ['127.0.0.1:8080', '*.npmjs.org'] } });
  assert.equal(describeTool(t, 0), `${CONFINED} · running · 0.0s`);
  assert.deepEqual(confinementOf(t).lines, [
    'confined (asked): filesystem workspace-write, network allow-list: 127.0.0.1:8080, *.npmjs.org; what was applied is known when it ends',
  ]);
  assert.deepEqual(refusedHosts(t), [], 'nothing is known to be refused before the result');

  // A session default that is an allow-list confines a command that asks nothing.
  const full = new ToolsModel(() => 0);
  full.serverStarted(capability({ default: { filesystem: 'full', network: { allow: ['proxy.golang.org'] } } }));
  assert.equal(confinementOf(full.started({ ...started, handleId: 'h2' }, 'go')).locked, true);
  assert.equal(isConfined({ filesystem: 'full', network: true }), false);
  assert.equal(isConfined({ filesystem: 'full', network: true, networkAllow: [], enforcedBy: 'netns+proxy' }), true);
  assert.equal(describeSandbox({ filesystem: 'full', network: { allow: [] } }), 'filesystem full, network allow-list: empty (no host)');
  // The log line the extension writes once the server runs.
  assert.equal(
    describeCapability(capability({ default: { filesystem: 'workspace-write', network: { allow: ['127.0.0.1:8080'] } } })),
    'commands are confined by default: filesystem workspace-write, network allow-list: 127.0.0.1:8080',
  );
  assert.equal(describeCapability(capability({ default: { filesystem: 'full', network: true } })), 'commands run unconfined by default: filesystem full, network on');
  assert.equal(describeCapability(capability({ available: false, reason: '--sandbox off' })), 'commands are not confined (--sandbox off)');
  assert.equal(describeCapability(undefined), 'it offers no confinement of commands');

  const done = m.toolResult(result('h1', {
    success: false, exitCode: 56,
    sandbox: { filesystem: 'workspace-write', network: true, networkAllow: ['127.0.0.1:8080', '*.npmjs.org'], protect: ['/ws/.git/hooks'], enforcedBy: 'landlock-abi-7+mntns+netns+proxy' },
    network: {
      allowed: [{ host: '127.0.0.1', port: 8080, connections: 1, bytesOut: 79, bytesIn: 1536 }],
      denied: [{ host: 'example.com', port: 443, attempts: 2 }, { host: '2001:db8::1', port: 80, attempts: 1 }],
    },
  }))!;
  assert.equal(describeTool(done, done.elapsedMs), 'confined · failed (exit 56) · 1.0s');
  assert.deepEqual(refusedHosts(done).map(describeRefused), ['Refused: example.com:443 (2×)', 'Refused: [2001:db8::1]:80 (1×)']);
  assert.deepEqual(toolTooltip(done).slice(5), [
    'confined: filesystem workspace-write, network allow-list: 127.0.0.1:8080, *.npmjs.org',
    'enforced by: `landlock-abi-7+mntns+netns+proxy`',
    'protected (read-only): `/ws/.git/hooks`',
    'allowed: 127.0.0.1:8080 (1 connection, 79 B out, 1.5 KiB in)',
    'refused: example.com:443 (2 attempts), not in the allow-list',
    'refused: [2001:db8::1]:80 (1 attempt), not in the allow-list',
  ]);
  assert.deepEqual(networkLines({ allowed: [], denied: [] }), ['network: no connection through the allow-list']);
  assert.deepEqual(networkLines(undefined), [], 'no allow-list, nothing said of the network use');
  assert.equal(describeAllowed({ host: 'registry.npmjs.org', port: 443, connections: 3, bytesOut: 1200, bytesIn: 20 * 1024 * 1024 }), 'registry.npmjs.org:443 (3 connections, 1.2 KiB out, 20.0 MiB in)');
  assert.equal(formatBytes(0), '0 B');
  assert.equal(hostPort('[::1]', 8080), '[::1]:8080');
});

test('a forwarded port: the host side is opened, the row and tooltip say the port inside', () => {
  const fwd = { port: 41234, address: '127.0.0.1', pid: 7, insidePort: 5173, insideAddress: '127.0.0.1' };
  assert.equal(portUrl(fwd), 'http://127.0.0.1:41234/', 'the browser goes to the host side');
  assert.equal(describePort(fwd), '127.0.0.1 · pid 7 · forwarded from inside port 5173');
  assert.equal(forwardedFrom({ insidePort: 3000, insideAddress: '10.0.0.2' }), 'forwarded from inside port 3000 (10.0.0.2)');
  assert.equal(forwardedFrom({}), '');
  assert.equal(portMessage(fwd, 'npm run dev', ''), 'Port 41234 opened by npm run dev, forwarded from inside port 5173');
  assert.deepEqual(portOf({ ...fwd, extra: 1 } as never), fwd, 'the inside port is kept, nothing else');

  const p = new Ports();
  p.opened(fwd);
  assert.deepEqual(p.list(), [fwd]);
  p.snapshot([fwd]);
  assert.deepEqual(p.list(), [fwd], 'a progress snapshot keeps it too');

  const m = new ToolsModel(() => 0);
  m.started({ ...started, handleId: 'h1' }, 'npm run dev');
  assert.equal(m.portOpened({ handleId: 'h1', ...fwd })?.fresh, true);
  assert.ok(toolTooltip(m.get('h1')!).includes('listening: 127.0.0.1:41234 (pid 7, forwarded from inside port 5173)'));
  // portClosed names the host side.
  m.portClosed({ handleId: 'h1', port: 41234, address: '127.0.0.1' });
  assert.equal(m.get('h1')!.ports.size, 0);
});

/** Starts the real server with initializationOptions from the settings; answers its initialize result. */
async function initialize(s: Session, networkAllow: unknown, sandbox?: unknown): Promise<InitializeResult> {
  return s.conn.sendRequest<InitializeResult>(MethodInitialize, {
    processId: process.pid,
    rootUri: null,
    capabilities: {},
    initializationOptions: initializationOptions({ readRoots: [], sandbox, networkAllow }, s.root),
  });
}

/** A loopback HTTP server answering `body`; resolves once it listens. */
async function serve(body: string): Promise<{ server: Server; port: number }> {
  const server = createServer((_, res) => res.end(body));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

function hasCurl(): boolean {
  try {
    execFileSync('curl', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

test('the real server: a malformed toolhost.networkAllow entry is refused at initialize, and the message names it', async () => {
  const s = startServer('header');
  try {
    const settings = { readRoots: [], sandbox: undefined, networkAllow: ['proxy.golang.org', 'a*b.com'] };
    const sent = initializationOptions(settings, s.root);
    const e = await initialize(s, settings.networkAllow).then(() => assert.fail('initialize accepted "a*b.com"'), (err: unknown) => err);
    assert.ok(e instanceof ResponseError && e.code === CodeInvalidParams, `InvalidParams: ${String(e)}`);
    const refused = refusedSetting(e, sent);
    assert.equal(refused?.setting, 'toolhost.networkAllow');
    assert.deepEqual(refused?.entry, { index: 1, pattern: 'a*b.com' });
    const msg = initializeFailure(e, 'toolhost', String(e), sent);
    assert.match(msg, /^Toolhost: the server refused the toolhost\.networkAllow setting: .*"a\*b\.com".*\(toolhost\.networkAllow\[1\]\)\. Fix or remove that entry/);
  } finally {
    await s.close();
  }
});

test('the real server: an allow-listed command reaches the allowed host; the refused one is in its result and the model shows it', async (t) => {
  const s = startServer('header');
  const { server, port } = await serve('hello-allowed\n');
  try {
    const init = await initialize(s, [`127.0.0.1:${port}`]);
    const cap = sandboxOf(init);
    assert.deepEqual(cap?.default.network, { allow: [`127.0.0.1:${port}`] }, 'the session default is the allow-list');
    if (!cap?.available || !cap.layers.includes('proxy') || !hasCurl()) {
      t.skip(`no allow-list here (layers ${JSON.stringify(cap?.layers)}), or no curl`);
      return;
    }
    const m = new ToolsModel();
    m.serverStarted(cap);
    // refused.invalid is refused by the proxy by name, before any lookup.
    const argv = ['sh', '-c', `curl -sS http://127.0.0.1:${port}/; curl -sS http://refused.invalid/; curl -sS https://refused.invalid/`];
    const r = await s.conn.sendRequest(RunCommandRequest, { argv });
    assert.match(r.stdout, /hello-allowed/);
    assert.match(r.stdout, /toolhost: refused\.invalid:80 is not in this command's network allow-list/);
    const view = m.toolResult({ ...r, handleId: 'h-1' })!;
    assert.equal(confinementOf(view).locked, true);
    assert.match(describeTool(view, 0), /^confined · /);
    assert.deepEqual(refusedHosts(view).map(describeRefused).sort(), ['Refused: refused.invalid:443 (1×)', 'Refused: refused.invalid:80 (1×)']);
    const tip = toolTooltip(view);
    assert.ok(tip.includes(`confined: filesystem workspace-write, network allow-list: 127.0.0.1:${port}`), JSON.stringify(tip));
    assert.ok(tip.some((l) => l.startsWith(`allowed: 127.0.0.1:${port} (1 connection, `)), JSON.stringify(tip));
  } finally {
    server.close();
    await s.close();
  }
});

test('the real server: a dev server inside an allow-listed command is opened through the forward, on the host side', async (t) => {
  const s = startServer('header');
  try {
    const cap = sandboxOf(await initialize(s, ['127.0.0.1:9']));
    if (!cap?.available || !cap.layers.includes('proxy')) {
      t.skip(`no network namespace of its own here (layers ${JSON.stringify(cap?.layers)})`);
      return;
    }
    const m = new ToolsModel();
    m.serverStarted(cap);
    const listener = "require('http').createServer((q, r) => r.end('from-inside')).listen(0, '127.0.0.1')";
    const st = await s.conn.sendRequest(LongRunningRequest, { argv: [process.execPath, '-e', listener], label: 'dev' });
    m.started(st, 'dev');
    const opened = await s.waitFor(PortOpenedNotification, (p) => p.handleId === st.handleId);
    assert.ok(opened.insidePort !== undefined && opened.insidePort > 0, `portOpened names the inside port: ${JSON.stringify(opened)}`);
    const seen = m.portOpened(opened);
    assert.equal(seen?.fresh, true);
    const [port] = m.get(st.handleId)!.ports.list();
    assert.equal(describePort(port), `${opened.address} · pid ${opened.pid} · forwarded from inside port ${opened.insidePort}`);
    // What Open in Browser opens: the host side, which reaches the server inside.
    const res = await fetch(portUrl(port));
    assert.equal(await res.text(), 'from-inside');
    await s.conn.sendRequest(CancelRequest, { handleId: st.handleId });
    await s.waitFor(ToolResultNotification, (r) => r.handleId === st.handleId);
  } finally {
    await s.close();
  }
});
