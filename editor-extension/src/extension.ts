import { randomUUID } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import * as vscode from 'vscode';
import {
  CancellationTokenSource,
  CloseAction,
  ErrorAction,
  LanguageClient,
  LanguageClientOptions,
  ResponseError,
  RevealOutputChannelOn,
  ServerOptions,
  State,
  WorkDoneProgress,
} from 'vscode-languageclient/node';
import { progressHandles, sandboxOf, snapshotsOf, workspaceOf } from './answers';
import { ApprovalQueue, approvalButtons, approvalMessage, approvalsFeature, approvalTimeoutOf, askedFor, describeApproval } from './approvals';
import { splitArgv } from './argv';
import { destinationOf, destinationPicks, destinationsOf, handleHead, isLocalPath, qualifiedPath, THIS_MACHINE } from './destinations';
import type { ReadOutput } from './follow';
import { LiveOutput } from './liveOutput';
import { describeAllowed, describeCapability, describeRefused, describeStep, refusedHosts, summarizeResult, ToolsModel, ToolView } from './model';
import {
  ApprovalRequestRequest,
  type CancelParams,
  type InitializationOptions,
  CancelRequest,
  type Change,
  CodeSnapshotTooLarge,
  DestinationsRequest,
  DiffRequest,
  HeartbeatNotification,
  type LongRunningParams,
  LongRunningRequest,
  type LongRunningResult,
  OutputNotification,
  type Port,
  PortClosedNotification,
  PortOpenedNotification,
  ProgressRequest,
  ReadFileRequest,
  ReadOutputRequest,
  ResizeRequest,
  RestoreRequest,
  StepTransitionNotification,
  type ToolResult,
  ToolResultNotification,
  type ResumeOptions,
  WaitRequest,
  WriteInputRequest,
} from './protocol';
import { portMessage, portOf, portUrl } from './ports';
import { PtyOutputs } from './ptyStream';
import { parseRecipe, Recipe, recipeParams, usesPty } from './recipes';
import { RestartPolicy } from './restartPolicy';
import { resolveServerPath } from './serverPath';
import { resumeCapability, sessionIdOf, SessionStore, withResume } from './session';
import { SnapshotDocs, snapshotUri } from './snapshotDocs';
import { beforeText, changesLabel, hasSnapshot, isCode, type SnapshotRef, undoCommand } from './snapshots';
import { initializationOptions, initializeFailure, readServerArgs, refusedSetting, SettingError } from './settings';
import { HandleTerminal, type TerminalServer, type TerminalTarget } from './terminal';
import { Node, ToolsView } from './toolsView';

let toolhost: Toolhost | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  toolhost = new Toolhost(context);
  context.subscriptions.push(toolhost);
  await toolhost.start();
}

export async function deactivate(): Promise<void> {
  await toolhost?.deactivate();
}

/** The extension: one server per window, rooted at the first workspace folder. */
class Toolhost implements vscode.Disposable {
  private client: ToolhostClient | undefined;
  private readonly model = new ToolsModel();
  private readonly view: ToolsView;
  private readonly results: vscode.OutputChannel;
  private readonly serverLog: vscode.LogOutputChannel;
  private readonly status: vscode.StatusBarItem;
  /** The live output documents of running handles. */
  private readonly live: LiveOutput;
  private readonly restarts = new RestartPolicy();
  /** Handles the user cancelled: their end is no failure to warn about. */
  private readonly cancelledByUser = new Set<string>();
  private artifactsDir = '';
  /** The place of each pty output notification in its artifact, for the terminals. */
  private readonly outputs = new PtyOutputs();
  /** The open terminals backed by handles. */
  private readonly terminals = new Set<HandleTerminal>();
  /** Recipes with a pty step: their progress is asked at each step, for Open Terminal. */
  private readonly ptyRecipes = new Set<string>();
  private readonly disposables: vscode.Disposable[] = [];
  /** The session kept in the workspace state, which the next window resumes (toolhost.persist). */
  private readonly session: SessionStore;
  /** What the last initialize sent to resume a session, if anything. */
  private sentResume: ResumeOptions | undefined;
  /** The server keeps the session when its connection ends (toolhost.persist, and it says it can). */
  private persisting = false;
  /**
   * Settled once the Tools view has what a resumed session holds (its
   * handles, their labels): a toolResult re-sent right after a resuming
   * initialize is reported then, under its label.
   */
  private resumed: Promise<void> = Promise.resolve();
  /** The server offers snapshots (capabilities.snapshots): commands are run with one (toolhost.snapshotCommands). */
  private snapshots = false;
  /** A command could not get its snapshot, and the user was told, since the server started. */
  private snapshotWarned = false;
  /** The documents of a file as a command's snapshot holds it, for the diff editor. */
  private readonly snapshotDocs: SnapshotDocs;
  /** The server's questions to the user (approval/request), one notification at a time. */
  private readonly approvals = new ApprovalQueue((p) => vscode.window.showWarningMessage(approvalMessage(p), ...approvalButtons(p.scopes)));

