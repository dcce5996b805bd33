// Snapshots in the extension (issue 27): the reverse patch that rebuilds a
// file as a snapshot holds it, the "Changes (n)" rows, the undo flow and
// its errors; then all of it against the real binary.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { ResponseError } from 'vscode-jsonrpc/node';
import { snapshotsOf } from '../src/answers';
import { contextValue, ToolsModel } from '../src/model';
import {
  CodeSnapshotBusy,
  CodeSnapshotNotFound,
  DiffRequest,
  InitializedNotification,
  type InitializeResult,
  LongRunningRequest,
  MethodInitialize,
  RestoreRequest,
  RunCommandRequest,
  type ToolResult,
  ToolResultNotification,
  type DiffResult,
  type RestoreParams,
  CancelRequest,
  DestinationsRequest,
  ReadFileRequest,
} from '../src/protocol';
import { destinationsOf, qualifiedPath } from '../src/destinations';
import { parsePatch, PatchMismatch, reversePatch } from '../src/reversePatch';
import {
  beforeText,
  changeRow,
  changesLabel,
  directories,
  hasSnapshot,
  parseSnapshotRef,
  snapshotQuery,
  type SnapshotResult,
  undoCommand,
  type UndoDeps,
  undoQuestion,
} from '../src/snapshots';
import { changeChildren, toolChildren } from '../src/treeNodes';
import { serverBinary, type Session, startServer } from './client';

