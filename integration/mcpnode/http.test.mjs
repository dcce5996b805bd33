// Issue 37 with the official MCP TypeScript SDK's Streamable HTTP client
// (StreamableHTTPClientTransport): toolhost mcp --http 127.0.0.1:0 with a
// bearer token. Tools; a task made on one HTTP session and fetched from
// another; elicitation accept and decline on the tool call's own stream;
// and a client without the token refused with 401. Run with
// `npm ci && npm test`; TOOLHOST_BIN names the binary, else it is built
// from the repository. The elicitation tests need curl and the kernel's
// network confinement.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'toolhost-mcpnode-http-'));
const root = path.join(work, 'root');
fs.mkdirSync(root);
const config = path.join(work, 'config');
fs.mkdirSync(config, { mode: 0o700 });
const tokenFile = path.join(work, 'token');
const body = 'fetched over HTTP after a TypeScript elicitation';
const bounded = { timeout: 60_000 };
let bin = process.env.TOOLHOST_BIN;
let server;
let exited;
let endpoint;
let token;
let origin;
let target;
const clients = [];
// answers are the answers the next elicitations get, in order; asked
// the params of each elicitation.
const answers = [];
const asked = [];

before(async () => {
  if (!bin) {
    bin = path.join(work, 'toolhost');
    execFileSync('go', ['build', '-o', bin, '.'], { cwd: repo, stdio: 'inherit' });
  }
  origin = http.createServer((_, res) => res.end(body));
  await new Promise((resolve) => origin.listen(0, '127.0.0.1', resolve));
  target = `127.0.0.1:${origin.address().port}`;
  server = spawn(bin, ['mcp', '--root', root, '--log-level', 'warn', '--http', '127.0.0.1:0', '--http-token-file', tokenFile,
    '--network-allow', '127.0.0.1:1', '--network-allow-registries=false'],
  { env: { ...process.env, XDG_CONFIG_HOME: config }, stdio: ['ignore', 'inherit', 'pipe'] });
  exited = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));
  // The endpoint is named on stderr, stdout being the protocol's.
  endpoint = await new Promise((resolve, reject) => {
    const lines = readline.createInterface({ input: server.stderr });
    lines.on('line', (line) => {
      process.stderr.write(`server: ${line}\n`);
      const m = /^toolhost: serving MCP at (\S+)$/.exec(line);
      if (m) resolve(m[1]);
    });
    server.on('exit', () => reject(new Error('toolhost mcp --http exited before serving')));
  });
  token = fs.readFileSync(tokenFile, 'utf8').trim();
  assert.equal(fs.statSync(tokenFile).mode & 0o777, 0o600);
});

after(async () => {
  for (const c of clients) await c.close();
  server?.kill('SIGTERM');
  const { code } = await exited;
  assert.equal(code, 0, 'toolhost mcp --http exits 0 on SIGTERM');
  origin?.close();
  fs.rmSync(work, { recursive: true, force: true });
});

// connect connects a new client, over its own HTTP session, with the
// server's token unless told otherwise.
async function connect({ bearer = token, elicit = false } = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(endpoint), {
    requestInit: bearer ? { headers: { Authorization: `Bearer ${bearer}` } } : {},
  });
  const capabilities = elicit ? { elicitation: { form: {} } } : {};
  const client = new Client({ name: 'toolhost-mcpnode-http', version: '1.0.0' }, { capabilities });
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params);
      const a = answers.shift();
      assert.ok(a, 'an elicitation the test did not expect');
      return a;
    });
  }
  await client.connect(transport);
  clients.push(client);
  return { client, transport };
}

test('tools over HTTP: write_file, read_file, run_command', bounded, async () => {
  const { client, transport } = await connect();
  assert.ok(transport.sessionId, 'the server gave the session an id');
  const tools = await client.listTools();
  assert.equal(tools.tools.length, 12);
  const w = await client.callTool({ name: 'write_file', arguments: { path: 'h.txt', content: 'typed over http\n' } });
  assert.equal(w.isError, undefined);
  const r = await client.callTool({ name: 'read_file', arguments: { path: 'h.txt' } });
  assert.equal(r.content[0].text, 'typed over http\n');
  const res = await client.callTool({ name: 'run_command', arguments: { argv: ['cat', 'h.txt'] } });
  assert.equal(res.structuredContent.stdout, 'typed over http\n');
});

test('a task made on one HTTP session is fetched from another', bounded, async () => {
  const a = await connect();
  const created = await a.client.request({ method: 'tools/call', params: { name: 'run_command', arguments: { argv: ['echo', 'task over http'] }, task: { ttl: 60_000 } } },
    CreateTaskResultSchema);
  const id = created.task.taskId;
  assert.ok(id);
  const b = await connect();
  assert.notEqual(a.transport.sessionId, b.transport.sessionId);
  const res = await b.client.request({ method: 'tasks/result', params: { taskId: id } }, CallToolResultSchema);
  assert.equal(res.structuredContent.stdout, 'task over http\n');
});

test('no token: the client is refused with 401', bounded, async () => {
  await assert.rejects(connect({ bearer: '' }), /401|unauthorized/i);
  await assert.rejects(connect({ bearer: 'f'.repeat(64) }), /401|unauthorized/i);
});

const curl = () => ({ name: 'run_command', arguments: { argv: ['curl', '-sS', '--max-time', '60', '-w', '\\n%{http_code}', `http://${target}/`] } });

test('elicitation over HTTP: accepted lets the connection through, declined gets 403', bounded, async () => {
  const { client } = await connect({ elicit: true });
  answers.push({ action: 'accept', content: { decision: 'allow', scope: 'once' } });
  let res = await client.callTool(curl());
  assert.equal(asked.length, 1);
  assert.match(asked[0].message, new RegExp(target));
  assert.equal(res.structuredContent.stdout, `${body}\n200`);
  answers.push({ action: 'decline' });
  res = await client.callTool(curl());
  assert.equal(asked.length, 2);
  assert.match(res.structuredContent.stdout, /denied by the user[\s\S]*\n403$/);
});
