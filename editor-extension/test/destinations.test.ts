import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  destinationOf,
  destinationPicks,
  destinationsOf,
  describeDestination,
  groupByDestination,
  handleHead,
  isLocalPath,
  qualifiedPath,
} from '../src/destinations';
import { ToolsModel } from '../src/model';
import type { DestinationInfo, LongRunningResult, Progress } from '../src/protocol';
import { readServerArgs } from '../src/settings';

const build: DestinationInfo = { name: 'build', state: 'ready', command: ['ssh', '-T', 'build1', 'toolhost', '--root', '/srv/ws'], root: '/srv/ws', serverInfo: { name: 'toolhost', version: '0.1.0' } };
const pod: DestinationInfo = { name: 'pod', state: 'lost', command: ['kubectl', 'exec', '-i', 'p', '--', 'toolhost'], reason: 'exit status 255\nssh: connect to host build1 port 22: Connection refused' };

function started(handleId: string): LongRunningResult {
  return { handleId, commandId: handleId.replace('h-', 'cmd-'), pid: 1, processGroupId: 1, startedAt: '', command: 'x' };
}

test('a handle id names its destination: "NAME/h-3" and "NAME#2/h-3" are NAME\'s, "h-3" this machine\'s', () => {
  const ids = ['h-3', 'build/h-3', 'build#2/h-17', 'a.b-c_d/h-1', 'outer/inner/h-1'];
  assert.deepEqual(ids.map(destinationOf), ['', 'build', 'build', 'a.b-c_d', 'outer']);
  assert.deepEqual(ids.map(handleHead), ['', 'build', 'build#2', 'a.b-c_d', 'outer']);
});

test('a destination\'s file is read through the server by its qualified path; this machine\'s is opened', () => {
  // The result's artifacts come prefixed; progress's progressPath is the far path.
  assert.equal(qualifiedPath('build#2/h-1', 'build#2//tmp/a/cmd-1/output.log'), 'build#2//tmp/a/cmd-1/output.log');
  assert.equal(qualifiedPath('build#2/h-1', '/srv/ws/.toolhost/ci.json'), 'build#2//srv/ws/.toolhost/ci.json');
  assert.equal(qualifiedPath('h-1', '/ws/.toolhost/ci.json'), '/ws/.toolhost/ci.json');
  assert.ok(isLocalPath('h-1', '/ws/x'));
  assert.ok(!isLocalPath('build/h-1', 'build//srv/x'));
});

test('destinationsOf reads initialize\'s workspace.destinations and a destinations answer, leaving out what it cannot read', () => {
  const init = { capabilities: {}, workspace: { root: '/ws', readRoots: [], artifactsDir: '/a', destinations: [build, pod] } };
  assert.deepEqual(destinationsOf(init), [build, pod]);
  assert.deepEqual(destinationsOf([build, { name: 'x', state: 'weird', command: [] }, { name: 'y', state: 'idle' }, 3]), [build]);
  assert.deepEqual(destinationsOf({ workspace: { root: '/ws' } }), [], 'a server without destinations');
  assert.deepEqual(destinationsOf(undefined), []);
  // Optional fields of the wrong type are dropped, not trusted.
  assert.deepEqual(destinationsOf([{ name: 'z', state: 'idle', command: ['t'], root: 7, serverInfo: { name: 'toolhost' } }]), [{ name: 'z', state: 'idle', command: ['t'] }]);
});

test('the picker offers this machine, then each destination with its state, and nothing without destinations', () => {
  assert.deepEqual(destinationPicks('/ws', []), []);
  const picks = destinationPicks('/ws', [build, pod, { name: 'box', state: 'idle', command: ['docker', 'exec', '-i', 'c', 'toolhost'] }]);
  assert.deepEqual(
    picks.map((p) => [p.label, p.description, p.name]),
    [
      ['This machine', '/ws', ''],
      ['build', 'ready · /srv/ws', 'build'],
      ['pod', 'lost: ssh: connect to host build1 port 22: Connection refused', 'pod'],
      ['box', 'idle', 'box'],
    ],
  );
  assert.equal(picks[1].detail, 'ssh -T build1 toolhost --root /srv/ws');
  assert.equal(describeDestination({ name: 'n', state: 'lost', command: [] }), 'lost');
  assert.equal(describeDestination({ name: 'n', state: 'reconnecting', command: [], reason: 'resuming far session s-1, attempt 2 of 5; the transport dropped' }),
    'reconnecting: resuming far session s-1, attempt 2 of 5; the transport dropped');
});