describe('reversePatch', () => {
  test('lines changed, removed and added in one hunk', () => {
    const before = 'one\ntwo\nthree\nfour\nfive\n';
    const after = 'one\n2\nthree\nfive\nsix\n';
    const patch = '--- a/f\n+++ b/f\n@@ -1,5 +1,5 @@\n one\n-two\n+2\n three\n-four\n five\n+six\n';
    assert.equal(reversePatch(after, patch), before);
  });

  test('two hunks, with the unchanged lines between them taken from the text now', () => {
    const old = Array.from({ length: 30 }, (_, i) => `line ${i + 1}\n`);
    const now = [...old];
    now[1] = 'LINE 2\n';
    now.splice(25, 1); // line 26 removed
    const patch = [
      '--- a/f',
      '+++ b/f',
      '@@ -1,5 +1,5 @@',
      ' line 1',
      '-line 2',
      '+LINE 2',
      ' line 3',
      ' line 4',
      ' line 5',
      '@@ -23,7 +23,6 @@',
      ' line 23',
      ' line 24',
      ' line 25',
      '-line 26',
      ' line 27',
      ' line 28',
      ' line 29',
      '',
    ].join('\n');
    assert.equal(parsePatch(patch).length, 2);
    assert.equal(reversePatch(now.join(''), patch), old.join(''));
  });

  test('a last line without a newline, before, after, or both', () => {
    // The newline added at the end.
    assert.equal(reversePatch('a\nb\n', '--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n'), 'a\nb');
    // The newline taken away, and a line added.
    assert.equal(reversePatch('a\nb\nc', '--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n a\n-b\n+b\n+c\n\\ No newline at end of file\n'), 'a\nb\n');
    // Neither side ends with one; the last line changed.
    assert.equal(reversePatch('x\nY', '--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+Y\n\\ No newline at end of file\n'), 'x\ny');
  });

  test('a deleted file: every line is "-", applied to an empty text', () => {
    const patch = '--- a/b.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-bee\n-no newline\n\\ No newline at end of file\n';
    assert.equal(reversePatch('', patch), 'bee\nno newline');
  });

  test('an added file: every line is "+", and nothing was there before', () => {
    assert.equal(reversePatch('new\n', '--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+new\n'), '');
  });

  test('lines inserted at the top (a hunk whose old side is empty) and removed lines that look like headers', () => {
    assert.equal(reversePatch('top\nkeep\n', '--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+top\n'), 'keep\n');
    assert.equal(reversePatch('x\n', '--- a/f\n+++ b/f\n@@ -1,3 +1 @@\n--- a\n-+++ b\n x\n'), '-- a\n+++ b\nx\n');
  });

  test('CRLF lines keep their carriage returns; an empty patch changes nothing', () => {
    assert.equal(reversePatch('a\r\nB\r\n', '--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\r\n-b\r\n+B\r\n'), 'a\r\nb\r\n');
    assert.equal(reversePatch('same\n', ''), 'same\n');
  });

  test('a text that is not the patch\'s "after" is refused, not half rebuilt', () => {
    const patch = '--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n';
    assert.throws(() => reversePatch('a\nd\n', patch), PatchMismatch);
    assert.throws(() => reversePatch('z\nc\n', patch), PatchMismatch);
    assert.throws(() => reversePatch('', patch), PatchMismatch);
    assert.throws(() => parsePatch('@@ -1,2 +1,2 @@\n a\n'), /ends early/);
    assert.throws(() => parsePatch('@@ nonsense\n'), /hunk header/);
  });
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

describe('the Tools view\'s rows of a command run with a snapshot', () => {
  const changes = [
    { path: 'a.txt', kind: 'modified' as const, size: 16 },
    { path: 'b.txt', kind: 'deleted' as const, size: 14 },
    { path: 'd', kind: 'added' as const, size: 0 },
    { path: 'd/e', kind: 'added' as const, size: 0 },
    { path: 'd/e/f', kind: 'added' as const, size: 2 },
    { path: 'run.sh', kind: 'mode' as const, size: 10 },
  ];

  test('"Changes (n)" comes once the result names a snapshot, before the steps; its children are the changed paths', () => {
    const m = new ToolsModel(() => 0);
    m.started({ handleId: 'h1', commandId: 'c1', pid: 1, processGroupId: 1, startedAt: '', command: 'gen' }, 'gen');
    let t = m.get('h1')!;
    assert.deepEqual(toolChildren(t).map((n) => n.kind), [], 'nothing while it runs');
    m.toolResult(result({ snapshotId: 's1', changes, steps: [{ name: 'one', status: 'done', durationMs: 1, exitCode: 0 }] }));
    t = m.get('h1')!;
    assert.deepEqual(toolChildren(t).map((n) => n.kind), ['changes', 'step']);
    const kids = changeChildren(t);
    assert.deepEqual(kids.map((n) => (n.kind === 'change' ? n.change.path : '')), changes.map((c) => c.path));
    assert.equal(changesLabel(t.result!), 'Changes (6)');
    assert.equal(contextValue(t), 'toolhost.done.snapshot', 'Undo this command on the row');
    // Without a snapshot: no row, no Undo.
    m.toolResult(result({ handleId: 'h2', commandId: 'c2' }));
    assert.deepEqual(toolChildren(m.get('h2')!).map((n) => n.kind), []);
    assert.equal(contextValue(m.get('h2')!), 'toolhost.done');
    assert.equal(hasSnapshot(m.get('h2')!.result), false);
  });

  test('a list the server cut says "+"; nothing changed is "Changes (0)"', () => {
    assert.equal(changesLabel({ changes: changes.slice(0, 2), changesTruncated: true }), 'Changes (2+)');
    assert.equal(changesLabel({ changes: [] }), 'Changes (0)');
    const m = new ToolsModel(() => 0);
    m.toolResult(result({ snapshotId: 's1', changes: [] }));
    assert.deepEqual(toolChildren(m.get('h1')!).map((n) => n.kind), ['changes']);
    assert.deepEqual(changeChildren(m.get('h1')!), []);
  });

  test('each changed path shows its name, its kind and its directory', () => {
    const dirs = directories(changes);
    assert.deepEqual([...dirs].sort(), ['d', 'd/e']);
    const rows = changes.map((c) => changeRow(c, dirs));
    assert.deepEqual(
      rows.map((r) => [r.label, r.description, r.icon, r.directory]),
      [
        ['a.txt', 'modified', 'diff-modified', false],
        ['b.txt', 'deleted', 'diff-removed', false],
        ['d/', 'added', 'folder', true],
        ['e/', 'added · d', 'folder', true],
        ['f', 'added · d/e', 'diff-added', false],
        ['run.sh', 'mode changed', 'diff-renamed', false],
      ],
    );
    assert.match(rows[1].tooltip, /b\.txt: deleted, 14 bytes before/);
  });

  test('a snapshot document\'s URI carries the snapshot, the path and the session', () => {
    const ref = { snapshotId: 'build/20261126-004650-f318f606cc85', path: 'src/a b.txt', session: 's-1', side: 'before' as const };
    assert.deepEqual(parseSnapshotRef(`/${ref.path}`, snapshotQuery(ref)), ref);
    assert.equal(parseSnapshotRef('/x', 'side=before'), undefined);
  });
});

describe('beforeText', () => {
  const diff = (changes: DiffResult['changes'], patch?: string) => ({ changes, ...(patch !== undefined && { patch }) });
  test('the file as the snapshot holds it, from the patch, or why not', () => {
    assert.deepEqual(beforeText('a', diff([{ path: 'a', kind: 'modified', size: 2 }], '--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\n'), 'y\n'), { text: 'x\n' });
    assert.deepEqual(beforeText('a', diff([{ path: 'a', kind: 'deleted', size: 2 }], '--- a/a\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n'), undefined), { text: 'x\n' });
    assert.deepEqual(beforeText('a', diff([{ path: 'a', kind: 'added', size: 2 }], '--- /dev/null\n+++ b/a\n@@ -0,0 +1 @@\n+y\n'), 'y\n'), { text: '' });
    assert.deepEqual(beforeText('a', diff([]), 'same\n'), { text: 'same\n' }, 'unchanged since: the file now');
    assert.deepEqual(beforeText('a', diff([{ path: 'a', kind: 'mode', size: 5 }]), 'same\n'), { text: 'same\n' });
    assert.deepEqual(beforeText('a', diff([{ path: 'a', kind: 'deleted', size: 0 }]), undefined), { text: '' }, 'an empty file deleted');
    assert.match((beforeText('bin', diff([{ path: 'bin', kind: 'modified', size: 3 }]), '\0\0') as { none: string }).none, /binary/);
    assert.match((beforeText('d', diff([{ path: 'd', kind: 'added', size: 0 }, { path: 'd/f', kind: 'added', size: 1 }]), undefined) as { none: string }).none, /directory/);
    assert.match((beforeText('a', diff([{ path: 'a', kind: 'modified', size: 2 }], '--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\n'), 'z\n') as { none: string }).none, /changed while it was read/);
  });
});

/** A JSON-RPC error as vscode-jsonrpc raises it. */
function rpcError(code: number, reason: string): ResponseError<{ reason: string }> {
  return new ResponseError(code, `error ${code}`, { reason });
}

describe('undoCommand', () => {
  const r: SnapshotResult = { ...result({ changes: [{ path: 'a.txt', kind: 'modified', size: 2 }] }), snapshotId: 's1' };
  const pendingNow: DiffResult = {
    changes: [
      { path: 'a.txt', kind: 'modified', size: 2 },
      { path: 'new', kind: 'added', size: 0 },
      { path: 'new/f', kind: 'added', size: 1 },
      { path: 'gone.txt', kind: 'deleted', size: 3 },
    ],
    truncated: false,
  };

  /** Deps that record what was asked; restore answers each of `restores` in turn (an Error is thrown). */
  function deps(over: { confirm?: boolean; force?: boolean; restores?: (Error | undefined)[]; pending?: DiffResult | Error }) {
    const calls: string[] = [];
    const restoreParams: RestoreParams[] = [];
    const infos: string[] = [];
    const questions: string[] = [];
    const restores = [...(over.restores ?? [undefined])];
    const d: UndoDeps = {
      pending: async (id) => {
        calls.push(`pending ${id}`);
        if (over.pending instanceof Error) throw over.pending;
        return over.pending ?? pendingNow;
      },
      confirm: async (q) => {
        calls.push('confirm');
        questions.push(`${q.message}\n${q.detail}`);
        return over.confirm ?? true;
      },
      restore: async (p) => {
        calls.push(`restore${p.force ? ' force' : ''}`);
        restoreParams.push(p);
        const e = restores.shift();
        if (e) throw e;
        return { written: 2, removed: 1, ms: 7 };
      },
      confirmForce: async (q) => {
        calls.push('confirmForce');
        questions.push(`${q.message}\n${q.detail}`);
        return over.force ?? true;
      },
      info: (m) => infos.push(m),
      log: () => undefined,
    };
    return { d, calls, restoreParams, infos, questions };
  }

  test('asks first, naming how many files (directories are not counted), then restores and says what it wrote and removed', async () => {
    const x = deps({});
    const out = await undoCommand('gen', r, x.d);
    assert.deepEqual(x.calls, ['pending s1', 'confirm', 'restore']);
    assert.deepEqual(x.restoreParams, [{ snapshotId: 's1' }]);
    assert.match(x.questions[0], /^Undo "gen"\? 3 files go back to how they were before it ran\./);
    assert.match(x.questions[0], /a\.txt \(modified\), new\/f \(added\), gone\.txt \(deleted\)/);
    assert.deepEqual(out, { restored: { written: 2, removed: 1, ms: 7 }, forced: false });
    assert.deepEqual(x.infos, ['Toolhost: undid "gen": 2 files written back, 1 removed (7 ms).']);
  });

  test('a "no" to the confirmation restores nothing', async () => {
    const x = deps({ confirm: false });
    assert.deepEqual(await undoCommand('gen', r, x.d), { declined: 'confirm' });
    assert.deepEqual(x.calls, ['pending s1', 'confirm']);
  });

  test('nothing to undo: told so, nothing asked', async () => {
    const x = deps({ pending: { changes: [], truncated: false } });
    assert.deepEqual(await undoCommand('gen', r, x.d), { declined: 'nothing' });
    assert.deepEqual(x.calls, ['pending s1']);
    assert.match(x.infos[0], /nothing to undo/);
  });

  test('SnapshotBusy: asked again, then restored with force', async () => {
    const x = deps({ restores: [rpcError(CodeSnapshotBusy, '1 commands of the session run; wait for them, cancel them, or restore with force: true')] });
    const out = await undoCommand('gen', r, x.d);
    assert.deepEqual(x.calls, ['pending s1', 'confirm', 'restore', 'confirmForce', 'restore force']);
    assert.deepEqual(x.restoreParams[1], { snapshotId: 's1', force: true });
    assert.match(x.questions[1], /^Commands of this session are running: .*Restore anyway\?\nThe server says: 1 commands of the session run; .*force: true\.$/s);
    assert.deepEqual(out, { restored: { written: 2, removed: 1, ms: 7 }, forced: true });
  });

  test('SnapshotBusy, and "no" to restoring anyway: nothing is restored', async () => {
    const x = deps({ force: false, restores: [rpcError(CodeSnapshotBusy, 'busy')] });
    assert.deepEqual(await undoCommand('gen', r, x.d), { declined: 'force' });
    assert.deepEqual(x.calls, ['pending s1', 'confirm', 'restore', 'confirmForce']);
    assert.deepEqual(x.infos, []);
  });

  test('SnapshotNotFound says the snapshot is gone; other errors are the server\'s', async () => {
    await assert.rejects(undoCommand('gen', r, deps({ restores: [rpcError(CodeSnapshotNotFound, 'no snapshot has this id')] }).d), /snapshot taken before "gen" \(s1\) is gone/);
    await assert.rejects(undoCommand('gen', r, deps({ pending: rpcError(CodeSnapshotNotFound, 'no snapshot has this id') }).d), /is gone/);
    await assert.rejects(undoCommand('gen', r, deps({ restores: [rpcError(-32603, 'damaged')] }).d), /error -32603/);
    // Busy, then gone by the forced restore.
    await assert.rejects(undoCommand('gen', r, deps({ restores: [rpcError(CodeSnapshotBusy, 'busy'), rpcError(CodeSnapshotNotFound, 'x')] }).d), /is gone/);
  });

  test('a diff that fails: the question counts the command\'s own changes', async () => {
    const x = deps({ pending: rpcError(-32603, 'store busy') });
    await undoCommand('gen', r, x.d);
    assert.match(x.questions[0], /^Undo "gen"\? 1 file goes back to how it was before it ran\./);
    assert.match(x.questions[0], /the files the command changed/);
  });

  test('the question says "+" for a list the server cut, and names at most 8 files', () => {
    const many = Array.from({ length: 12 }, (_, i) => ({ path: `f${i}`, kind: 'added' as const, size: 1 }));
    const q = undoQuestion('gen', { changes: many, truncated: true }, false);
    assert.match(q.message, /12\+ files go back/);
    assert.match(q.detail, /f7 \(added\), and 4\+ more/);
  });
});

describe('against the real binary', () => {
  let s: Session;
  let state: string;

  before(async () => {
    state = mkdtempSync(path.join(tmpdir(), 'toolhost-state-'));
    chmodSync(state, 0o700);
    s = startServer('header', ['--state-dir', state]);
    const init = await s.conn.sendRequest<InitializeResult>(MethodInitialize, { processId: process.pid, rootUri: null, capabilities: {} });
    assert.equal(snapshotsOf(init), true, 'the server offers snapshots');
    await s.conn.sendNotification(InitializedNotification, {});
  });

  after(async () => {
    await s?.close();
    rmSync(state, { recursive: true, force: true });
  });

  test('a command\'s changes, each file rebuilt as the snapshot holds it from the patch, and its undo', async () => {
    const root = s.root;
    const files: Record<string, string | Buffer> = {
      'edit.txt': 'alpha\nbeta\ngamma\ndelta\n',
      'tail.txt': 'no newline at the end',
      'gone.txt': 'bee\nsea\n',
      'gone-empty.txt': '',
      'crlf.txt': 'one\r\ntwo\r\n',
      'blob.bin': Buffer.from([0, 1, 2, 3]),
    };
    mkdirSync(path.join(root, 'sub'));
    // A longer file, changed in two places far apart: two hunks.
    files['sub/long.txt'] = Array.from({ length: 60 }, (_, i) => `line ${i}\n`).join('');
    for (const [f, c] of Object.entries(files)) writeFileSync(path.join(root, f), c);
    const script = [
      "printf 'alpha\\nBETA\\ngamma\\n' > edit.txt",
      "printf 'now with one\\n' >> tail.txt",
      'rm gone.txt gone-empty.txt',
      "printf 'one\\r\\nTWO\\r\\nthree' > crlf.txt",
      "printf '\\0\\9' > blob.bin",
      "sed -i -e 's/^line 3$/LINE 3/' -e '/^line 50$/d' sub/long.txt",
      'echo made > new.txt',
    ].join('; ');
    const r = await s.conn.sendRequest(RunCommandRequest, { argv: ['sh', '-c', script], snapshot: true });
    assert.equal(r.status, 'completed', r.stderr);
    assert.ok(hasSnapshot(r));
    assert.deepEqual(
      r.changes?.map((c) => `${c.kind} ${c.path}`),
      ['modified blob.bin', 'modified crlf.txt', 'modified edit.txt', 'deleted gone-empty.txt', 'deleted gone.txt', 'added new.txt', 'modified sub/long.txt', 'modified tail.txt'],
    );
    // Each file as the snapshot holds it, as the diff editor's left side: the
    // server's patch reversed on the file now.
    for (const c of r.changes ?? []) {
      const diff: DiffResult = await s.conn.sendRequest(DiffRequest, { from: r.snapshotId!, path: c.path });
      const nowPath = path.join(root, c.path);
      const now = existsSync(nowPath) ? readFileSync(nowPath, 'utf8') : undefined;
      const b = beforeText(c.path, diff, now);
      if (c.path === 'blob.bin') {
        assert.ok('none' in b && /binary/.test(b.none), `${c.path}: ${JSON.stringify(b)}`);
        continue;
      }
      const want = c.kind === 'added' ? '' : files[c.path].toString();
      assert.deepEqual(b, { text: want }, `${c.path} as the snapshot holds it (patch: ${JSON.stringify(diff.patch)})`);
    }
    const long = await s.conn.sendRequest(DiffRequest, { from: r.snapshotId!, path: 'sub/long.txt' });
    assert.equal(parsePatch(long.patch ?? '').length, 2, 'two hunks');

    // Undo while another command of the session runs: SnapshotBusy, asked
    // again, restored with force.
    const sleeper = await s.conn.sendRequest(LongRunningRequest, { argv: ['sleep', '60'], label: 'sleeper' });
    const asked: string[] = [];
    const out = await undoCommand('the script', r, {
      pending: (from) => s.conn.sendRequest(DiffRequest, { from }),
      confirm: async (q) => (asked.push(q.message), true),
      restore: (p) => s.conn.sendRequest(RestoreRequest, p),
      confirmForce: async (q) => (asked.push(q.message), true),
      info: (m) => asked.push(m),
      log: () => undefined,
    });
    assert.equal(asked[0], 'Undo "the script"? 8 files go back to how they were before it ran.');
    assert.match(asked[1], /^Commands of this session are running/);
    assert.ok('restored' in out && out.forced);
    assert.ok('restored' in out && out.restored.written >= 6 && out.restored.removed === 1, JSON.stringify(out));
    for (const [f, c] of Object.entries(files)) assert.deepEqual(readFileSync(path.join(root, f)), Buffer.from(c), `${f} is back`);
    assert.ok(!existsSync(path.join(root, 'new.txt')), 'the file it made is gone');
    await s.conn.sendRequest(CancelRequest, { handleId: sleeper.handleId });
    await s.waitFor(ToolResultNotification, (p) => p.handleId === sleeper.handleId);

    // Nothing left to undo now; a file changed since is undone too, and named.
    writeFileSync(path.join(root, 'edit.txt'), 'later\n');
    const again: string[] = [];
    await undoCommand('the script', r, {
      pending: (from) => s.conn.sendRequest(DiffRequest, { from }),
      confirm: async (q) => (again.push(`${q.message} ${q.detail}`), true),
      restore: (p) => s.conn.sendRequest(RestoreRequest, p),
      confirmForce: async () => assert.fail('nothing runs'),
      info: (m) => again.push(m),
      log: () => undefined,
    });
    assert.match(again[0], /^Undo "the script"\? 1 file goes back .* edit\.txt \(modified\)/);
    assert.equal(readFileSync(path.join(root, 'edit.txt'), 'utf8'), files['edit.txt']);
    unlinkSync(path.join(root, 'blob.bin'));
    await assert.rejects(
      undoCommand('x', { ...r, snapshotId: '20990101-000000-000000000000' }, {
        pending: (from) => s.conn.sendRequest(DiffRequest, { from }),
        confirm: async () => true,
        restore: (p) => s.conn.sendRequest(RestoreRequest, p),
        confirmForce: async () => true,
        info: () => undefined,
        log: () => undefined,
      }),
      /is gone from the server's store/,
    );
  });
});

describe('against the real binary, on a destination', () => {
  let s: Session;
  let far: string;
  const states: string[] = [];
  const stateDir = () => {
    const d = mkdtempSync(path.join(tmpdir(), 'toolhost-state-'));
    chmodSync(d, 0o700);
    states.push(d);
    return d;
  };

  before(async () => {
    far = realpathSync(mkdtempSync(path.join(tmpdir(), 'toolhost-far-')));
    s = startServer('header', ['--state-dir', stateDir(), '--destination', `local=${serverBinary()} --root ${far} --state-dir ${stateDir()}`]);
    await s.conn.sendRequest<InitializeResult>(MethodInitialize, { processId: process.pid, rootUri: null, capabilities: {} });
    await s.conn.sendNotification(InitializedNotification, {});
  });

  after(async () => {
    await s?.close();
    for (const d of [far, ...states]) rmSync(d, { recursive: true, force: true });
  });

  test('the snapshot is the destination\'s ("local/…"): its diff, its file now read with readFile as the extension does, and its undo', async () => {
    writeFileSync(path.join(far, 'f.txt'), 'far\nside\n');
    const r = await s.conn.sendRequest(RunCommandRequest, { argv: ['sh', '-c', "printf 'far\\nSIDE\\n' > f.txt; echo x > new.txt"], snapshot: true, destination: 'local' });
    assert.equal(r.status, 'completed', r.stderr);
    assert.ok(hasSnapshot(r) && r.snapshotId.startsWith('local/'), r.snapshotId);
    assert.deepEqual(r.changes?.map((c) => `${c.kind} ${c.path}`), ['modified f.txt', 'added new.txt']);
    assert.ok(!existsSync(path.join(s.root, 'new.txt')), 'nothing here');
    // The extension reads the file now at the destination's root, as destinations says it.
    const root = destinationsOf(await s.conn.sendRequest(DestinationsRequest, {})).find((d) => d.name === 'local')?.root;
    assert.equal(root, far);
    const now = await s.conn.sendRequest(ReadFileRequest, { path: qualifiedPath(r.snapshotId, `${root}/f.txt`) });
    const diff: DiffResult = await s.conn.sendRequest(DiffRequest, { from: r.snapshotId, path: 'f.txt' });
    assert.deepEqual(beforeText('f.txt', diff, now.content), { text: 'far\nside\n' });
    const out = await undoCommand('far', r, {
      pending: (from) => s.conn.sendRequest(DiffRequest, { from }),
      confirm: async () => true,
      restore: (p) => s.conn.sendRequest(RestoreRequest, p),
      confirmForce: async () => assert.fail('nothing runs'),
      info: () => undefined,
      log: () => undefined,
    });
    assert.ok('restored' in out && out.restored.removed === 1, JSON.stringify(out));
    assert.equal(readFileSync(path.join(far, 'f.txt'), 'utf8'), 'far\nside\n');
    assert.ok(!existsSync(path.join(far, 'new.txt')));
  });
});
