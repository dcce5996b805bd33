// MCP tasks (protocol 2025-11-25, issue 19) driven by the official
// TypeScript SDK's experimental tasks client against the toolhost binary:
// callToolStream, getTask, getTaskResult, listTasks and cancelTask, as the
// SDK itself drives them. Every message the server writes is also kept, in
// arrival order, so that the tests can check what the SDK does not show
// (ordering of notifications, the raw CreateTaskResult). Run with
// `npm ci && npm test`; TOOLHOST_BIN names the binary, else it is built
// from the repository.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  McpError,
  ResultSchema,
  TaskStatusNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'toolhost-mcpnode-tasks-'));
const root = path.join(work, 'root');
fs.mkdirSync(root);
let bin = process.env.TOOLHOST_BIN;
let client;
let transport;

const terminal = new Set(['completed', 'failed', 'cancelled']);
const relatedTask = 'io.modelcontextprotocol/related-task';
const immediate = 'io.modelcontextprotocol/model-immediate-response';
// Each test waits on events; this only bounds a test that would hang.
const bounded = { timeout: 30_000 };

// Log is a list that grows as messages arrive, with waiters on what is to
// come: when(pred) answers the first item, past or future, that pred holds.
class Log {
  constructor() {
    this.items = [];
    this.waiters = [];
  }

  push(item) {
    this.items.push(item);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(item)) return true;
      w.resolve(item);
      return false;
    });
  }

  when(pred) {
    const found = this.items.find(pred);
    if (found !== undefined) return Promise.resolve(found);
    return new Promise((resolve) => this.waiters.push({ pred, resolve }));
  }

  indexOf(item) {
    return this.items.indexOf(item);
  }
}

const wire = new Log(); // every message from the server, in arrival order
const sent = new Log(); // every message to the server
const statusNotes = new Log(); // notifications/tasks/status, as the SDK parsed them

before(async () => {
  if (!bin) {
    bin = path.join(work, 'toolhost');
    execFileSync('go', ['build', '-o', bin, '.'], { cwd: repo, stdio: 'inherit' });
  }
  transport = new StdioClientTransport({ command: bin, args: ['--root', root, '--log-level', 'warn'], stderr: 'inherit' });
  // The Protocol chains an onmessage set before connect, so this sees
  // every message first, in the order it was read.
  transport.onmessage = (msg) => wire.push(msg);
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    sent.push(msg);
    return send(msg, opts);
  };
  client = new Client({ name: 'toolhost-mcpnode-tasks', version: '1.0.0' });
  client.setNotificationHandler(TaskStatusNotificationSchema, (n) => statusNotes.push(n.params));
  await client.connect(transport);
});

after(async () => {
  await client?.close();
  fs.rmSync(work, { recursive: true, force: true });
});

// collect runs a callToolStream to its end and answers its messages.
async function collect(stream, onMessage = () => {}) {
  const messages = [];
  for await (const m of stream) {
    messages.push(m);
    onMessage(m);
  }
  return messages;
}

// statusNote answers the notifications/tasks/status of taskId, once it came.
function statusNote(taskId) {
  return statusNotes.when((p) => p.taskId === taskId);
}

// wireStatusNote answers the raw notifications/tasks/status of taskId.
function wireStatusNote(taskId) {
  return wire.when((m) => m.method === 'notifications/tasks/status' && m.params?.taskId === taskId);
}

// responseTo answers the raw response to the first request sent that pred
// holds for.
async function responseTo(pred) {
  const req = await sent.when((m) => m.method !== undefined && m.id !== undefined && pred(m));
  return wire.when((m) => m.id === req.id && m.method === undefined);
}

// roundTrip makes one request and waits for its answer: whatever the
// server wrote before answering it has been read by then.
async function roundTrip() {
  await client.ping();
}

// gateScript is a shell fragment that waits until the workspace file name
// exists: the test creates it once it has seen what it waits for.
function gateScript(name) {
  return `while [ ! -e ${name} ]; do sleep 0.02; done`;
}

function openGate(name) {
  fs.writeFileSync(path.join(root, name), '');
}

