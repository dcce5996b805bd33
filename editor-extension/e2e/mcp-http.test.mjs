// End-to-end test of docs/mcp.md's "#### VS Code" block for `toolhost mcp
// --http`, with VS Code's own MCP client (no extension of ours): code-server
// (run with Node 24) driven by Debian's headless Chromium through
// playwright-core, as e2e.test.mjs does. It starts the real binary with a
// bearer-token file and a debug log, writes the docs' .vscode/mcp.json (its
// JSON block read from docs/mcp.md, only the URL's port changed) into a fresh
// workspace, and then, in VS Code: MCP: List Servers → toolhost → Start
// Server, the token typed into the promptString input it asks for. It waits
// for toolhost's log to show one MCP HTTP session connected, its log level
// set and initialized, and no request refused; for VS Code to list the server
// as Running; and for its "MCP: toolhost" output channel (code-server runs
// with --log debug, so the channel logs each message it sends) to show its
// initialize (its clientInfo: code-server's nameLong and version), its
// tools/list and "Discovered N tools", N being what toolhost lists to an
// independent client.
//
// VS Code's MCP commands are hidden with "chat.disableAIFeatures": true (as
// e2e.test.mjs sets it): this test leaves it false. Copilot is not needed.
//
//   node --test e2e/mcp-http.test.mjs      (TOOLHOST_BIN: a built toolhost;
//                                           else it runs `go build`)
//
// Everything goes under .e2e/mcp-http/ (gitignored), screenshots too. Every
// wait is on an event (a line of a file, a DOM element) with a deadline.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, openWorkbench, poller, screenshots } from './support.mjs';

const EXT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const REPO = path.resolve(EXT_DIR, '..');
const NODE24 = process.env.TOOLHOST_E2E_NODE ?? path.join(EXT_DIR, '.e2e/node24/bin/node');
const CODE_SERVER_PKG = path.join(EXT_DIR, 'e2e/codeserver/node_modules/code-server');
const CODE_SERVER = path.join(CODE_SERVER_PKG, 'out/node/entry.js');
const PRODUCT = path.join(CODE_SERVER_PKG, 'lib/vscode/product.json');
const CHROMIUM = process.env.TOOLHOST_E2E_CHROMIUM ?? '/usr/bin/chromium';
const RUN_DIR = path.join(EXT_DIR, '.e2e/mcp-http');
const SHOTS = path.join(RUN_DIR, 'screenshots');
const WS = path.join(RUN_DIR, 'workspace');
const TOKEN_FILE = path.join(RUN_DIR, 'http-token');
const TOOLHOST_LOG = path.join(RUN_DIR, 'toolhost.log');
// The URL in the docs' block, which this test replaces with its server's.
const DOCS_URL = 'http://127.0.0.1:8765/mcp';

// Without code-server (scripts/install-e2e.sh) this fails when CI=true, else
// it is skipped, saying why.
const missing = [NODE24, CODE_SERVER, CHROMIUM].filter((f) => !existsSync(f));
const skip =
  missing.length > 0 && process.env.CI !== 'true'
    ? `missing ${missing.join(', ')}: run scripts/install-e2e.sh (with CI=true this fails)`
    : false;

let toolhost; // ChildProcess
let toolhostErr = '';
let codeServer; // ChildProcess
let codeServerLog = '';
let browser; // BrowserContext
let page;

const screenshot = screenshots(SHOTS, () => page);
const until = poller(() => page && screenshot('timeout'));

/**
 * Ends a child, or with group its whole process group (code-server's
 * extension host and its other children): SIGTERM, then SIGKILL after 15 s;
 * waits until the child has exited and, with group, every process of the
 * group is gone.
 */
async function stop(child, group) {
  if (!child) return;
  const target = group ? -child.pid : child.pid;
  const exited = child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once('exit', r));
  let childDone = false;
  exited.then(() => (childDone = true));
  const gone = () => {
    if (!childDone) return false;
    if (!group) return true;
    try {
      process.kill(target, 0);
      return false;
    } catch {
      return true; // ESRCH: no process left in the group
    }
  };
  for (const sig of ['SIGTERM', 'SIGKILL']) {
    try {
      process.kill(target, sig);
    } catch {
      // gone already
    }
    const deadline = Date.now() + 15_000;
    while (!gone() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    if (gone()) return;
  }
  throw new Error(`${group ? 'process group' : 'process'} ${child.pid} still there after SIGKILL`);
}

