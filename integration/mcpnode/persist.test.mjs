// MCP under --persist (issue 26) driven by the official TypeScript SDK's
// experimental tasks client: a task made on one `toolhost mcp --persist`
// process is found, still running, by getTask on a later one, and
// getTaskResult gives its result there. Run with `npm ci && npm test`;
// TOOLHOST_BIN names the binary, else it is built from the repository.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'toolhost-mcpnode-persist-'));
const root = path.join(work, 'root');
const state = path.join(work, 'state');
const run = path.join(work, 'run');
for (const d of [root, state, run]) fs.mkdirSync(d, { mode: 0o700 });
let bin = process.env.TOOLHOST_BIN;
// Each test waits on events; this only bounds a test that would hang.
const bounded = { timeout: 30_000 };

before(() => {
  if (!bin) {
    bin = path.join(work, 'toolhost');
    execFileSync('go', ['build', '-o', bin, '.'], { cwd: repo, stdio: 'inherit' });
  }
});

after(() => {
  // Stop the holder and wait for its end: it holds its lock file until it
  // exits, and flock(1) waits for the lock.
  const dir = path.join(run, 'toolhost');
  for (const f of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
    if (!f.endsWith('.lock')) continue;
    const lock = path.join(dir, f);
    const pid = Number(fs.readFileSync(lock, 'utf8').trim());
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      continue; // gone already
    }
    execFileSync('flock', [lock, 'true'], { timeout: 30_000 });
  }
  fs.rmSync(work, { recursive: true, force: true });
});

// connect starts `toolhost mcp --persist` on the root, its state and
// runtime directories the test's own, and connects a client to it. Every
// connection has the same command line, so they share the holder's MCP
// session.
async function connect(name) {
  const transport = new StdioClientTransport({
    command: bin,
    args: ['mcp', '--persist', '--root', root, '--state-dir', state, '--linger', '1m', '--log-level', 'warn'],
    env: { ...process.env, XDG_RUNTIME_DIR: run },
    stderr: 'inherit',
  });
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transport);
  return client;
}

// gateScript is a shell fragment that waits until the workspace file name
// exists: the test creates it once it has seen what it waits for.
function gateScript(name) {
  return `while [ ! -e ${name} ]; do sleep 0.02; done`;
}

test('a task made on one connection is found running on a later one, which gets its result', bounded, async () => {
  const a = await connect('toolhost-mcpnode-persist-a');
  const created = await a.request(
    { method: 'tools/call', params: { name: 'start_command', arguments: { argv: ['sh', '-c', `echo hi; ${gateScript('gate')}; echo done`] }, task: {} } },
    CreateTaskResultSchema,
  );
  const id = created.task.taskId;
  assert.match(id, /^h-\d+\.[0-9a-f]{32}$/, 'a handle id and 128 random bits');
  // The first client goes: its process ends, the command goes on.
  await a.close();

  const b = await connect('toolhost-mcpnode-persist-b');
  try {
    const running = await b.experimental.tasks.getTask(id);
    assert.equal(running.taskId, id);
    assert.equal(running.status, 'working', JSON.stringify(running));
    fs.writeFileSync(path.join(root, 'gate'), '');
    const result = await b.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    assert.equal(result.structuredContent.status, 'completed', JSON.stringify(result.structuredContent));
    assert.equal(result.structuredContent.stdout, 'hi\ndone\n');
    assert.deepEqual(result._meta?.['io.modelcontextprotocol/related-task'], { taskId: id });
    const done = await b.experimental.tasks.getTask(id);
    assert.equal(done.status, 'completed');
  } finally {
    await b.close();
  }
});