test('destinationsOf reads a destination reconnecting to its far session, and the session\'s id', () => {
  const d = { name: 'build', state: 'reconnecting', command: ['ssh'], root: '/srv/ws', sessionId: 's-1', reason: 'attempt 1 of 5' };
  assert.deepEqual(destinationsOf([d]), [d]);
});

test('handles are grouped by destination: this machine first, then the server\'s order, then other names', () => {
  const tools = ['pod#2/h-1', 'h-2', 'build/h-1', 'h-1', 'gone/h-4', 'build#2/h-1'].map((handleId) => ({ handleId }));
  const groups = groupByDestination(tools, [build, pod, { name: 'idle', state: 'idle', command: ['t'] }]);
  assert.deepEqual(
    groups.map((g) => [g.name, g.destination?.state, g.tools.map((t) => t.handleId)]),
    [
      ['', undefined, ['h-2', 'h-1']],
      ['build', 'ready', ['build/h-1', 'build#2/h-1']],
      ['pod', 'lost', ['pod#2/h-1']],
      ['idle', 'idle', []],
      ['gone', undefined, ['gone/h-4']],
    ],
  );
});

test('the model groups only when the server has destinations or a handle is a destination\'s', () => {
  const m = new ToolsModel(() => 0);
  let changes = 0;
  m.onDidChange(() => changes++);
  m.started(started('h-1'), 'here');
  assert.equal(m.grouped(), false, 'a server without destinations: a flat list');
  m.setDestinations([build]);
  assert.equal(m.grouped(), true);
  const before = changes;
  m.setDestinations([{ ...build }]);
  assert.equal(changes, before, 'the same list again changes nothing');
  m.started(started('build/h-1'), 'there');
  assert.deepEqual(m.groups().map((g) => [g.name, g.tools.map((t) => t.label)]), [['', ['here']], ['build', ['there']]]);
  const m2 = new ToolsModel(() => 0);
  m2.started(started('old/h-1'), 'x');
  assert.equal(m2.grouped(), true, 'a prefixed id groups even when the server lists no destinations');
});

test('readServerArgs takes an array of words, and refuses the flags the extension sets', () => {
  assert.deepEqual(readServerArgs(undefined), []);
  assert.deepEqual(readServerArgs(['--destination', 'local=/bin/toolhost --root /far']), ['--destination', 'local=/bin/toolhost --root /far']);
  assert.throws(() => readServerArgs('--destination x=y'), /toolhost\.serverArgs must be an array/);
  assert.throws(() => readServerArgs(['--destination', 3]), /toolhost\.serverArgs\[1\] must be a non-empty string/);
  assert.throws(() => readServerArgs(['']), /serverArgs\[0\] must be a non-empty string/);
  for (const a of ['--root', '-root', '--root=/x', '--framing=ndjson', '-framing']) {
    assert.throws(() => readServerArgs([a]), /which the extension sets itself/, a);
  }
});

test('a progress snapshot of a destination\'s handle lands in its group with its progress file', () => {
  const m = new ToolsModel(() => 0);
  m.setDestinations([build]);
  const p: Progress = { handleId: 'build/h-1', commandId: 'build/cmd-1', label: 'ci', status: 'running', pid: 9, currentStep: 1, totalSteps: 2, stepName: 'a', elapsedMs: 5, updatedAt: '', outputBytes: 0, progressPath: '/srv/ws/.toolhost/ci.json' };
  m.progress(p);
  const [, g] = m.groups();
  assert.equal(g.tools[0].progressPath, '/srv/ws/.toolhost/ci.json');
  assert.equal(qualifiedPath(g.tools[0].handleId, g.tools[0].progressPath!), 'build//srv/ws/.toolhost/ci.json');
});
