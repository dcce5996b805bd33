// A small, independent JSON-RPC client for the protocol tests: the real Go
// binary over pipes, driven with vscode-jsonrpc, in header or ndjson framing.
import { ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import {
  AbstractMessageReader,
  AbstractMessageWriter,
  createMessageConnection,
  DataCallback,
  Disposable,
  Message,
  MessageConnection,
  MessageReader,
  MessageWriter,
  NotificationType,
  StreamMessageReader,
  StreamMessageWriter,
} from 'vscode-jsonrpc/node';
import type { Readable, Writable } from 'node:stream';

export type Framing = 'header' | 'ndjson';

/** Reads one JSON value per line. */
class NdjsonReader extends AbstractMessageReader implements MessageReader {
  constructor(private readonly input: Readable) {
    super();
  }
  listen(callback: DataCallback): Disposable {
    const rl = createInterface({ input: this.input, crlfDelay: Infinity });
    rl.on('line', (line) => {
      if (line.trim() === '') return;
      try {
        callback(JSON.parse(line) as Message);
      } catch (e) {
        this.fireError(e);
      }
    });
    rl.on('close', () => this.fireClose());
    return { dispose: () => rl.close() };
  }
}

/** Writes one JSON value per line. */
class NdjsonWriter extends AbstractMessageWriter implements MessageWriter {
  constructor(private readonly output: Writable) {
    super();
    output.on('close', () => this.fireClose());
  }
  write(msg: Message): Promise<void> {
    return new Promise((resolve, reject) => {
      this.output.write(JSON.stringify(msg) + '\n', 'utf8', (err) => (err ? (this.fireError(err, msg), reject(err)) : resolve()));
    });
  }
  end(): void {
    this.output.end();
  }
}

let built: string | undefined;

/** The server binary: $TOOLHOST_BIN, or built once from the repository. */
export function serverBinary(): string {
  if (process.env.TOOLHOST_BIN) return process.env.TOOLHOST_BIN;
  if (!built) {
    const repo = path.resolve(__dirname, '..', '..', '..');
    built = path.join(mkdtempSync(path.join(tmpdir(), 'toolhost-bin-')), 'toolhost');
    execFileSync('go', ['build', '-o', built, '.'], { cwd: repo, stdio: 'inherit' });
  }
  return built;
}

export interface Session {
  conn: MessageConnection;
  child: ChildProcessWithoutNullStreams;
  root: string;
  stderr: () => string;
  /** Resolves with the process's exit code. */
  exited: Promise<number | null>;
  /** Every notification received, in order. */
  notifications: { method: string; params: unknown }[];
  /** The params of every notification of a type received, in order. */
  received<T>(type: NotificationType<T>): T[];
  /** Resolves with the first notification (past or future) that matches. */
  waitFor<T>(type: NotificationType<T>, match: (p: T) => boolean, timeoutMs?: number): Promise<T>;
  close(): Promise<void>;
}

/**
 * Starts the server in a fresh temporary workspace (or root, to start
 * another server on a workspace, as a resume does), with the given framing.
 */
export function startServer(framing: Framing, extraArgs: string[] = [], root = realpathSync(mkdtempSync(path.join(tmpdir(), 'toolhost-ws-')))): Session {
  const child = spawn(serverBinary(), ['--root', root, ...extraArgs], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const [reader, writer] =
    framing === 'header'
      ? [new StreamMessageReader(child.stdout), new StreamMessageWriter(child.stdin)]
      : [new NdjsonReader(child.stdout), new NdjsonWriter(child.stdin)];
  const conn = createMessageConnection(reader, writer);
  const notifications: { method: string; params: unknown }[] = [];
  const waiters = new Set<() => void>();
  conn.onNotification((method, params) => {
    notifications.push({ method, params });
    for (const w of [...waiters]) w();
  });
  // Requests from the server (window/workDoneProgress/create) are refused:
  // this client advertises no such capability.
  conn.onRequest(() => null);
  conn.listen();
  // The notifications of a type: the server sends a method's params in
  // the shape its NotificationType names.
  const received = <T>(type: NotificationType<T>): T[] =>
    notifications.filter((x) => x.method === type.method).map((x) => x.params as T);
  const waitFor = <T>(type: NotificationType<T>, match: (p: T) => boolean, timeoutMs = 20_000): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const check = (): boolean => {
        const n = received(type).find(match);
        if (n === undefined) return false;
        waiters.delete(check);
        clearTimeout(timer);
        resolve(n);
        return true;
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`no ${type.method} notification matched within ${timeoutMs} ms; got: ${JSON.stringify(notifications.map((x) => x.method))}`));
      }, timeoutMs);
      if (!check()) waiters.add(check);
    });
  const close = async () => {
    conn.dispose();
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  };
  return { conn, child, root, stderr: () => err, exited, notifications, received, waitFor, close };
}

/** The pids whose command line contains marker, zombies excluded. */
export function pidsWithArg(marker: string): number[] {
  const pids: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(marker)) pids.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** Polls cond until it holds or the deadline passes. */
export async function until(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
