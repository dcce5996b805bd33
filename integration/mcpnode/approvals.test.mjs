// Issue 35 with the official MCP TypeScript SDK's client: toolhost mcp
// puts a confined command's connection to a host:port its allow-list does
// not name to the client's user as a form elicitation (elicitation/create)
// on the tool call; accepted, curl gets the body; declined, a 403. Run with
// `npm ci && npm test`; TOOLHOST_BIN names the binary, else it is built
// from the repository. Needs curl and the kernel's network confinement.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'toolhost-mcpnode-approvals-'));
const root = path.join(work, 'root');
fs.mkdirSync(root);
const config = path.join(work, 'config');
fs.mkdirSync(config, { mode: 0o700 });
const body = 'fetched after a TypeScript elicitation';
let bin = process.env.TOOLHOST_BIN;
let client;
let origin;
let target;
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
  const transport = new StdioClientTransport({
    command: bin,
    args: ['mcp', '--root', root, '--log-level', 'warn', '--network-allow', '127.0.0.1:1', '--network-allow-registries=false'],
    env: { ...process.env, XDG_CONFIG_HOME: config },
    stderr: 'inherit',
  });
  client = new Client({ name: 'toolhost-mcpnode-approvals', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params);
    const a = answers.shift();
    assert.ok(a, 'an elicitation the test did not expect');
    return a;
  });
  await client.connect(transport);
});

after(async () => {
  await client?.close();
  origin?.close();
  fs.rmSync(work, { recursive: true, force: true });
});

const curl = () => ({ name: 'run_command', arguments: { argv: ['curl', '-sS', '--max-time', '60', '-w', '\\n%{http_code}', `http://${target}/`] } });

test('accepted: allow once lets the connection through', async () => {
  answers.push({ action: 'accept', content: { decision: 'allow', scope: 'once' } });
  const res = await client.callTool(curl());
  assert.equal(asked.length, 1);
  assert.equal(asked[0].mode ?? 'form', 'form');
  assert.match(asked[0].message, new RegExp(target));
  assert.deepEqual(asked[0].requestedSchema.properties.decision.enum, ['allow', 'deny']);
  assert.ok(asked[0].requestedSchema.properties.scope.enum.includes('once'));
  assert.equal(res.structuredContent.stdout, `${body}\n200`);
  assert.deepEqual(res.structuredContent.approvals, [{ kind: 'network', target, decision: 'allow', scope: 'once', decidedBy: 'user' }]);
  assert.match(res.content[0].text, /the user allowed the connection to/);
});

test('declined: the connection gets 403 denied by the user', async () => {
  answers.push({ action: 'decline' });
  const res = await client.callTool(curl());
  assert.equal(asked.length, 2);
  assert.match(res.structuredContent.stdout, /denied by the user[\s\S]*\n403$/);
  assert.deepEqual(res.structuredContent.approvals, [{ kind: 'network', target, decision: 'deny', decidedBy: 'user' }]);
  assert.match(res.content[0].text, /the user denied the connection to/);
});