/** The JSON block under docs/mcp.md's "#### VS Code" heading (the HTTP one). */
function docsBlock() {
  const md = readFileSync(path.join(REPO, 'docs/mcp.md'), 'utf8');
  const m = md.match(/^#### VS Code\n[\s\S]*?^```json\n([\s\S]*?)^```$/m);
  assert.ok(m, 'docs/mcp.md has a ```json block under "#### VS Code"');
  assert.ok(m[1].includes(DOCS_URL), `the docs' block names ${DOCS_URL}`);
  return m[1];
}

const quickInput = () => page.locator('.quick-input-widget .quick-input-box input');

/** A row of the open quick pick whose label is exactly `label`. */
function pickRow(label) {
  return page
    .locator('.quick-input-widget .quick-input-list .monaco-list-row')
    .filter({ has: page.locator('.label-name', { hasText: new RegExp(`^${label}$`) }) })
    .first();
}

/**
 * Opens MCP: List Servers (retrying until the command is listed) and returns
 * toolhost's row there, the list still open.
 */
async function listServers() {
  const row = pickRow('toolhost');
  await until('MCP: List Servers to list toolhost', async () => {
    await page.keyboard.press('Escape');
    await page.locator('.monaco-workbench').click({ position: { x: 700, y: 300 }, timeout: 2000 }).catch(() => undefined);
    await page.keyboard.press('F1');
    await quickInput().waitFor({ state: 'visible', timeout: 3000 });
    await quickInput().fill('>MCP: List Servers');
    const cmd = page.locator('.quick-input-list .monaco-list-row', { hasText: 'MCP: List Servers' }).first();
    await cmd.waitFor({ state: 'visible', timeout: 3000 });
    await cmd.click({ timeout: 3000 });
    await row.waitFor({ state: 'visible', timeout: 5000 });
    return true;
  }, 90_000);
  return row;
}

/** The Output panel's text as shown: its rendered lines in order, joined (wrapped lines rejoined). */
async function outputText() {
  const lines = await page.locator('.panel .view-lines .view-line').evaluateAll((els) =>
    els.map((e) => ({ top: parseFloat(e.style.top) || 0, text: e.textContent ?? '' })),
  );
  return lines
    .sort((a, b) => a.top - b.top)
    .map((l) => l.text)
    .join('')
    .replace(/\u00a0/g, ' ');
}

/** Shows only the Output panel's lines that contain `text`. */
async function filterOutput(text) {
  const filter = page.locator('.panel input[placeholder^="Filter"]').first();
  await filter.waitFor({ state: 'visible', timeout: 10_000 });
  await filter.fill(text);
}

/** One MCP request over Streamable HTTP (plain fetch): the JSON-RPC response, and the session id. */
async function mcpRequest(url, token, message, sessionId) {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${token}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      ...(sessionId ? { 'Mcp-Session-Id': sessionId, 'MCP-Protocol-Version': '2025-11-25' } : {}),
    },
    body: JSON.stringify(message),
    signal: AbortSignal.timeout(15_000),
  });
  assert.ok(res.ok, `${message.method}: HTTP ${res.status}`);
  const sid = res.headers.get('mcp-session-id') ?? sessionId;
  if (message.id === undefined) return { sid };
  const body = await res.text();
  const payloads = res.headers.get('content-type')?.startsWith('text/event-stream')
    ? body
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .filter(Boolean)
    : [body];
  const reply = payloads.map((p) => JSON.parse(p)).find((m) => m.id === message.id);
  assert.ok(reply?.result, `${message.method}: a result (${body.slice(0, 300)})`);
  return { sid, result: reply.result };
}