// fileAppears resolves once the workspace file name exists.
function fileAppears(name) {
  const file = path.join(root, name);
  return new Promise((resolve) => {
    const watcher = fs.watch(root, () => {
      if (fs.existsSync(file)) {
        watcher.close();
        resolve();
      }
    });
    if (fs.existsSync(file)) {
      watcher.close();
      resolve();
    }
  });
}

// procStat answers the state, parent pid and start time of a process, or
// undefined when /proc has no such pid.
// hostPids turns pids printed inside the PID namespace ns ("pid:[N]", as
// /proc/<pid>/ns/pid reads) into this machine's: each process of that
// namespace lists its pid in every namespace from this one down (NSpid).
function hostPids(ns, printed) {
  const outer = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let status;
    try {
      if (fs.readlinkSync(`/proc/${d}/ns/pid`) !== ns) continue;
      status = fs.readFileSync(`/proc/${d}/status`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const m = status.match(/^NSpid:\s+(.*)$/m);
    if (!m) continue;
    const f = m[1].trim().split(/\s+/).map(Number);
    outer.set(f[f.length - 1], f[0]);
  }
  return printed.map((p) => {
    assert.ok(outer.has(p), `pid ${p}, printed by the command, is no live process of its namespace ${ns}`);
    return outer.get(p);
  });
}

function procStat(pid) {
  let text;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (e) {
    if (e.code === 'ENOENT' || e.code === 'ESRCH') return undefined;
    throw e;
  }
  // The command name, in parentheses, may hold spaces: fields follow the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0], ppid: Number(fields[1]), start: fields[19] };
}

// expectMcpError checks that promise rejects with an McpError of code whose
// message matches message.
async function expectMcpError(promise, code, message) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof McpError, `an McpError: ${e}`);
    assert.equal(e.code, code, `code of ${e.message}`);
    if (message) assert.match(e.message, message);
    return true;
  });
}

// shown renders stream messages for a failure message, errors with their
// code and message (which JSON.stringify leaves out).
function shown(messages) {
  return JSON.stringify(messages.map((m) => (m.type === 'error' ? { type: 'error', code: m.error.code, message: m.error.message } : m)));
}

// checkTask checks the fields every Task has.
function checkTask(task, status) {
  assert.equal(task.status, status, JSON.stringify(task));
  assert.ok(!Number.isNaN(Date.parse(task.createdAt)), `createdAt ${task.createdAt}`);
  assert.ok(Date.parse(task.lastUpdatedAt) >= Date.parse(task.createdAt), JSON.stringify(task));
  assert.equal(typeof task.ttl, 'number');
  if (status === 'working') {
    assert.ok(task.pollInterval >= 250 && task.pollInterval <= 5000, `pollInterval ${task.pollInterval}`);
  } else {
    assert.equal(task.pollInterval, undefined, `no pollInterval once ${status}`);
  }
}

test('tasks are offered for start_command and run_command only, with the tasks capability', bounded, async () => {
  const init = await responseTo((m) => m.method === 'initialize');
  assert.equal(init.result.protocolVersion, '2025-11-25');
  assert.deepEqual(init.result.capabilities.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } });
  assert.ok(client.getServerCapabilities().tasks.requests.tools.call, 'the SDK sees task-augmented tools/call');
  const { tools } = await client.listTools();
  assert.equal(tools.length, 12);
  for (const t of tools) {
    if (t.name === 'start_command' || t.name === 'run_command') {
      assert.deepEqual(t.execution, { taskSupport: 'optional' }, t.name);
    } else {
      assert.equal(t.execution, undefined, t.name);
    }
  }
});

