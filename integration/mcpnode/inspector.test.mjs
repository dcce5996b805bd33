// The MCP Inspector's CLI (`mcp-inspector --cli --method tools/list
// --strict`) lints the schemas of tools/list for what clients fail to read
// (type arrays, bare true or false schemas, schemas that constrain
// nothing, remote $refs). Issue 34: it found 418 warnings in toolhost
// mcp's; there must be none. Run with `npm ci && npm test`; TOOLHOST_BIN
// names the binary, else it is built from the repository.
//
// Issue 37: the same CLI over Streamable HTTP (`--transport http`, the
// token in `--header "Authorization: Bearer …"`) against toolhost mcp
// --http 127.0.0.1:0 --http-token-file: tools/list, tools/call with an
// array argument, and refused without the token (401).
//
// The Inspector runs through `npm exec` at the version pinned here, not
// from package.json: its tree holds an optional dependency of vite's that
// some registry mirrors lack, and a lock file made without it fails
// `npm ci` where the registry has it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'toolhost-inspector-'));
const root = path.join(work, 'root');
fs.mkdirSync(root);
let bin = process.env.TOOLHOST_BIN;

before(() => {
  if (!bin) {
    bin = path.join(work, 'toolhost');
    execFileSync('go', ['build', '-o', bin, '.'], { cwd: repo, stdio: 'inherit' });
  }
});

after(() => {
  fs.rmSync(work, { recursive: true, force: true });
});

// inspector is the Inspector's package, pinned.
const inspector = '@modelcontextprotocol/inspector@2.12.0';

test('the Inspector --strict finds no portability problem in the schemas of toolhost mcp', () => {
  const run = spawnSync('npm', ['exec', '--yes', `--package=${inspector}`, '--', 'mcp-inspector',
    '--cli', '--method', 'tools/list', '--strict', '--format', 'json', '--',
    bin, 'mcp', '--root', root, '--log-level', 'warn'], { encoding: 'utf8', timeout: 300_000 });
  assert.equal(run.status, 0, `mcp-inspector exited ${run.status} (${run.signal ?? 'no signal'}): ${run.stderr}`);
  const out = JSON.parse(run.stdout);
  // schemaFindings is left out when there is none.
  const findings = (out.schemaFindings ?? []).flatMap((t) =>
    t.findings.map((f) => `${t.toolName}: ${f.schema}.${f.path}: ${f.rule} (${f.severity})`));
  console.log(`mcp-inspector --strict: ${findings.length} findings in the schemas of ${out.result.tools.length} tools`);
  assert.equal(out.result.tools.length, 12);
  assert.deepEqual(findings, []);
});

// inspect runs the Inspector's CLI with args, without blocking the event
// loop (toolhost's stderr is read meanwhile), and returns how it ended.
function inspect(args) {
  return new Promise((resolve, reject) => {
    // The Inspector keeps its stored auth under $HOME: a home of the
    // test's, with npm's cache where it was, so the package is not fetched
    // again.
    const env = { ...process.env, HOME: work, npm_config_cache: process.env.npm_config_cache ?? path.join(os.homedir(), '.npm') };
    const p = spawn('npm', ['exec', '--yes', `--package=${inspector}`, '--', 'mcp-inspector', '--cli', ...args],
      { stdio: ['ignore', 'pipe', 'pipe'], timeout: 300_000, env });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('error', reject);
    p.on('close', (status, signal) => resolve({ status, signal, stdout, stderr }));
  });
}

test('the Inspector over Streamable HTTP with a bearer token: tools/list, tools/call, and 401 without it', { timeout: 600_000 }, async () => {
  const tokenFile = path.join(work, 'token');
  const server = spawn(bin, ['mcp', '--root', root, '--log-level', 'warn', '--http', '127.0.0.1:0', '--http-token-file', tokenFile],
    { stdio: ['ignore', 'inherit', 'pipe'] });
  const exited = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));
  try {
    // The endpoint is named on stderr once the listener serves.
    const endpoint = await new Promise((resolve, reject) => {
      const lines = readline.createInterface({ input: server.stderr });
      lines.on('line', (line) => {
        process.stderr.write(`server: ${line}\n`);
        const m = /^toolhost: serving MCP at (\S+)$/.exec(line);
        if (m) resolve(m[1]);
      });
      server.on('exit', () => reject(new Error('toolhost mcp --http exited before serving')));
    });
    assert.match(endpoint, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    assert.equal(fs.statSync(tokenFile).mode & 0o777, 0o600, 'the token file is made 0600');
    const token = fs.readFileSync(tokenFile, 'utf8').trim();
    assert.match(token, /^[0-9a-f]{64}$/);
    const http = [endpoint, '--transport', 'http', '--format', 'json'];
    const auth = ['--header', `Authorization: Bearer ${token}`];

    let run = await inspect([...http, ...auth, '--method', 'tools/list']);
    assert.equal(run.status, 0, `tools/list: mcp-inspector exited ${run.status} (${run.signal ?? 'no signal'}): ${run.stderr}`);
    const tools = JSON.parse(run.stdout).result.tools;
    assert.equal(tools.length, 12);
    console.log(`mcp-inspector --transport http: ${tools.length} tools`);

    // --tool-arg reads a value that parses as JSON as that JSON: an array.
    run = await inspect([...http, ...auth, '--method', 'tools/call', '--tool-name', 'write_file',
      '--tool-arg', 'path=i.txt', 'content=typed by the Inspector over HTTP']);
    assert.equal(run.status, 0, `write_file: mcp-inspector exited ${run.status}: ${run.stderr}`);
    assert.equal(JSON.parse(run.stdout).result.isError, undefined);
    run = await inspect([...http, ...auth, '--method', 'tools/call', '--tool-name', 'run_command',
      '--tool-arg', 'argv=["cat","i.txt"]']);
    assert.equal(run.status, 0, `run_command: mcp-inspector exited ${run.status}: ${run.stderr}`);
    const res = JSON.parse(run.stdout).result;
    assert.equal(res.structuredContent.exitCode, 0);
    assert.equal(res.structuredContent.stdout, 'typed by the Inspector over HTTP');
    assert.match(res.content[0].text, /^completed, exit code 0/);

    // Without the token, or with another, the server answers 401 and the
    // Inspector fails (--stored-auth-only: no interactive OAuth attempt).
    const bare = await fetch(endpoint, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' }, body: '{}' });
    assert.equal(bare.status, 401);
    assert.equal(bare.headers.get('www-authenticate'), 'Bearer realm="toolhost"');
    for (const header of [[], ['--header', `Authorization: Bearer ${'f'.repeat(64)}`]]) {
      run = await inspect([...http, ...header, '--stored-auth-only', '--method', 'tools/list']);
      assert.notEqual(run.status, 0, `mcp-inspector ${header.length ? 'with a wrong token' : 'without a token'} succeeded: ${run.stdout}`);
      assert.match(run.stderr, /auth_required[\s\S]*unauthorized: (no bearer token|invalid token)/);
    }
  } finally {
    server.kill('SIGTERM');
  }
  const { code, signal } = await exited;
  assert.equal(code, 0, `toolhost mcp --http exits 0 on SIGTERM, not ${code} (${signal ?? 'no signal'})`);
});