describe("VS Code's MCP client and toolhost mcp --http (docs/mcp.md's block)", { timeout: 240_000, skip }, () => {
  let url;
  let token;
  let product;

  before(async () => {
    assert.deepEqual(missing, [], `missing ${missing.join(', ')}: run scripts/install-e2e.sh`);
    product = JSON.parse(readFileSync(PRODUCT, 'utf8'));
    rmSync(RUN_DIR, { recursive: true, force: true });
    mkdirSync(SHOTS, { recursive: true });
    mkdirSync(path.join(WS, '.vscode'), { recursive: true });
    writeFileSync(path.join(WS, 'README.txt'), 'toolhost mcp --http e2e workspace\n');

    let bin = process.env.TOOLHOST_BIN;
    if (!bin) {
      bin = path.join(RUN_DIR, 'toolhost');
      execFileSync('go', ['build', '-o', bin, '.'], { cwd: REPO, stdio: 'pipe' });
    }
    // Port 0: toolhost picks a free port and names it. The token file does
    // not exist: toolhost makes it (256 random bits, mode 0600).
    toolhost = spawn(
      bin,
      ['mcp', '--http', '127.0.0.1:0', '--http-token-file', TOKEN_FILE, '--log-file', TOOLHOST_LOG, '--log-level', 'debug', '--root', WS],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, XDG_STATE_HOME: path.join(RUN_DIR, 'state') } },
    );
    toolhost.stderr.on('data', (d) => (toolhostErr += d));
    await until('toolhost to say where it serves MCP', () => {
      assert.equal(toolhost.exitCode, null, `toolhost exited: ${toolhostErr}`);
      const m = toolhostErr.match(/^toolhost: serving MCP at (http:\/\/127\.0\.0\.1:\d+\/mcp)$/m);
      url = m?.[1];
      return Boolean(url);
    });
    token = readFileSync(TOKEN_FILE, 'utf8').trim();
    assert.ok(token.length > 0, 'toolhost wrote a token');

    // The docs' block, only its URL's port changed.
    const block = docsBlock();
    writeFileSync(path.join(WS, '.vscode/mcp.json'), block.replace(DOCS_URL, url));
    assert.equal(JSON.parse(block).servers.toolhost.url, DOCS_URL);

    const userData = path.join(RUN_DIR, 'user-data');
    const extensions = path.join(RUN_DIR, 'extensions');
    mkdirSync(path.join(userData, 'User'), { recursive: true });
    writeFileSync(
      path.join(userData, 'User/settings.json'),
      JSON.stringify({
        'workbench.startupEditor': 'none',
        'workbench.tips.enabled': false,
        'workbench.welcomePage.walkthroughs.openOnInstall': false,
        'security.workspace.trust.enabled': false,
        'extensions.ignoreRecommendations': true,
        'telemetry.telemetryLevel': 'off',
        // true hides every MCP: command; false is the default.
        'chat.disableAIFeatures': false,
        'workbench.secondarySideBar.defaultVisibility': 'hidden',
        // The workspace is inside this repository: no offer to open it.
        'git.openRepositoryInParentFolders': 'never',
      }),
    );
    const port = await freePort();
    codeServer = spawn(
      NODE24,
      [
        CODE_SERVER,
        '--bind-addr', `127.0.0.1:${port}`,
        '--auth', 'none',
        '--disable-telemetry',
        '--disable-update-check',
        '--disable-workspace-trust',
        // The MCP output channel logs the messages VS Code sends at debug.
        '--log', 'debug',
        '--user-data-dir', userData,
        '--extensions-dir', extensions,
        WS,
      ],
      // Its own process group, so the whole tree is stopped at the end.
      { detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PATH: `${path.dirname(NODE24)}:/usr/local/bin:/usr/bin:/bin` } },
    );
    codeServer.stdout.on('data', (d) => (codeServerLog += d));
    codeServer.stderr.on('data', (d) => (codeServerLog += d));
    const base = `http://127.0.0.1:${port}`;
    await until('code-server /healthz', async () => (await fetch(`${base}/healthz`)).ok, 60_000);

    ({ browser, page } = await openWorkbench(CHROMIUM, path.join(RUN_DIR, 'chromium'), base, WS));
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    await stop(codeServer, true);
    await stop(toolhost, false);
    if (toolhost) writeFileSync(path.join(RUN_DIR, 'toolhost.stderr'), toolhostErr);
    if (codeServer) writeFileSync(path.join(RUN_DIR, 'code-server.log'), codeServerLog);
  });

  test('VS Code starts the server with the token it asks for, and lists its tools', async () => {
    // MCP: List Servers → toolhost → Start Server.
    const row = await listServers();
    await screenshot('list-servers');
    await row.click();
    const start = pickRow('Start Server');
    await start.waitFor({ state: 'visible', timeout: 10_000 });
    await start.click();

    // The promptString input: hidden (password), with the docs' description.
    await page.waitForFunction(
      () => document.querySelector('.quick-input-widget .quick-input-box input')?.type === 'password',
      null,
      { timeout: 30_000 },
    );
    const description = JSON.parse(docsBlock()).inputs[0].description;
    assert.ok((await page.locator('.quick-input-widget').innerText()).includes(description), 'the prompt shows the input\'s description');
    await screenshot('token-prompt');
    await quickInput().fill(token);
    await page.keyboard.press('Enter');

    // toolhost's side: one HTTP session, VS Code's logging/setLevel, then
    // notifications/initialized; no request refused (Host, Origin, token).
    await until("toolhost's log to show the session initialized", () => {
      const log = readFileSync(TOOLHOST_LOG, 'utf8');
      return log.includes('msg="server session connected"') && log.includes('msg="client log level set"') && log.includes('msg="session initialized"');
    }, 60_000);

    // VS Code's side: the server Running, then its output channel.
    await until('MCP: List Servers to show toolhost Running', async () => {
      const shown = await (await listServers()).innerText({ timeout: 2000 });
      if (/Error/.test(shown)) throw new Error(`toolhost's row: ${shown}`);
      return /Running/.test(shown);
    }, 60_000);
    await screenshot('running');
    await pickRow('toolhost').click();
    const showOutput = pickRow('Show Output');
    await showOutput.waitFor({ state: 'visible', timeout: 10_000 });
    await showOutput.click();
    await page.locator('.panel .view-lines').first().waitFor({ timeout: 30_000 });

    let discovered;
    await filterOutput('Discovered');
    await until('"MCP: toolhost" to log "Discovered N tools"', async () => {
      discovered = (await outputText()).match(/\[info\] Discovered (\d+) tools/);
      return Boolean(discovered);
    });
    await screenshot('discovered');

    await filterOutput('"clientInfo"');
    let clientInfo;
    await until("the output to show VS Code's initialize", async () => {
      const m = (await outputText()).match(/\[editor -> server\] (\{"jsonrpc":"2\.0","id":\d+,"method":"initialize".*?"clientInfo":\{[^}]*\}\}\})/);
      clientInfo = m && JSON.parse(m[1]).params.clientInfo;
      return Boolean(clientInfo);
    });
    assert.deepEqual(clientInfo, { name: product.nameLong, version: product.version });
    await screenshot('initialize');

    await filterOutput('"tools/list"');
    await until("the output to show VS Code's tools/list", async () =>
      /\[editor -> server\] \{"jsonrpc":"2\.0","id":\d+,"method":"tools\/list"/.test(await outputText()),
    );

    const log = readFileSync(TOOLHOST_LOG, 'utf8');
    assert.equal(log.match(/msg="server session connected"/g).length, 1, 'one MCP HTTP session: VS Code\'s');
    assert.doesNotMatch(log, /httpgate: refused/);

    // N is what toolhost lists to another client.
    const { sid } = await mcpRequest(url, token, {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'mcp-http.test', version: '1' } },
    });
    await mcpRequest(url, token, { jsonrpc: '2.0', method: 'notifications/initialized' }, sid);
    const { result } = await mcpRequest(url, token, { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }, sid);
    assert.ok(result.tools.length > 0);
    assert.equal(Number(discovered[1]), result.tools.length, `VS Code discovered toolhost's ${result.tools.length} tools`);
  });
});