test('start_command as a task: created working, polled to completed, then its result', bounded, async () => {
  // After tools/list, the SDK makes start_command a task by itself.
  await client.listTools();
  const gate = 'gate-stream';
  let seenWorking = 0;
  const messages = await collect(
    client.experimental.tasks.callToolStream({ name: 'start_command', arguments: { argv: ['sh', '-c', `echo hi; ${gateScript(gate)}; echo done`] } }),
    (m) => {
      // The command ends only once the test has seen it working.
      if (m.type === 'taskStatus' && m.task.status === 'working') {
        seenWorking++;
        openGate(gate);
      }
    },
  );
  const req = await sent.when((m) => m.method === 'tools/call' && m.params.arguments?.argv?.[2]?.includes(gate));
  assert.deepEqual(req.params.task, {}, 'the SDK asked for a task');

  const types = messages.map((m) => m.type).filter((t, i, a) => t !== a[i - 1]);
  assert.deepEqual(types.slice(0, 2), ['taskCreated', 'taskStatus'], shown(messages));
  const created = messages[0].task;
  assert.match(created.taskId, /^h-\d+$/);
  checkTask(created, 'working');
  assert.equal(created.ttl, 3_600_000, 'the default ttl');
  const statuses = messages.filter((m) => m.type === 'taskStatus').map((m) => m.task.status);
  assert.ok(seenWorking >= 1, `working was seen: ${statuses}`);
  assert.deepEqual(statuses, [...statuses.slice(0, -1).map(() => 'working'), 'completed']);
  for (const m of messages.filter((m) => m.type === 'taskStatus')) assert.equal(m.task.taskId, created.taskId);

  const raw = await responseTo((m) => m.id === req.id);
  assert.equal(typeof raw.result._meta?.[immediate], 'string', `model-immediate-response in ${JSON.stringify(raw.result)}`);
  assert.ok(raw.result._meta[immediate].length > 0);

  // Exactly one status notification, the terminal one, after the CreateTaskResult.
  const note = await statusNote(created.taskId);
  checkTask(note, 'completed');
  assert.ok(wire.indexOf(await wireStatusNote(created.taskId)) > wire.indexOf(raw), 'the status notification follows the CreateTaskResult');
  await roundTrip();
  assert.equal(statusNotes.items.filter((p) => p.taskId === created.taskId).length, 1);

  // The result as tasks/result gives it...
  const result = await client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
  assert.equal(result.isError, undefined);
  assert.equal(result.structuredContent.status, 'completed');
  assert.equal(result.structuredContent.exitCode, 0);
  assert.equal(result.structuredContent.handleId, created.taskId);
  assert.equal(result.structuredContent.stdout, 'hi\ndone\n');
  assert.ok(result.content.some((c) => c.type === 'resource_link' && c.uri.endsWith('/output')), 'a resource_link to the output');
  assert.deepEqual(result._meta?.[relatedTask], { taskId: created.taskId });
  // ...is what the stream ended with: the SDK found it valid for the
  // tool's outputSchema.
  assert.equal(messages.at(-1).type, 'result', shown(messages.slice(-1)));
  assert.deepEqual(messages.at(-1).result, result);
});

test('getTask and listTasks show a running task working, then completed; list_commands has its handle', bounded, async () => {
  const gate = 'gate-get';
  const created = await client.request(
    { method: 'tools/call', params: { name: 'start_command', arguments: { argv: ['sh', '-c', gateScript(gate)], label: 'gated' }, task: {} } },
    CreateTaskResultSchema,
  );
  const id = created.task.taskId;
  assert.match(id, /^h-\d+$/);

  const got = await client.experimental.tasks.getTask(id);
  checkTask(got, 'working');
  assert.equal(got.taskId, id);

  const { tasks } = await client.experimental.tasks.listTasks();
  const listed = tasks.find((t) => t.taskId === id);
  assert.ok(listed, `${id} in ${JSON.stringify(tasks)}`);
  checkTask(listed, 'working');
  for (let i = 1; i < tasks.length; i++) {
    assert.ok(Date.parse(tasks[i - 1].createdAt) <= Date.parse(tasks[i].createdAt), `oldest first: ${JSON.stringify(tasks)}`);
  }

  const commands = await client.callTool({ name: 'list_commands', arguments: {} });
  const handle = commands.structuredContent.handles.find((h) => h.handleId === id);
  assert.ok(handle, `${id} in ${JSON.stringify(commands.structuredContent)}`);
  assert.equal(handle.status, 'running');
  assert.equal(handle.label, 'gated');

  openGate(gate);
  await statusNote(id);
  const done = await client.experimental.tasks.getTask(id);
  checkTask(done, 'completed');
  assert.equal(done.createdAt, got.createdAt);
  const after = await client.experimental.tasks.listTasks();
  checkTask(after.tasks.find((t) => t.taskId === id), 'completed');
});

