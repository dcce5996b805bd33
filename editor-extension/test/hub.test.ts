// The extension's model fed by the real binary with a destination: a local
// toolhost reached as `--destination local=<toolhost> --root <dir>`. What it
// checks is what the Tools view and the port notification rely on: the
// destination in initialize's answer, prefixed ids that group under it,
// portOpened with the port the command really listens on, progress's ports,
// and portClosed before the toolResult.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, realpathSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { progressHandles } from '../src/answers';
import { destinationOf, destinationsOf } from '../src/destinations';
import { ToolsModel } from '../src/model';
import { portUrl } from '../src/ports';
import {
  CancelRequest,
  DestinationsRequest,
  InitializedNotification,
  type InitializeResult,
  LongRunningRequest,
  MethodInitialize,
  PortClosedNotification,
  type PortClosedParams,
  PortOpenedNotification,
  type PortOpenedParams,
  ProgressRequest,
  type ToolResult,
  ToolResultNotification,
} from '../src/protocol';
import { serverBinary, Session, startServer, until } from './client';

/** A listener on a free port of 127.0.0.1 that writes its port to the file argv[1] names, then serves until killed. */
const LISTENER = [
  'python3',
  '-c',
  "import socket,sys,time\ns=socket.socket(); s.bind(('127.0.0.1',0)); s.listen()\nf=open(sys.argv[1]+'.tmp','w'); f.write(str(s.getsockname()[1])); f.close()\nimport os; os.rename(sys.argv[1]+'.tmp', sys.argv[1])\ntime.sleep(600)",
];

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const c = connect(port, '127.0.0.1', () => (c.end(), resolve(true)));
    c.on('error', () => resolve(false));
  });
}

describe('the Tools model against toolhost with a local destination', () => {
  let s: Session;
  let init: InitializeResult;
  let far: string;
  const model = new ToolsModel();
  let fed = 0;
  /** feed gives the model the notifications received since the last call, in order, as the extension's handlers would. */
  const feed = () => {
    for (const n of s.notifications.slice(fed)) {
      if (n.method === PortOpenedNotification.method) model.portOpened(n.params as PortOpenedParams);
      if (n.method === PortClosedNotification.method) model.portClosed(n.params as PortClosedParams);
      if (n.method === ToolResultNotification.method) model.toolResult(n.params as ToolResult);
    }
    fed = s.notifications.length;
  };

  before(async () => {
    far = realpathSync(mkdtempSync(path.join(tmpdir(), 'toolhost-far-')));
    s = startServer('header', ['--destination', `local=${serverBinary()} --root ${far}`]);
    init = await s.conn.sendRequest<InitializeResult>(MethodInitialize, { processId: process.pid, rootUri: null, capabilities: {} });
    await s.conn.sendNotification(InitializedNotification, {});
  });

  after(async () => {
    await s?.close();
  });

  test('initialize names the destination; the picker\'s list comes from it', async () => {
    const listed = destinationsOf(init);
    assert.deepEqual(listed.map((d) => [d.name, d.command]), [['local', [serverBinary(), '--root', far]]]);
    model.setDestinations(listed);
  });

  for (const where of ['', 'local']) {
    test(`a listener ${where ? 'on the destination' : 'here'}: portOpened with its port, in progress, grouped, closed before its result`, async () => {
      const portFile = `port-${where || 'here'}-${process.hrtime.bigint()}`;
      const started = await s.conn.sendRequest(LongRunningRequest, { argv: [...LISTENER, portFile], label: 'listener', ...(where && { destination: where }) });
      model.started(started, 'listener');
      assert.equal(destinationOf(started.handleId), where, started.handleId);
      const opened = await s.waitFor(PortOpenedNotification, (p) => p.handleId === started.handleId);
      const root = where ? far : s.root;
      let port = 0;
      await until(() => {
        try {
          port = Number(readFileSync(path.join(root, portFile), 'utf8'));
        } catch {
          return false;
        }
        return port > 0;
      }, 10_000, 'the listener\'s port file');
      assert.deepEqual({ port: opened.port, address: opened.address }, { port, address: '127.0.0.1' });
      assert.equal(portUrl(opened), `http://127.0.0.1:${port}/`);
      assert.ok(await canConnect(port), 'the port listens');
      feed();
      const tool = model.get(started.handleId)!;
      assert.deepEqual(tool.ports.list().map((p) => p.port), [port]);
      const group = model.groups().find((g) => g.name === where)!;
      assert.ok(group.tools.includes(tool), `under the group "${where}"`);

      // progress lists it too (what a refresh merges)
      const [snap] = progressHandles(await s.conn.sendRequest(ProgressRequest, { handleId: started.handleId }));
      assert.deepEqual(snap.ports?.map((p) => p.port), [port]);
      model.progress(snap);
      assert.deepEqual(tool.ports.list().map((p) => p.port), [port]);
      if (where) {
        const [d] = destinationsOf(await s.conn.sendRequest(DestinationsRequest, {}));
        assert.equal(d.state, 'ready', 'its first use connected it');
        assert.equal(d.root, far);
      }

      await s.conn.sendRequest(CancelRequest, { handleId: started.handleId });
      await s.waitFor(ToolResultNotification, (r) => r.handleId === started.handleId);
      feed();
      const order = s.notifications
        .filter((n) => (n.params as { handleId?: string }).handleId === started.handleId)
        .map((n) => n.method)
        .filter((m) => m === 'portOpened' || m === 'portClosed' || m === 'toolResult');
      assert.deepEqual(order, ['portOpened', 'portClosed', 'toolResult']);
      assert.equal(tool.ports.size, 0);
    });
  }
});
