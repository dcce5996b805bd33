// The official MCP TypeScript SDK's client drives the toolhost binary over
// stdio: an implementation of MCP independent of the Go SDK the server is
// built on. Run with `npm ci && npm test`; TOOLHOST_BIN names the binary,
// else it is built from the repository.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'toolhost-mcpnode-'));
const root = path.join(work, 'root');
fs.mkdirSync(root);
let bin = process.env.TOOLHOST_BIN;
let client;

before(async () => {
  if (!bin) {
    bin = path.join(work, 'toolhost');
    execFileSync('go', ['build', '-o', bin, '.'], { cwd: repo, stdio: 'inherit' });
  }
  // Plain toolhost: its first message, an MCP initialize, picks MCP.
  const transport = new StdioClientTransport({ command: bin, args: ['--root', root, '--log-level', 'warn'], stderr: 'inherit' });
  client = new Client({ name: 'toolhost-mcpnode', version: '1.0.0' });
  await client.connect(transport);
});

after(async () => {
  await client?.close();
  fs.rmSync(work, { recursive: true, force: true });
});

test('the server names itself and lists the twelve tools', async () => {
  assert.equal(client.getServerVersion().name, 'toolhost');
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [
    'cancel_command', 'diff_snapshot', 'list_commands', 'read_file', 'read_output', 'restore_snapshot',
    'run_command', 'snapshot_workspace', 'start_command', 'wait_command', 'write_file', 'write_input',
  ]);
  for (const t of tools) {
    assert.ok(t.description.length > 40, `${t.name} has a description for a model`);
    assert.equal(t.inputSchema.type, 'object');
    assert.ok(t.outputSchema, `${t.name} has an output schema`);
  }
});

test('run_command: a non-zero exit is a result, with the output linked', async () => {
  const res = await client.callTool({ name: 'run_command', arguments: { argv: ['sh', '-c', 'echo out; echo err >&2; exit 3'] } });
  assert.equal(res.isError, undefined);
  assert.equal(res.structuredContent.status, 'completed');
  assert.equal(res.structuredContent.exitCode, 3);
  assert.equal(res.structuredContent.stdout, 'out\n');
  assert.equal(res.structuredContent.stderr, 'err\n');
  assert.match(res.content[0].text, /exit code 3/);
  const link = res.content.find((c) => c.type === 'resource_link' && c.uri.endsWith('/output'));
  assert.ok(link, 'a resource_link to the whole output');
  const read = await client.readResource({ uri: link.uri });
  assert.equal(read.contents[0].text, fs.readFileSync(res.structuredContent.artifacts.outputPath, 'utf8'));
});

test('write_file then read_file', async () => {
  const w = await client.callTool({ name: 'write_file', arguments: { path: 'notes/a.txt', content: 'one\ntwo\nthree\n', createDirs: true } });
  assert.equal(w.isError, undefined);
  assert.equal(w.structuredContent.size, 14);
  assert.equal(fs.readFileSync(path.join(root, 'notes', 'a.txt'), 'utf8'), 'one\ntwo\nthree\n');
  const r = await client.callTool({ name: 'read_file', arguments: { path: 'notes/a.txt', line: 2, limit: 1 } });
  assert.equal(r.content[0].text, 'two\n');
  assert.equal(r.structuredContent.totalLines, 3);
  assert.equal(r.structuredContent.truncated, true);
});

test('a path outside the workspace is a tool error', async () => {
  for (const [name, args] of [
    ['read_file', { path: '../../../../etc/passwd' }],
    ['write_file', { path: '../escaped.txt', content: 'x' }],
  ]) {
    const res = await client.callTool({ name, arguments: args });
    assert.equal(res.isError, true, `${name} ${JSON.stringify(args)}`);
    assert.equal(res.structuredContent.error.code, -32001);
    assert.match(res.content[0].text, /outside/);
  }
  assert.equal(fs.existsSync(path.join(work, 'escaped.txt')), false);
});

test('bad arguments name the field, and the session goes on', async () => {
  const res = await client.callTool({ name: 'read_file', arguments: { path: 42 } });
  assert.equal(res.isError, true);
  assert.equal(res.structuredContent.error.code, -32602);
  assert.equal(res.structuredContent.error.data.field, 'path');
  await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), /no_such_tool/);
  const ok = await client.callTool({ name: 'run_command', arguments: { argv: ['true'] } });
  assert.equal(ok.structuredContent.exitCode, 0);
});

test('start_command, then wait_command', async () => {
  const started = await client.callTool({ name: 'start_command', arguments: { argv: ['sh', '-c', 'echo begun; echo ended'], label: 'node' } });
  assert.equal(started.isError, undefined);
  const handleId = started.structuredContent.handleId;
  assert.match(handleId, /.+/);
  const done = await client.callTool({ name: 'wait_command', arguments: { handleId, timeoutMs: 30000 } });
  assert.equal(done.structuredContent.status, 'completed');
  assert.equal(done.structuredContent.stdout, 'begun\nended\n');
  const out = await client.callTool({ name: 'read_output', arguments: { handleId, stream: 'stdout' } });
  assert.equal(out.content[0].text, 'begun\nended\n');
  assert.equal(out.structuredContent.eof, true);
});

test('a progress token gets the steps of a command', async () => {
  // The command holds its first step until the test has seen its
  // progress. The TypeScript SDK drops progress that it reads in the same
  // chunk as the response (typescript-sdk issue #2580), so the last steps
  // may be lost on the client's side; those that arrive must be right.
  const seen = [];
  const gate = path.join(root, 'gate');
  const script = 'echo "[STEP 00/02] one" >&2; while [ ! -e gate ]; do sleep 0.02; done; echo "  ✓ one" >&2; echo "[STEP 01/02] two" >&2; echo "  ✓ two" >&2';
  const res = await client.callTool({ name: 'run_command', arguments: { argv: ['sh', '-c', script] } }, undefined, {
    onprogress: (p) => {
      seen.push(p);
      fs.writeFileSync(gate, '');
    },
  });
  assert.equal(res.structuredContent.exitCode, 0);
  const all = ['step 1/2: one', 'step 1/2: one (done)', 'step 2/2: two', 'step 2/2: two (done)'];
  assert.ok(seen.length >= 1, 'the first step arrived before the command went on');
  assert.deepEqual(seen.map((p) => p.message), all.slice(0, seen.length));
  let last = -1;
  for (const p of seen) {
    assert.equal(p.total, 2);
    assert.ok(p.progress > last, `progress grows: ${JSON.stringify(seen)}`);
    last = p.progress;
  }
});