test('tasks/result waits for the end, answers every concurrent caller, and its cancel leaves the command running', bounded, async () => {
  const gate = 'gate-result';
  const created = await client.request(
    { method: 'tools/call', params: { name: 'start_command', arguments: { argv: ['sh', '-c', `${gateScript(gate)}; echo through`] }, task: {} } },
    CreateTaskResultSchema,
  );
  const id = created.task.taskId;

  // A tasks/result cancelled by the client ends its wait, not the command.
  const abort = new AbortController();
  const abandoned = client.experimental.tasks.getTaskResult(id, CallToolResultSchema, { signal: abort.signal });
  const first = await sent.when((m) => m.method === 'tasks/result' && m.params.taskId === id);
  abort.abort('no longer wanted');
  await assert.rejects(abandoned);
  await sent.when((m) => m.method === 'notifications/cancelled' && m.params.requestId === first.id);
  checkTask(await client.experimental.tasks.getTask(id), 'working');

  const waits = [1, 2, 3].map(() => client.experimental.tasks.getTaskResult(id, CallToolResultSchema));
  let answered = 0;
  for (const w of waits) w.then(() => answered++);
  // Every tasks/result is on the wire; none is answered while the command
  // runs. (The result below says completed: the abandoned wait did not
  // stop the command.)
  const resultRequests = () => sent.items.filter((m) => m.method === 'tasks/result' && m.params.taskId === id).length;
  await sent.when(() => resultRequests() === 4);
  await roundTrip();
  assert.equal(answered, 0, 'tasks/result answered before the command ended');

  openGate(gate);
  const results = await Promise.all(waits);
  for (const r of results) {
    assert.equal(r.structuredContent.status, 'completed');
    assert.equal(r.structuredContent.stdout, 'through\n');
    assert.deepEqual(r._meta?.[relatedTask], { taskId: id });
  }
});

test('cancelTask mid-command kills the whole tree and the task ends cancelled', bounded, async () => {
  // The pids the command prints are its PID namespace's (a confined
  // command has one of its own): it says which namespace, and hostPids
  // turns them into this machine's.
  const script = 'readlink /proc/self/ns/pid > ns; echo $$ > pids.tmp; sleep 300 & echo $! >> pids.tmp; sleep 300 & echo $! >> pids.tmp; mv pids.tmp pids; wait';
  const created = await client.request(
    { method: 'tools/call', params: { name: 'start_command', arguments: { argv: ['sh', '-c', script] }, task: {} } },
    CreateTaskResultSchema,
  );
  const id = created.task.taskId;
  await fileAppears('pids');
  const printed = fs.readFileSync(path.join(root, 'pids'), 'utf8').trim().split('\n').map(Number);
  const pids = hostPids(fs.readFileSync(path.join(root, 'ns'), 'utf8').trim(), printed);
  assert.equal(pids.length, 3, `pids: ${pids}`);
  const running = new Map();
  for (const pid of pids) {
    const st = procStat(pid);
    assert.ok(st && st.state !== 'Z', `process ${pid} runs before the cancel: ${JSON.stringify(st)}`);
    running.set(pid, st);
  }

  const cancelled = await client.experimental.tasks.cancelTask(id);
  assert.equal(cancelled.taskId, id);
  checkTask(cancelled, 'cancelled');
  // The answer comes once every process is gone: gone from /proc, or the
  // pid reused by another process, or at most a zombie that some other
  // reaper than the server owes.
  for (const pid of pids) {
    const st = procStat(pid);
    const same = st && st.start === running.get(pid).start;
    assert.ok(!same || (st.state === 'Z' && st.ppid !== transport.pid), `process ${pid} still there after tasks/cancel: ${JSON.stringify(st)}`);
  }

  checkTask(await client.experimental.tasks.getTask(id), 'cancelled');
  const result = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
  assert.equal(result.structuredContent.status, 'cancelled');
  assert.equal(result.structuredContent.handleId, id);
  assert.deepEqual(result._meta?.[relatedTask], { taskId: id });
  checkTask(await statusNote(id), 'cancelled');
  await roundTrip();
  assert.equal(statusNotes.items.filter((p) => p.taskId === id).length, 1, 'one status notification');
});