  constructor(private readonly context: vscode.ExtensionContext) {
    this.session = new SessionStore(context.workspaceState);
    this.results = vscode.window.createOutputChannel('Toolhost');
    this.serverLog = vscode.window.createOutputChannel('Toolhost Server', { log: true });
    this.view = new ToolsView(this.model);
    this.live = new LiveOutput(errorText, (line) => this.serverLog.info(line));
    this.snapshotDocs = new SnapshotDocs((ref) => this.loadSnapshotDoc(ref));
    this.status = vscode.window.createStatusBarItem('toolhost.running', vscode.StatusBarAlignment.Left, 10);
    this.status.name = 'Toolhost';
    this.status.command = 'toolhost.tools.focus';
    this.updateStatus();
    this.status.show();

    const cmd = (id: string, fn: (...args: never[]) => unknown) =>
      vscode.commands.registerCommand(id, async (...args: never[]) => {
        try {
          await fn(...args);
        } catch (e) {
          void vscode.window.showErrorMessage(`Toolhost: ${errorText(e)}`);
        }
      });
    this.disposables.push(
      this.live,
      this.snapshotDocs,
      this.results,
      this.serverLog,
      this.status,
      this.view,
      vscode.window.createTreeView('toolhost.tools', { treeDataProvider: this.view, showCollapseAll: true }),
      this.model.onDidChange(() => this.updateStatus()),
      cmd('toolhost.runCommand', () => this.runCommand()),
      cmd('toolhost.runRecipe', () => this.runRecipe()),
      cmd('toolhost.runInTerminal', () => this.runInTerminal()),
      cmd('toolhost.openTerminal', (node?: Node) => this.openTerminal(toolOf(node))),
      cmd('toolhost.cancel', (node?: Node) => this.cancel(toolOf(node))),
      cmd('toolhost.openOutput', (node?: Node) => this.openOutput(toolOf(node))),
      cmd('toolhost.openPort', (node?: Node) => node?.kind === 'port' && this.openPort(node.port)),
      cmd('toolhost.openProgressFile', (node?: Node) => node?.kind === 'progressFile' && this.openFile(node.tool.handleId, node.path, 'json')),
      cmd('toolhost.openChange', (node?: Node) => this.openChange(node)),
      cmd('toolhost.undoCommand', (node?: Node) => this.undo(toolOf(node))),
      cmd('toolhost.refresh', () => this.refresh()),
      cmd('toolhost.restartServer', () => this.restartServer()),
      cmd('toolhost.showResults', () => this.results.show(true)),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (['serverPath', 'serverArgs', 'readRoots', 'sandbox', 'networkAllow', 'persist', 'approvals.enabled'].some((s) => e.affectsConfiguration(`toolhost.${s}`))) {
          void vscode.window
            .showInformationMessage('Toolhost: restart the server to use the new settings?', 'Restart Server')
            .then((a) => a && this.restartServer());
        }
      }),
    );
  }

  private get folder(): vscode.WorkspaceFolder | undefined {
    return vscode.workspace.workspaceFolders?.[0];
  }

  async start(): Promise<void> {
    const folder = this.folder;
    if (!folder || folder.uri.scheme !== 'file') {
      this.serverLog.appendLine('No local workspace folder: the toolhost server is not started.');
      return;
    }
    const config = vscode.workspace.getConfiguration('toolhost');
    const command = resolveServerPath(config.get<string>('serverPath', ''), this.context.extensionPath);
    const root = folder.uri.fsPath;
    let options: InitializationOptions;
    try {
      options = initializationOptions(
        { readRoots: config.get<unknown[]>('readRoots', []), sandbox: config.get<unknown>('sandbox'), networkAllow: config.get<unknown>('networkAllow') },
        root,
      );
    } catch (e) {
      // Not started: a sandbox the extension cannot read must not leave
      // commands less confined than the user asked.
      this.serverLog.appendLine(`Not started: ${errorText(e)}`);
      this.settingError(`Toolhost: the server is not started: ${errorText(e)}`, e instanceof SettingError ? e.setting : 'toolhost.sandbox');
      return;
    }
    const allow = config.get<unknown[]>('networkAllow', []);
    if (Array.isArray(allow) && allow.length > 0 && options.sandbox?.network === false) {
      this.serverLog.appendLine('toolhost.networkAllow is not sent: toolhost.sandbox.network is false, which is stricter.');
    }
    let extraArgs: string[];
    try {
      extraArgs = readServerArgs(config.get<unknown>('serverArgs'));
    } catch (e) {
      this.serverLog.appendLine(`Not started: ${errorText(e)}`);
      this.settingError(`Toolhost: the server is not started: ${errorText(e)}`, 'toolhost.serverArgs');
      return;
    }
    // --persist: the session outlives the connection, so that a window reload
    // does not kill the commands; the server picks its state directory.
    const persist = config.get<boolean>('persist', true) !== false;
    if (!persist && this.session.state) this.session.clear();
    const args = ['--root', root, '--framing', 'header', ...(persist ? ['--persist'] : []), ...extraArgs];
    const serverOptions: ServerOptions = {
      // No transport: stdio, without the --stdio argument the client would add.
      run: { command, args, options: { cwd: root } },
      debug: { command, args, options: { cwd: root } },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [],
      workspaceFolder: folder,
      outputChannel: this.serverLog,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      // Asked at each initialize, a crash restart's too: it resumes the
      // session kept in the workspace state, if any.
      initializationOptions: () => {
        this.sentResume = this.session.resume(root, persist);
        return withResume(options, this.sentResume);
      },
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue }),
        closed: () => (client.abandoned || this.client !== client ? { action: CloseAction.DoNotRestart, handled: true } : this.serverClosed()),
      },
      initializationFailedHandler: (error) => {
        client.failureShown = true;
        // The session to resume is gone (expired, ended, another build's
        // holder…): it is forgotten, and a new one starts, which the user
        // needs no word about.
        const gone = this.session.failed(error, this.sentResume);
        if (gone) {
          this.serverLog.info(`The session ${gone.sessionId} cannot be resumed (${gone.reason}): starting a new session.`);
          client.abandoned = true;
          // This server has no session: end it now, rather than let the
          // client's stop kill its process tree 2 s later (which holds the
          // --persist holder when this process started it).
          endProcess(client.serverProcess, 'SIGTERM');
          setImmediate(() => {
            if (this.client === client) void this.start();
          });
          return false;
        }
        this.settingError(initializeFailure(error, command, errorText(error), options), refusedSetting(error, options)?.setting ?? 'toolhost');
        return false;
      },
    };
    const client = new ToolhostClient('toolhost', 'Toolhost', serverOptions, clientOptions);
    this.client = client;
    // capabilities.approvals, unless toolhost.approvals.enabled is false
    // (read at each initialize): the server then asks before it refuses.
    client.registerFeature(approvalsFeature(() => vscode.workspace.getConfiguration('toolhost').get<unknown>('approvals.enabled')));
    client.onRequest(ApprovalRequestRequest, async (p, token) => {
      this.serverLog.info(`Asking the user: "${p.argv.join(' ')}" asks to ${askedFor(p)} (${p.approvalId}, scopes ${p.scopes.join(', ') || 'none'}).`);
      // The server denies an ask it waited timeoutMs on without cancelling
      // the request: the notification is given up on then too.
      const answer = await this.approvals.ask(p, token, approvalTimeoutOf(client.initializeResult));
      const gaveUp = token.isCancellationRequested ? ' (the server stopped waiting)' : '';
      this.serverLog.info(`Answered ${p.approvalId}: ${answer.decision}${answer.scope ? ` ${answer.scope}` : ''}${gaveUp}.`);
      return answer;
    });
    client.onNotification(ToolResultNotification, (r) => {
      // A seq had before (a resume from an older lastSeq): applied, not reported again.
      this.toolResult(r, this.session.received(r.seq));
      // Every output notification of the handle came before this one.
      if (r.handleId) this.outputs.forget(r.handleId);
    });
    client.onNotification(OutputNotification, (p) => this.outputs.output(p));
    client.onNotification(StepTransitionNotification, (p) => {
      this.model.stepTransition(p);
      if (p.handleId && this.ptyRecipes.has(p.handleId)) void this.refreshHandle(client, p.handleId);
    });
    client.onNotification(HeartbeatNotification, (p) => this.model.heartbeat(p));
    client.onNotification(PortOpenedNotification, (p) => {
      const seen = this.model.portOpened(p);
      if (!seen?.fresh) return;
      // The host side: for a command with a network namespace of its own,
      // the loopback port toolhost forwards into it, which a browser reaches.
      const port = portOf(p);
      void vscode.window.showInformationMessage(portMessage(port, seen.tool.label, destinationOf(p.handleId)), 'Open in Browser').then((a) => {
        if (a) this.openPort(port).catch((e: unknown) => void vscode.window.showErrorMessage(`Toolhost: ${errorText(e)}`));
      });
    });
    client.onNotification(PortClosedNotification, (p) => this.model.portClosed(p));
    client.onDidChangeState((e) => {
      // A client given up for a new one (its session was gone) or detached
      // (the window goes) says nothing about the server in use.
      if (client.abandoned || client.detaching) return;
      if (e.newState !== State.Running) {
        this.approvals.clear();
        this.live.stopAll('the server stopped');
        for (const t of this.terminals) t.serverStopped();
        this.outputs.clear();
      }
      if (e.newState === State.Running) {
        this.artifactsDir = workspaceOf(client.initializeResult)?.artifactsDir ?? '';
        this.snapshots = snapshotsOf(client.initializeResult);
        this.snapshotWarned = false;
        const sandbox = sandboxOf(client.initializeResult);
        const sessionId = sessionIdOf(client.initializeResult);
        this.persisting = persist && resumeCapability(client.initializeResult) && sessionId !== undefined;
        const resumed = this.persisting && sessionId !== undefined && this.session.started(sessionId, root, this.sentResume);
        if (!this.persisting && this.session.state) this.session.clear();
        // A new session numbers its handles from the start again: what was
        // known of the last one's ids is about other commands. The same
        // session, resumed after a crash, has the same handles.
        this.live.session = sessionId ?? '';
        if (!this.model.serverStarted(sandbox, sessionId)) {
          this.reported.clear();
          this.cancelledByUser.clear();
          this.ptyRecipes.clear();
        }
        this.serverLog.info(`The server is running: ${describeCapability(sandbox)}.`);
        if (resumed) this.serverLog.info(`Resumed session ${sessionId}: its commands went on meanwhile; results after seq ${this.sentResume?.lastSeq ?? 0} follow.`);
        else if (this.persisting) this.serverLog.info(`Session ${sessionId}: it outlives a window reload (toolhost.persist).`);
        this.model.setDestinations(destinationsOf(client.initializeResult));
        this.resumed = this.refresh(resumed).catch(() => undefined);
        if (resumed) void this.resumed.then(() => this.live.resume(this.reader(client)));
      }
      this.updateStatus();
    });
    this.serverLog.appendLine(`Starting ${command} ${args.join(' ')}`);
    try {
      await client.start();
    } catch (e) {
      if (!client.abandoned) this.serverLog.appendLine(`Start failed: ${errorText(e)}`);
    }
  }

  /** Shows an error about the settings, with a button to open setting (or a search for it). */
  private settingError(message: string, setting: string): void {
    void vscode.window.showErrorMessage(message, 'Open Settings', 'Show Log').then((a) => {
      if (a === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', setting);
      if (a === 'Show Log') this.serverLog.show();
    });
  }

  /**
   * stopServer ends the server and its session: stop() sends shutdown and
   * exit, which end a --persist session too, killing its commands. It says
   * whether it did (a server that crashed and was not restarted is not
   * running, and its session, if it persists, lingers).
   */
  async stopServer(): Promise<boolean> {
    const client = this.client;
    this.client = undefined;
    const running = client !== undefined && client.state !== State.Stopped;
    if (client && running) await client.stop(5000).catch(() => undefined);
    this.model.serverLost();
    return running;
  }

  /**
   * deactivate runs as the window goes (a reload, a close). With
   * toolhost.persist the session must outlive it: its commands go on, and
   * the next window resumes it. vscode-languageclient has no way to end a
   * connection without ending the session: stop() and dispose() always
   * send shutdown then exit, and a shutdown ends a --persist session and
   * kills its commands (PROTOCOL.md). So the client is never stopped: the
   * server process, the --persist front, is ended by its pid instead. The
   * holder of the session sees the front's connection end without
   * shutdown and detaches the session (SIGTERM ends the front at once,
   * where the end of its stdin alone would wait up to 30 s for requests in
   * flight, such as a live output's waiting readOutput). The client's
   * connection then closes under it; closed() does not restart it.
   * Without persist (or a server that cannot resume), the server stops as
   * it always did.
   */
  async deactivate(): Promise<void> {
    const client = this.client;
    if (!client || !this.persisting || client.state !== State.Running || !client.serverProcess) {
      await this.stopServer();
      return;
    }
    this.client = undefined;
    client.detaching = true;
    this.serverLog.info(`Leaving session ${this.session.state?.sessionId ?? ''} to the next window: its commands go on (toolhost.persist).`);
    const child = client.serverProcess;
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
    child.stdin?.end();
    endProcess(child, 'SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 2000))]);
  }

  private async restartServer(): Promise<void> {
    // A restart is asked for new settings, or a fresh server: a new session.
    // Only a session the stop ended is forgotten; one whose server was not
    // running (crashed too often) is resumed.
    if (await this.stopServer()) this.session.clear();
    this.restarts.reset();
    await this.start();
  }

  /** The connection closed without a stop: the server crashed. */
  private serverClosed(): { action: CloseAction; handled: boolean } {
    this.model.serverLost();
    if (this.restarts.crashed()) {
      this.serverLog.appendLine(`The server stopped unexpectedly; restarting (${this.restarts.recent}/${this.restarts.max}).`);
      return { action: CloseAction.Restart, handled: true };
    }
    const msg = `Toolhost: the server crashed ${this.restarts.recent} times in ${this.restarts.windowMs / 60_000} minutes and will not be restarted.`;
    void vscode.window.showErrorMessage(msg, 'Restart Server', 'Show Log').then((a) => {
      if (a === 'Restart Server') void this.restartServer();
      if (a === 'Show Log') this.serverLog.show();
    });
    return { action: CloseAction.DoNotRestart, handled: true };
  }

  private ready(): LanguageClient {
    if (!this.folder) throw new Error('open a folder first: the server works in the first workspace folder.');
    const c = this.client;
    if (!c || c.state !== State.Running) throw new Error('the server is not running (see the "Toolhost Server" output).');
    return c;
  }

  private async runCommand(): Promise<void> {
    const client = this.ready();
    const line = await askCommandLine('Toolhost: Run Command', 'A command line: split like a shell would, run without one', 'go test ./...');
    if (line === undefined) return;
    const destination = await this.pickDestination(client, `Toolhost: Run Command: ${line.trim()}`);
    if (destination === undefined) return;
    const params: LongRunningParams = { argv: splitArgv(line), label: line.trim(), ...(destination && { destination }), ...this.snapshotOption() };
    await this.launch(client, params);
  }

  /**
   * pickDestination asks where to run, when the server has destinations:
   * this machine or one of them, each with its state (as `destinations`
   * says now). It answers the destination's name, THIS_MACHINE (""), at
   * once when there are none, or undefined when the user dismissed it.
   */
  private async pickDestination(client: LanguageClient, title: string): Promise<string | undefined> {
    if (this.model.destinations().length === 0) return THIS_MACHINE;
    await this.refreshDestinations(client);
    const picks = destinationPicks(this.folder?.uri.fsPath ?? '', this.model.destinations());
    if (picks.length === 0) return THIS_MACHINE;
    const pick = await vscode.window.showQuickPick(picks, { title, placeHolder: 'Where to run it', matchOnDescription: true, ignoreFocusOut: true });
    return pick?.name;
  }

  /** refreshDestinations asks the server for its destinations' states; a failure keeps what was known. */
  private async refreshDestinations(client: LanguageClient): Promise<void> {
    if (this.model.destinations().length === 0) return;
    try {
      this.model.setDestinations(destinationsOf(await client.sendRequest(DestinationsRequest, {})));
    } catch (e) {
      this.serverLog.info(`destinations: ${errorText(e)}`);
    }
  }

  private async runRecipe(): Promise<void> {
    const client = this.ready();
    const folder = this.folder!;
    const files = await vscode.workspace.findFiles(new vscode.RelativePattern(folder, '.toolhost/recipes/*.json'));
    const picks: (vscode.QuickPickItem & { recipe: Recipe })[] = [];
    for (const uri of files.sort((a, b) => a.path.localeCompare(b.path))) {
      const name = path.basename(uri.fsPath);
      try {
        const recipe = parseRecipe(Buffer.from(await vscode.workspace.fs.readFile(uri)).toString('utf8'), name);
        picks.push({ label: recipe.label, description: name, detail: recipe.steps.map((s) => s.name).join(' → '), recipe });
      } catch (e) {
        void vscode.window.showWarningMessage(`Toolhost: skipping recipe ${errorText(e)}`);
      }
    }
    if (picks.length === 0) {
      void vscode.window.showInformationMessage('Toolhost: no recipes in .toolhost/recipes/*.json');
      return;
    }
    const pick = await vscode.window.showQuickPick(picks, { title: 'Toolhost: Run Recipe', placeHolder: 'Pick a recipe', matchOnDetail: true });
    if (!pick) return;
    const destination = await this.pickDestination(client, `Toolhost: Run Recipe: ${pick.recipe.label}`);
    if (destination === undefined) return;
    await this.launch(client, { ...recipeParams(pick.recipe), ...(destination && { destination }), ...this.snapshotOption() });
  }

  /**
   * runInTerminal asks for a command line and runs it in a pseudo-terminal
   * of the server's, shown in a VS Code terminal of its own.
   */
  private async runInTerminal(): Promise<void> {
    const client = this.ready();
    const line = await askCommandLine(
      'Toolhost: Run in Terminal',
      'A command line, run in a terminal: split like a shell would, run without one (type "sh" for a shell)',
      'sh',
    );
    if (line === undefined) return;
    const argv = splitArgv(line);
    const label = line.trim();
    const destination = await this.pickDestination(client, `Toolhost: Run in Terminal: ${label}`);
    if (destination === undefined) return;
    this.openHandleTerminal(label, {
      kind: 'start',
      start: async (size) => {
        const client = this.ready();
        const params: LongRunningParams = { argv, label, pty: size, streamOutput: true, ...(destination && { destination }), ...this.snapshotOption() };
        const r = await this.startLongRunning(client, params);
        this.outputs.expect(r.handleId);
        this.model.started(r, label, undefined, params.pty);
        return r;
      },
    });
  }

  /** openTerminal attaches a new terminal to a running handle that has a pseudo-terminal. */
  private async openTerminal(tool: ToolView | undefined): Promise<void> {
    if (!tool) return;
    const client = this.ready();
    await this.refreshHandle(client, tool.handleId);
    const now = this.model.get(tool.handleId);
    if (!now || now.status !== 'running' || !now.pty) {
      void vscode.window.showInformationMessage(`Toolhost: "${tool.label}" is not running in a terminal now.`);
      return;
    }
    this.openHandleTerminal(now.label, { kind: 'attach', handleId: now.handleId });
  }

  private openHandleTerminal(label: string, target: TerminalTarget): void {
    const server: TerminalServer = {
      read: (params, signal) => {
        const client = this.ready();
        const cts = new CancellationTokenSource();
        signal.addEventListener('abort', () => cts.cancel(), { once: true });
        return client.sendRequest(ReadOutputRequest, params, cts.token).finally(() => cts.dispose());
      },
      writeInput: (handleId, data) => this.ready().sendRequest(WriteInputRequest, { handleId, data }),
      resize: (handleId, size) => this.ready().sendRequest(ResizeRequest, { handleId, ...size }),
      cancel: (handleId) => this.cancelHandle(handleId),
      outputs: this.outputs,
      errorText,
      log: (line) => this.serverLog.info(line),
    };
    const pty = new HandleTerminal(server, target, (t) => this.terminals.delete(t));
    this.terminals.add(pty);
    const terminal = vscode.window.createTerminal({ name: `Toolhost: ${label}`, pty, iconPath: new vscode.ThemeIcon('tools') });
    terminal.show();
  }

  /** refreshHandle merges one handle's progress snapshot (for its pty); a failure changes nothing. */
  private async refreshHandle(client: LanguageClient, handleId: string): Promise<void> {
    try {
      for (const p of progressHandles(await client.sendRequest(ProgressRequest, { handleId }))) this.model.progress(p);
    } catch (e) {
      this.serverLog.info(`progress of ${handleId}: ${errorText(e)}`);
    }
  }

  /** Starts a handle and shows a cancellable progress notification until it ends. */
  private async launch(client: LanguageClient, params: LongRunningParams): Promise<void> {
    const label = params.label ?? '';
    // Our own progress token: the server then reports $/progress on it instead
    // of asking the client to create one, and the notification below is the
    // only progress UI for the handle.
    const workDoneToken = `toolhost-ext/${randomUUID()}`;
    const progressDone = client.onProgress(WorkDoneProgress.type, workDoneToken, () => undefined);
    let started: LongRunningResult;
    try {
      started = await this.startLongRunning(client, { ...params, workDoneToken });
    } catch (e) {
      progressDone.dispose();
      throw e;
    }
    const tool = this.model.started(started, label, params.sandbox, (params.argv?.length ?? 0) > 0 ? params.pty : undefined);
    if (usesPty(params) && (params.argv?.length ?? 0) === 0) this.ptyRecipes.add(started.handleId);
    // The answer names no progress file: progress does, for the Tools view.
    if (params.progressFile !== undefined && params.progressFile !== false) void this.refreshHandle(client, started.handleId);
    // Its first use connected the destination: the view shows it ready.
    if (params.destination) void this.refreshDestinations(client);
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Toolhost: ${tool.label}`, cancellable: true },
      (progress, token) =>
        new Promise<void>((resolve) => {
          let last = '';
          const update = (t: ToolView) => {
            const msg = describeStep(t) || 'running';
            if (msg !== last) progress.report({ message: (last = msg) });
          };
          // The model's object for this handle: after a server restart, the
          // same handle id names another command.
          const me = tool;
          const sub = this.model.onDidChange((t) => {
            if (me.status !== 'running') {
              sub.dispose();
              progressDone.dispose();
              resolve();
            } else if (!t || t === me) update(me);
          });
          token.onCancellationRequested(() => {
            this.cancel(tool).catch((e: unknown) => {
              void vscode.window.showErrorMessage(`Toolhost: cancel failed: ${errorText(e)}`);
            });
          });
          if (tool.status !== 'running') {
            sub.dispose();
            progressDone.dispose();
            resolve();
          } else update(tool);
        }),
    );
  }

  /**
   * snapshotOption is what a command the user starts asks for: a snapshot
   * before it (its result then says what it changed, and Undo this command
   * restores it), when the server offers snapshots and
   * toolhost.snapshotCommands is on.
   */
  private snapshotOption(): { snapshot?: true } {
    const on = vscode.workspace.getConfiguration('toolhost').get<boolean>('snapshotCommands', true) !== false;
    return on && this.snapshots ? { snapshot: true } : {};
  }

  /**
   * startLongRunning sends longRunning; when it asked for a snapshot and
   * was refused, it sends it again without: the snapshot is taken before
   * the command starts, so a refused request started nothing, and a
   * workspace the server cannot snapshot (over --snapshot-max-bytes, an
   * unusable state directory) must not keep commands from running. The
   * user is told once per server. A request refused for the command
   * itself is refused again, with its own error.
   */
  private async startLongRunning(client: LanguageClient, params: LongRunningParams): Promise<LongRunningResult> {
    try {
      return await client.sendRequest(LongRunningRequest, params);
    } catch (e) {
      if (!params.snapshot) throw e;
      const { snapshot: _, ...plain } = params;
      const started = await client.sendRequest(LongRunningRequest, plain);
      this.snapshotFailed(params.label ?? '', e);
      return started;
    }
  }

  private snapshotFailed(label: string, e: unknown): void {
    const largest = isCode(e, CodeSnapshotTooLarge) ? ((e as { data?: { largest?: { path: string; bytes: number }[] } }).data?.largest ?? []) : [];
    const dirs = largest.slice(0, 3).map((d) => d.path || '.').join(', ');
    this.serverLog.warn(`"${label}" runs without a snapshot: ${errorText(e)}`);
    if (this.snapshotWarned) return;
    this.snapshotWarned = true;
    const hint = isCode(e, CodeSnapshotTooLarge)
      ? ` Leave large directories out with "--snapshot-exclude" in toolhost.serverArgs${dirs ? ` (the largest: ${dirs})` : ''}, or turn off toolhost.snapshotCommands.`
      : '';
    void vscode.window
      .showWarningMessage(`Toolhost: "${label}" runs without a snapshot, so it cannot be undone: ${errorText(e)}.${hint}`, 'Open Settings', 'Show Log')
      .then((a) => {
        if (a === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'toolhost.snapshotCommands');
        if (a === 'Show Log') this.serverLog.show();
      });
  }

  /**
   * fileNow is a path of a snapshot's root as it is now: on this machine
   * the workspace file (uri, when there is one, and its text), on a
   * destination (a snapshot id "NAME/…") its text read with readFile. No
   * text: there is no file there now.
   */
  private async fileNow(snapshotId: string, rel: string): Promise<{ uri?: vscode.Uri; text?: string; directory?: boolean }> {
    const head = handleHead(snapshotId);
    if (!head) {
      const folder = this.folder;
      if (!folder) throw new Error('open a folder first');
      const uri = vscode.Uri.joinPath(folder.uri, ...rel.split('/'));
      let stat: vscode.FileStat;
      try {
        stat = await vscode.workspace.fs.stat(uri);
      } catch {
        return {};
      }
      if (stat.type & vscode.FileType.Directory) return { uri, directory: true };
      return { uri, text: Buffer.from(await vscode.workspace.fs.readFile(uri)).toString('utf8') };
    }
    const root = this.model.destinations().find((d) => d.name === destinationOf(snapshotId))?.root;
    if (!root) throw new Error(`the root of the destination ${destinationOf(snapshotId)} is not known (not connected)`);
    try {
      const r = await this.ready().sendRequest(ReadFileRequest, { path: qualifiedPath(snapshotId, `${root.replace(/\/$/, '')}/${rel}`) });
      return { text: r.encoding === 'base64' ? Buffer.from(r.content, 'base64').toString('utf8') : r.content };
    } catch (e) {
      this.serverLog.info(`readFile of ${rel} on ${head}: ${errorText(e)}`);
      return {};
    }
  }

  /** before is a file as a snapshot holds it: the server's patch of it since, reversed on the file now. */
  private async before(snapshotId: string, rel: string): Promise<{ before: ReturnType<typeof beforeText>; now: Awaited<ReturnType<Toolhost['fileNow']>> }> {
    const diff = await this.ready().sendRequest(DiffRequest, { from: snapshotId, path: rel });
    const now = await this.fileNow(snapshotId, rel);
    if (now.directory) return { before: { none: 'it is a directory' }, now };
    return { before: beforeText(rel, diff, now.text), now };
  }

  /** loadSnapshotDoc computes a snapshot document VS Code asks for again (reopened, restored after a reload). */
  private async loadSnapshotDoc(ref: SnapshotRef): Promise<string> {
    if (ref.side === 'now') return (await this.fileNow(ref.snapshotId, ref.path)).text ?? '';
    const { before } = await this.before(ref.snapshotId, ref.path);
    if ('none' in before) throw new Error(before.none);
    return before.text;
  }

  /**
   * openChange opens the diff editor on a changed file: on the left the
   * file as the snapshot taken before the command holds it (a document of
   * toolhost-snapshot:), on the right the file now (the workspace's own
   * file, which can be edited; an empty document when it is gone). A file
   * with no text to compare (binary, too large, a directory) is a message.
   */
  private async openChange(node: Node | undefined): Promise<void> {
    if (node?.kind !== 'change' || !hasSnapshot(node.tool.result)) return;
    const { tool, change } = node;
    const snapshotId = node.tool.result.snapshotId;
    const { before, now } = await this.before(snapshotId, change.path);
    if ('none' in before) {
      void vscode.window.showInformationMessage(`Toolhost: ${change.path}: ${before.none}.`);
      return;
    }
    const ref: SnapshotRef = { snapshotId, path: change.path, session: sessionOfKey(tool.key), side: 'before' };
    const left = snapshotUri(ref);
    this.snapshotDocs.set(left, before.text);
    let right = now.text !== undefined ? now.uri : undefined;
    if (!right) {
      right = snapshotUri({ ...ref, side: 'now' });
      this.snapshotDocs.set(right, now.text ?? '');
    }
    await vscode.commands.executeCommand('vscode.diff', left, right, diffTitle(change, tool.label, now.text !== undefined), { preview: true });
  }

  /**
   * undo undoes a command run with a snapshot, after a modal confirmation
   * naming how many files go back: `restore {snapshotId}`, and with force
   * after a second question when the session's commands run (SnapshotBusy).
   */
  private async undo(tool: ToolView | undefined): Promise<void> {
    if (!tool || !hasSnapshot(tool.result)) return;
    const client = this.ready();
    const r = tool.result;
    const outcome = await undoCommand(tool.label, r, {
      pending: (from) => client.sendRequest(DiffRequest, { from }),
      confirm: async (q) => (await vscode.window.showWarningMessage(q.message, { modal: true, detail: q.detail }, 'Undo')) === 'Undo',
      restore: (p) => client.sendRequest(RestoreRequest, p),
      confirmForce: async (q) => (await vscode.window.showWarningMessage(q.message, { modal: true, detail: q.detail }, 'Restore anyway')) === 'Restore anyway',
      info: (m) => void vscode.window.showInformationMessage(m),
      log: (line) => this.serverLog.info(line),
    });
    if ('restored' in outcome) {
      const { written, removed, ms } = outcome.restored;
      this.serverLog.info(`Undid "${tool.label}": restored ${r.snapshotId}${outcome.forced ? ' (force)' : ''}: ${written} written, ${removed} removed, ${ms} ms.`);
      this.results.appendLine(`[${new Date().toLocaleTimeString()}] ${tool.label}: undone (snapshot ${r.snapshotId}: ${written} written, ${removed} removed)`);
      this.model.undone(tool);
    }
  }

  private async cancel(tool: ToolView | undefined): Promise<void> {
    const client = this.ready();
    if (!tool) {
      const running = this.model.running();
      if (running.length === 0) {
        void vscode.window.showInformationMessage('Toolhost: nothing is running.');
        return;
      }
      const pick = await vscode.window.showQuickPick(
        running.map((t) => ({ label: t.label, description: describeStep(t), tool: t })),
        { title: 'Toolhost: Cancel' },
      );
      if (!pick) return;
      tool = pick.tool;
    }
    await this.cancelHandle(tool.handleId, client);
  }

  /** cancelHandle cancels a handle the user asked to stop: its end is no failure to warn about. */
  private async cancelHandle(handleId: string, client = this.ready()): Promise<void> {
    this.cancelledByUser.add(handleId);
    const params: CancelParams = { handleId };
    const r = await client.sendRequest(CancelRequest, params);
    this.toolResult(r); // the same result the notification brings; applied once either way
  }

  private async openOutput(tool: ToolView | undefined): Promise<void> {
    if (!tool) return;
    if (tool.status === 'running' && !tool.lost) {
      // Live: read as it grows, in a document of its own.
      await this.live.open(tool.handleId, tool.label, this.reader(this.ready()));
      return;
    }
    if (tool.result) {
      await this.openFile(tool.handleId, tool.result.artifacts.outputPath, 'log');
      return;
    }
    if (handleHead(tool.handleId)) {
      // A destination's command: its artifacts are on that machine, under a
      // directory only its result names. Ask for them by handle, which the
      // hub routes there.
      const r = await this.ready().sendRequest(ReadOutputRequest, { handleId: tool.handleId, offset: 0, maxBytes: 1 << 20 });
      const content = r.encoding === 'base64' ? Buffer.from(r.data, 'base64').toString('utf8') : r.data;
      await vscode.window.showTextDocument(await vscode.workspace.openTextDocument({ content, language: 'log' }));
      return;
    }
    const file = path.join(this.artifactsDir, tool.commandId, 'output.log');
    try {
      await vscode.workspace.fs.stat(vscode.Uri.file(file));
      await vscode.window.showTextDocument(vscode.Uri.file(file), { preview: true });
    } catch {
      // Not visible to this side (a remote host): ask the server.
      const r = await this.ready().sendRequest(ReadFileRequest, { path: file });
      const content = r.encoding === 'base64' ? Buffer.from(r.content, 'base64').toString('utf8') : r.content;
      await vscode.window.showTextDocument(await vscode.workspace.openTextDocument({ content, language: 'log' }));
    }
  }

  /**
   * openFile opens a file of a handle: one of this machine in an editor
   * (which follows it as it is rewritten), a destination's as read with
   * readFile, which routes its "NAME//path" there.
   */
  private async openFile(handleId: string, file: string, language: string): Promise<void> {
    const qualified = qualifiedPath(handleId, file);
    if (isLocalPath(handleId, qualified)) {
      await vscode.window.showTextDocument(vscode.Uri.file(qualified), { preview: true });
      return;
    }
    const r = await this.ready().sendRequest(ReadFileRequest, { path: qualified });
    const content = r.encoding === 'base64' ? Buffer.from(r.content, 'base64').toString('utf8') : r.content;
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument({ content, language }), { preview: true });
  }

  /**
   * openPort opens a port a command listens on in the browser: localhost
   * for a wildcard listener, else its address, through asExternalUri, which
   * forwards it when VS Code runs elsewhere (Remote, Codespaces,
   * code-server).
   */
  private async openPort(port: Port): Promise<void> {
    const uri = await vscode.env.asExternalUri(vscode.Uri.parse(portUrl(port)));
    if (!(await vscode.env.openExternal(uri))) throw new Error(`could not open ${uri.toString(true)}`);
  }

  /**
   * refresh merges a `progress` snapshot of every handle: this server's, and
   * those of each destination that is connected (one that is not has none,
   * and asking would connect it).
   */
  private async refresh(resumed = false): Promise<void> {
    const client = this.client;
    if (client?.state === State.Running) {
      const answer = await client.sendRequest(ProgressRequest, {});
      for (const p of progressHandles(answer)) this.model.progress(p);
      await this.refreshDestinations(client);
      for (const d of this.model.destinations().filter((d) => d.state === 'ready')) {
        try {
          for (const p of progressHandles(await client.sendRequest(ProgressRequest, { destination: d.name }))) this.model.progress(p);
        } catch (e) {
          this.serverLog.info(`progress of destination ${d.name}: ${errorText(e)}`);
        }
      }
      // A resumed session's handles that ended before, here and on the
      // destinations: their results came to an earlier window (their seq is
      // at most lastSeq). Their rows get them from `wait`, which answers a
      // finished handle's result at once (routed by the handle id);
      // reported there already, they are not reported again.
      if (resumed) await this.fetchResults(client);
    }
    this.view.refresh();
  }

  /** fetchResults asks `wait` for the results of this server's ended handles the view has none of. */
  private async fetchResults(client: LanguageClient): Promise<void> {
    const ended = this.model.list().filter((t) => this.model.get(t.handleId) === t && t.status !== 'running' && !t.result && !t.lost);
    await Promise.all(
      ended.map(async (t) => {
        try {
          const r = await client.sendRequest(WaitRequest, { handleId: t.handleId, timeoutMs: 0 });
          if (r.status !== 'running') this.model.toolResult(r);
        } catch (e) {
          this.serverLog.info(`the result of ${t.handleId}: ${errorText(e)}`);
        }
      }),
    );
  }

  /** reader sends readOutput requests for a live output document, cancelled by its signal. */
  private reader(client: LanguageClient): ReadOutput {
    return (params, signal) => {
      const cts = new CancellationTokenSource();
      signal.addEventListener('abort', () => cts.cancel(), { once: true });
      return client.sendRequest(ReadOutputRequest, params, cts.token).finally(() => cts.dispose());
    };
  }

  private readonly reported = new Set<string>();

  /**
   * toolResult applies a result to the view and, once per handle, reports
   * it: the output channel, a warning when it failed. A repeat (a seq had
   * before) is applied only.
   */
  private toolResult(r: ToolResult, fresh = true): void {
    const tool = this.model.toolResult(r);
    // A destination's transport died: the view shows it lost, with why.
    if (r.status === 'lost' && this.client) void this.refreshDestinations(this.client);
    this.ptyRecipes.delete(r.handleId ?? '');
    for (const t of this.terminals) if (t.handleId === r.handleId) t.ended(r);
    if (!fresh || !r.handleId || this.reported.has(r.handleId)) return;
    this.reported.add(r.handleId);
    // Right after a resume, the handle's label comes with the view's refresh.
    void this.resumed.then(() => this.report(r, tool));
  }

  private report(r: ToolResult, tool: ToolView | undefined): void {
    if (!r.handleId) return;
    const label = tool?.label ?? r.handleId;
    this.results.appendLine(`[${new Date().toLocaleTimeString()}] ${summarizeResult(label, r)}`);
    for (const s of r.steps ?? []) {
      this.results.appendLine(`    ${s.status.padEnd(9)} ${s.name}${s.exitCode !== null && s.exitCode !== 0 ? ` (exit ${s.exitCode})` : ''}`);
    }
    for (const a of r.network?.allowed ?? []) this.results.appendLine(`    allowed: ${describeAllowed(a)}`);
    for (const d of refusedHosts({ result: r })) this.results.appendLine(`    ${describeRefused(d)}`);
    for (const a of r.approvals ?? []) this.results.appendLine(`    asked: ${describeApproval(a)}`);
    if (hasSnapshot(r)) {
      const paths = (r.changes ?? []).slice(0, 20).map((c) => `${c.kind} ${c.path}`);
      this.results.appendLine(`    ${changesLabel(r).toLowerCase()} since snapshot ${r.snapshotId}${paths.length > 0 ? `: ${paths.join(', ')}` : ''}${(r.changes?.length ?? 0) > paths.length ? ', …' : ''}`);
    }
    this.results.appendLine(`    output: ${r.artifacts.outputPath}`);
    const byUser = r.status === 'cancelled' && this.cancelledByUser.has(r.handleId);
    if (!r.success && !byUser) {
      const why = r.status === 'completed' ? (r.exitCode !== null ? `exit code ${r.exitCode}` : (r.signal ?? 'signal')) : r.status;
      void vscode.window.showWarningMessage(`Toolhost: "${label}" failed (${why}).`, 'Open Output').then((a) => {
        if (a && tool) void this.openOutput(tool);
      });
    }
  }

  private updateStatus(): void {
    const n = this.model.running().length;
    const up = this.client?.state === State.Running;
    this.status.text = `${n > 0 ? '$(sync~spin)' : '$(tools)'} ${n} running`;
    this.status.tooltip = `Toolhost: ${n} running tool${n === 1 ? '' : 's'}${up ? '' : ' (server not running)'}`;
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}

/**
 * ToolhostClient is the language client, less one notification: after an
 * initialize failure the extension has explained, the client still raises
 * its own "couldn't create connection to server", which misleads (the
 * connection was fine, the server refused). The log keeps it.
 */
class ToolhostClient extends LanguageClient {
  /** Set by initializationFailedHandler once the user has been told. */
  failureShown = false;
  /** Given up for a new client: the session it asked to resume is gone. */
  abandoned = false;
  /** Its server was ended without shutdown, so that its session outlives the window. */
  detaching = false;

  override error(message: string, data?: unknown, showNotification?: boolean | 'force'): void {
    super.error(message, data, this.failureShown ? false : showNotification);
  }
}

/** endProcess signals a server process this extension started, by its pid, unless it has exited. */
function endProcess(child: ChildProcess | undefined, signal: NodeJS.Signals): void {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  try {
    child.kill(signal);
  } catch {
    // gone meanwhile
  }
}

/** sessionOfKey is the session part of a Tools view row's key ("<session>:<handle>"). */
function sessionOfKey(key: string): string {
  const colon = key.indexOf(':');
  return colon < 0 ? '' : key.slice(0, colon);
}

/** diffTitle is the diff editor's title: "a.txt (before "go generate") ↔ now". */
function diffTitle(change: Change, label: string, exists: boolean): string {
  const name = change.path.slice(change.path.lastIndexOf('/') + 1);
  const short = label.length > 40 ? `${label.slice(0, 39)}…` : label;
  return `${name} (before ${short}) ↔ ${exists ? 'now' : 'now (deleted)'}`;
}

/** toolOf is the handle a Tools view node is about: its own, a step's, a port's; none for a group. */
function toolOf(node: Node | undefined): ToolView | undefined {
  return node && node.kind !== 'group' ? node.tool : undefined;
}

function errorText(e: unknown): string {
  if (e instanceof ResponseError) {
    const data = e.data as { reason?: string; path?: string } | undefined;
    const extra = [data?.path, data?.reason].filter(Boolean).join(': ');
    return extra && !e.message.includes(extra) ? `${e.message} (${extra})` : e.message;
  }
  return e instanceof Error ? e.message : String(e);
}

/** askCommandLine asks for a command line, refusing one that does not split into words; undefined when dismissed. */
function askCommandLine(title: string, prompt: string, placeHolder: string): Thenable<string | undefined> {
  return vscode.window.showInputBox({
    title,
    prompt,
    placeHolder,
    ignoreFocusOut: true,
    validateInput: (v) => {
      try {
        return splitArgv(v).length > 0 ? undefined : 'Type a command';
      } catch (e) {
        return errorText(e);
      }
    },
  });
}