test('cancelling a task already cancelled names the status it ended in', bounded, async () => {
  const created = await client.request(
    { method: 'tools/call', params: { name: 'start_command', arguments: { argv: ['sleep', '300'] }, task: {} } },
    CreateTaskResultSchema,
  );
  const id = created.task.taskId;
  checkTask(await client.experimental.tasks.cancelTask(id), 'cancelled');
  checkTask(await statusNote(id), 'cancelled');
  await assert.rejects(client.experimental.tasks.cancelTask(id), (e) => {
    assert.ok(e instanceof McpError, String(e));
    assert.equal(e.code, -32602);
    assert.match(e.message, new RegExp(`cannot cancel task ${id}: already in terminal status 'cancelled'`));
    assert.deepEqual(e.data, { taskId: id, status: 'cancelled' });
    return true;
  });
  checkTask(await client.experimental.tasks.getTask(id), 'cancelled');
});

test('cancelling a task that completed names the status it ended in', bounded, async () => {
  const messages = await collect(
    client.experimental.tasks.callToolStream({ name: 'run_command', arguments: { argv: ['true'] } }, undefined, { task: {} }),
  );
  const id = messages[0].task.taskId;
  assert.equal(messages.at(-1).type, 'result');
  await assert.rejects(client.experimental.tasks.cancelTask(id), (e) => {
    assert.equal(e.code, -32602);
    assert.match(e.message, new RegExp(`cannot cancel task ${id}: already in terminal status 'completed'`));
    assert.deepEqual(e.data, { taskId: id, status: 'completed' });
    return true;
  });
  checkTask(await client.experimental.tasks.getTask(id), 'completed');
});

test('run_command with yieldMs as a task runs to its end, with the ttl asked for', bounded, async () => {
  const messages = await collect(
    client.experimental.tasks.callToolStream(
      { name: 'run_command', arguments: { argv: ['sh', '-c', 'sleep 0.5; echo slept'], yieldMs: 100 } },
      undefined,
      { task: { ttl: 60_000 } },
    ),
  );
  assert.equal(messages[0].type, 'taskCreated', shown(messages));
  const created = messages[0].task;
  assert.match(created.taskId, /^h-\d+$/);
  checkTask(created, 'working');
  assert.equal(created.ttl, 60_000);
  const last = messages.at(-1);
  assert.equal(last.type, 'result', shown([last]));
  // yieldMs is ignored: the task's result is the command's end, not a handle.
  assert.equal(last.result.structuredContent.status, 'completed');
  assert.equal(last.result.structuredContent.exitCode, 0);
  assert.equal(last.result.structuredContent.stdout, 'slept\n');
  const note = await statusNote(created.taskId);
  checkTask(note, 'completed');
  assert.equal(note.ttl, 60_000);
});

test('a task outlives its ttl while its command runs, and is deleted once it ends', bounded, async () => {
  const gate = 'gate-ttl';
  const created = await client.request(
    { method: 'tools/call', params: { name: 'start_command', arguments: { argv: ['sh', '-c', gateScript(gate)] }, task: { ttl: 1 } } },
    CreateTaskResultSchema,
  );
  const id = created.task.taskId;
  assert.equal(created.task.ttl, 1);
  // Past its ttl (a command run to its end takes longer than 1 ms), it is
  // still there while its command runs.
  await client.callTool({ name: 'run_command', arguments: { argv: ['true'] } });
  assert.ok(Date.now() - Date.parse(created.task.createdAt) > 1, 'the ttl has passed');
  checkTask(await client.experimental.tasks.getTask(id), 'working');
  assert.ok((await client.experimental.tasks.listTasks()).tasks.some((t) => t.taskId === id));

  openGate(gate);
  checkTask(await statusNote(id), 'completed');
  // It is deleted after its terminal notification: no event says when, so
  // this asks again, a bounded number of times, without sleeping.
  let err;
  for (let i = 0; i < 200 && !err; i++) {
    await client.experimental.tasks.getTask(id).catch((e) => {
      err = e;
    });
  }
  assert.ok(err, `${id} still there after its ttl and its end`);
  assert.equal(err.code, -32602);
  assert.match(err.message, /expired/);
  await expectMcpError(client.experimental.tasks.getTaskResult(id, CallToolResultSchema), -32602, /expired/);
});

test('tasks/get of an unknown task is -32602', bounded, async () => {
  await expectMcpError(client.experimental.tasks.getTask('nope'), -32602);
  await expectMcpError(client.experimental.tasks.getTaskResult('nope', CallToolResultSchema), -32602);
  await expectMcpError(client.experimental.tasks.cancelTask('nope'), -32602);
});

test('a task on a tool without task support is -32601 naming the tool', bounded, async () => {
  fs.writeFileSync(path.join(root, 'plain.txt'), 'plain\n');
  await expectMcpError(
    client.request({ method: 'tools/call', params: { name: 'read_file', arguments: { path: 'plain.txt' }, task: {} } }, CallToolResultSchema),
    -32601,
    /read_file/,
  );
  const messages = await collect(
    client.experimental.tasks.callToolStream({ name: 'list_commands', arguments: {} }, undefined, { task: {} }),
  );
  assert.equal(messages.length, 1);
  assert.equal(messages[0].type, 'error');
  assert.equal(messages[0].error.code, -32601);
  assert.match(messages[0].error.message, /list_commands/);
});

test('a task param that is not an object, or a ttl that is not a non-negative integer, is -32602', bounded, async () => {
  for (const task of ['soon', { ttl: -1 }, { ttl: 1.5 }, { ttl: '60000' }]) {
    await expectMcpError(
      client.request({ method: 'tools/call', params: { name: 'start_command', arguments: { argv: ['true'] }, task } }, CreateTaskResultSchema),
      -32602,
    );
  }
});

test('a run_command task that times out fails, and its result still says timedOut', bounded, async () => {
  const messages = await collect(
    client.experimental.tasks.callToolStream({ name: 'run_command', arguments: { argv: ['sleep', '5'], timeoutMs: 200 } }, undefined, { task: {} }),
  );
  const id = messages[0].task.taskId;
  assert.match(id, /^h-\d+$/);
  const last = messages.at(-1);
  assert.equal(last.type, 'error', shown([last]));
  const final = messages.filter((m) => m.type === 'taskStatus').at(-1).task;
  checkTask(final, 'failed');
  const got = await client.experimental.tasks.getTask(id);
  checkTask(got, 'failed');
  const result = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
  assert.equal(result.structuredContent.status, 'timedOut');
  assert.equal(result.structuredContent.timeoutReason, 'deadline');
  assert.deepEqual(result._meta?.[relatedTask], { taskId: id });
  const note = await statusNote(id);
  checkTask(note, 'failed');
  for (const t of [final, got, note]) assert.match(t.statusMessage, /timed out/);
});

test('a task whose command cannot start is a t- task that fails with the tool error', bounded, async () => {
  const messages = await collect(
    client.experimental.tasks.callToolStream({ name: 'start_command', arguments: { argv: ['/no/such/program'] } }, undefined, { task: {} }),
  );
  assert.equal(messages[0].type, 'taskCreated', shown(messages));
  const id = messages[0].task.taskId;
  assert.match(id, /^t-\d+$/);
  assert.equal(messages.at(-1).type, 'error');
  checkTask(await client.experimental.tasks.getTask(id), 'failed');
  const result = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
  assert.equal(result.isError, true);
  assert.match(result.content[0].text, /\/no\/such\/program/);
  assert.deepEqual(result._meta?.[relatedTask], { taskId: id });
  checkTask(await statusNote(id), 'failed');
  const commands = await client.callTool({ name: 'list_commands', arguments: {} });
  assert.equal(commands.structuredContent.handles.find((h) => h.handleId === id), undefined, 'a t- task has no handle');
});

test('tasks/update is not a 2025-11-25 method', bounded, async () => {
  await expectMcpError(client.request({ method: 'tasks/update', params: { taskId: 'h-1', inputResponses: {} } }, ResultSchema), -32601);
});

test('a progress token on a task recipe gets its steps until the terminal status, none after', bounded, async () => {
  const gate = 'gate-progress';
  const seen = [];
  const steps = [{ name: 'one', argv: ['sh', '-c', gateScript(gate)] }, { name: 'two', argv: ['true'] }];
  // The SDK keeps onprogress for a request answered with a CreateTaskResult.
  const created = await client.request(
    { method: 'tools/call', params: { name: 'start_command', arguments: { steps } } },
    CreateTaskResultSchema,
    {
      task: {},
      onprogress: (p) => {
        // The first step ends only once its progress was seen.
        seen.push(p);
        openGate(gate);
      },
    },
  );
  const id = created.task.taskId;
  const note = await wireStatusNote(id);
  assert.equal(note.params.status, 'completed');
  const result = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
  assert.equal(result.structuredContent.status, 'completed');
  assert.equal(result.structuredContent.exitCode, 0);
  await roundTrip();

  // The client may lose progress read in the same chunk as an answer
  // (typescript-sdk#2580), so the SDK's handler must have had at least one;
  // the wire must have had every step, all before the terminal status.
  assert.ok(seen.length >= 1, 'progress reached onprogress');
  const req = await sent.when((m) => m.method === 'tools/call' && m.params.arguments?.steps?.[0]?.argv?.[2]?.includes(gate));
  assert.deepEqual(req.params.task, {});
  const token = req.params._meta.progressToken;
  const progress = wire.items.filter((m) => m.method === 'notifications/progress' && m.params.progressToken === token);
  const stepMessages = progress.map((m) => m.params.message).filter((msg) => !/alive after/.test(msg));
  assert.deepEqual(stepMessages, ['step 1/2: one', 'step 1/2: one (done)', 'step 2/2: two', 'step 2/2: two (done)']);
  for (const m of progress) assert.ok(wire.indexOf(m) < wire.indexOf(note), `progress after the terminal status: ${JSON.stringify(m)}`);
  // What reached onprogress came from the wire, in its order.
  let at = 0;
  for (const p of seen) {
    while (at < progress.length && progress[at].params.message !== p.message) at++;
    assert.ok(at < progress.length, `${p.message} in order in ${JSON.stringify(progress.map((m) => m.params.message))}`);
    at++;
  }
  let last = -1;
  for (const m of progress) {
    assert.ok(m.params.progress > last, `progress grows: ${JSON.stringify(progress)}`);
    last = m.params.progress;
  }
});

test('every task of the session got exactly one status notification, its terminal one, after its creation', bounded, async () => {
  const tasks = [];
  let cursor;
  do {
    const page = await client.experimental.tasks.listTasks(cursor);
    tasks.push(...page.tasks);
    cursor = page.nextCursor;
  } while (cursor);
  assert.ok(tasks.length >= 8, `the tasks of this file: ${tasks.map((t) => t.taskId)}`);
  for (const t of tasks) {
    const note = await wireStatusNote(t.taskId);
    assert.ok(terminal.has(note.params.status), JSON.stringify(note));
    assert.equal(note.params.status, t.status, t.taskId);
    const created = wire.items.find((m) => m.result?.task?.taskId === t.taskId);
    assert.ok(created, `the CreateTaskResult of ${t.taskId}`);
    assert.ok(wire.indexOf(created) < wire.indexOf(note), `${t.taskId}: status before its CreateTaskResult`);
  }
  await roundTrip();
  for (const t of tasks) {
    assert.equal(wire.items.filter((m) => m.method === 'notifications/tasks/status' && m.params.taskId === t.taskId).length, 1, t.taskId);
  }
});

// Last, because a server that breaks on it ends the session.
test('tasks requests without params: an error for those that need a taskId, and the session goes on', bounded, async () => {
  for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
    await expectMcpError(client.request({ method }, ResultSchema), -32602);
  }
  await roundTrip();
});
