import * as vscode from 'vscode';
import { approvalTooltip, describeApproval } from './approvals';
import { describeDestination, type Group, THIS_MACHINE, THIS_MACHINE_LABEL } from './destinations';
import {
  appliedConfinement,
  contextValue,
  describeRefused,
  describeStepView,
  describeTool,
  hostPort,
  StepView,
  toolTooltip,
  ToolsModel,
  ToolView,
} from './model';
import { describePort, forwardedFrom, portUrl } from './ports';
import type { ApprovalOutcome, Change, NetworkDenied, Port } from './protocol';
import { changeRow, changesLabel, directories } from './snapshots';
import { changeChildren, EXPAND_CHANGES, type Node, toolChildren } from './treeNodes';

export type { Node } from './treeNodes';

/**
 * ToolsView shows every handle of the session with its label, status,
 * current step and elapsed time, and its steps as children. The elapsed time
 * of running handles ticks once a second.
 */
export class ToolsView implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<Node | Node[] | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subscription: { dispose(): void };
  private timer: NodeJS.Timeout | undefined;
  /**
   * Nodes are the node objects handed to VS Code, by row: the same object
   * for the same row from one getChildren to the next, so that the ticking
   * of elapsed times refreshes those rows alone. A refresh of the whole tree
   * makes VS Code forget every row until it asks again, and an inline
   * action clicked meanwhile would reach its command without its row.
   */
  private readonly nodes = new Map<string, Node>();

  constructor(private readonly model: ToolsModel) {
    this.subscription = model.onDidChange(() => this.refresh());
  }

  refresh(): void {
    this.changed.fire(undefined);
    const running = this.model.running().length > 0;
    if (running && !this.timer) {
      this.timer = setInterval(() => this.tick(), 1000);
    } else if (!running && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** tick refreshes the rows of running handles: their elapsed time. */
  private tick(): void {
    const rows = this.model.running().flatMap((t) => this.nodes.get(nodeKey({ kind: 'tool', tool: t })) ?? []);
    if (rows.length > 0) this.changed.fire(rows);
  }

  getChildren(node?: Node): Node[] {
    return this.children(node).map((n) => this.keep(n));
  }

  private children(node?: Node): Node[] {
    if (!node) {
      if (!this.model.grouped()) return this.model.list().map((tool) => ({ kind: 'tool', tool }));
      return this.model.groups().map((group) => ({ kind: 'group', group }));
    }
    if (node.kind === 'group') {
      // The group's handles as the model has them now (the node may be older).
      const now = this.model.groups().find((g) => g.name === node.group.name);
      return (now?.tools ?? []).map((tool) => ({ kind: 'tool', tool }));
    }
    if (node.kind === 'tool') return toolChildren(node.tool);
    if (node.kind === 'changes') return changeChildren(node.tool);
    return [];
  }

  /** keep returns the node object already handed out for n's row, brought up to date, or n. */
  private keep(n: Node): Node {
    const key = nodeKey(n);
    const old = this.nodes.get(key);
    if (old?.kind === n.kind) return Object.assign(old, n);
    this.nodes.set(key, n);
    return n;
  }

  getTreeItem(node: Node): vscode.TreeItem {
    switch (node.kind) {
      case 'group':
        return groupItem(node.group);
      case 'step':
        return this.stepItem(node.tool, node.step, node.index);
      case 'port':
        return portItem(node.tool, node.port);
      case 'progressFile':
        return progressFileItem(node.tool, node.path);
      case 'refused':
        return refusedItem(node.tool, node.denied);
      case 'approval':
        return approvalItem(node.tool, node.outcome, node.index);
      case 'changes':
        return changesItem(node.tool);
      case 'change':
        return changeItem(node.tool, node.change);
      case 'tool':
        return this.toolItem(node.tool);
    }
  }

  private toolItem(t: ToolView): vscode.TreeItem {
    const parent = toolChildren(t).length > 0;
    const item = new vscode.TreeItem(t.label, parent ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None);
    item.id = leafAware(t.key, parent);
    // The icon keeps saying the status (a spinner while running); "confined"
    // leads the description of a confined handle, since a tree item has one
    // icon and renders no $(codicon) in its label or description, and an
    // emoji lock draws as an empty box where there is no emoji font.
    item.description = describeTool(t, this.model.elapsedNow(t));
    item.tooltip = new vscode.MarkdownString(toolTooltip(t).join('  \n'));
    item.iconPath = statusIcon(t);
    item.contextValue = contextValue(t);
    return item;
  }

  private stepItem(t: ToolView, s: StepView, index: number): vscode.TreeItem {
    const item = new vscode.TreeItem(s.name, vscode.TreeItemCollapsibleState.None);
    item.id = `${t.key}/${index}`;
    item.description = describeStepView(s);
    if (s.sandbox) item.tooltip = new vscode.MarkdownString([`**${s.name}**`, ...appliedConfinement(s.sandbox).lines].join('  \n'));
    item.iconPath = stepIcon(s);
    item.contextValue = 'toolhost.step';
    return item;
  }

  dispose(): void {
    if (this.timer) clearInterval(this.timer);
    this.subscription.dispose();
    this.changed.dispose();
  }
}

/** nodeKey names a node's row, whatever object holds it. */
function nodeKey(n: Node): string {
  switch (n.kind) {
    case 'group':
      return `group:${n.group.name}`;
    case 'tool':
      return `tool:${n.tool.key}`;
    case 'step':
      return `step:${n.tool.key}:${n.index}`;
    case 'port':
      return `port:${n.tool.key}:${n.port.address}:${n.port.port}`;
    case 'progressFile':
      return `progressFile:${n.tool.key}`;
    case 'refused':
      return `refused:${n.tool.key}:${hostPort(n.denied.host, n.denied.port)}`;
    case 'approval':
      return `approval:${n.tool.key}:${n.index}`;
    case 'changes':
      return `changes:${n.tool.key}`;
    case 'change':
      return `change:${n.tool.key}:${n.change.path}`;
  }
}

/**
 * leafAware is the id of an item that may get its first children later (a
 * handle its first port, a group its first handle): VS Code applies an
 * item's collapsibleState only the first time it sees its id, and keeps an
 * item first shown without children collapsed once it has some. A new id
 * then shows it expanded.
 */
function leafAware(id: string, hasChildren: boolean): string {
  return hasChildren ? id : `${id}#leaf`;
}

/**
 * changesItem is the "Changes (n)" row of a command run with a snapshot:
 * its children are the paths it changed. A short list shows expanded.
 * Undo this command is in its context menu, as on the command's row.
 */
function changesItem(t: ToolView): vscode.TreeItem {
  const r = t.result;
  const n = r?.changes?.length ?? 0;
  const state = n === 0 ? vscode.TreeItemCollapsibleState.None : n <= EXPAND_CHANGES ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed;
  const item = new vscode.TreeItem(r ? changesLabel(r) : 'Changes', state);
  item.id = leafAware(`${t.key}/changes`, n > 0);
  item.description = [n === 0 ? 'nothing changed' : '', t.undone ? 'undone' : ''].filter(Boolean).join(' · ');
  item.tooltip = new vscode.MarkdownString(
    [
      `**${changesLabel(r ?? {})}**: what the command added, modified and deleted in the workspace${r?.changesTruncated ? ' (the server lists the first 1,000)' : ''}`,
      `snapshot before it: \`${r?.snapshotId ?? ''}\``,
      'click a file to compare it with how it was; **Undo this command** (right-click) puts the workspace back as it was before it ran',
      t.undone ? 'undone in this window' : '',
    ]
      .filter(Boolean)
      .join('  \n'),
  );
  item.iconPath = new vscode.ThemeIcon('diff');
  item.contextValue = 'toolhost.changes';
  return item;
}

/** changeItem is one changed path under "Changes (n)": click it for the diff editor, snapshot against now. */
function changeItem(t: ToolView, c: Change): vscode.TreeItem {
  const row = changeRow(c, directories(t.result?.changes ?? []));
  const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.None);
  item.id = `${t.key}/change/${c.path}`;
  item.description = row.description;
  item.tooltip = row.tooltip;
  item.iconPath = new vscode.ThemeIcon(row.icon, new vscode.ThemeColor(row.color));
  item.contextValue = row.directory ? 'toolhost.changedDir' : 'toolhost.change';
  if (!row.directory) {
    item.command = { command: 'toolhost.openChange', title: 'Compare with Before', arguments: [{ kind: 'change', tool: t, change: c } satisfies Node] };
  }
  return item;
}

function groupItem(g: Group<ToolView>): vscode.TreeItem {
  const local = g.name === THIS_MACHINE;
  const item = new vscode.TreeItem(local ? THIS_MACHINE_LABEL : g.name, vscode.TreeItemCollapsibleState.Expanded);
  item.id = leafAware(`group:${g.name}`, g.tools.length > 0);
  const running = g.tools.filter((t) => t.status === 'running').length;
  const state = local ? '' : g.destination ? describeDestination(g.destination) : 'not a destination of this server now';
  item.description = [state, running > 0 ? `${running} running` : ''].filter(Boolean).join(' · ');
  const d = g.destination;
  item.tooltip = new vscode.MarkdownString(
    (local
      ? [`**${THIS_MACHINE_LABEL}**`, 'the server itself']
      : [
          `**${g.name}**`,
          d ? `state: ${d.state}` : '',
          d ? `command: \`${d.command.join(' ')}\`` : '',
          d?.root ? `root: \`${d.root}\`` : '',
          d?.serverInfo ? `server: ${d.serverInfo.name} ${d.serverInfo.version}` : '',
          d?.reason ? `reason: ${d.reason}` : '',
        ]
    )
      .filter(Boolean)
      .join('  \n'),
  );
  item.iconPath = new vscode.ThemeIcon(local ? 'vm' : d?.state === 'lost' ? 'debug-disconnect' : 'remote');
  item.contextValue = 'toolhost.group';
  return item;
}

function portItem(t: ToolView, p: Port): vscode.TreeItem {
  const item = new vscode.TreeItem(`Port ${p.port}`, vscode.TreeItemCollapsibleState.None);
  item.id = `${t.key}/port/${p.address}/${p.port}`;
  item.description = describePort(p);
  const fwd = forwardedFrom(p);
  item.tooltip = `${portUrl(p)} (pid ${p.pid}${fwd ? `, ${fwd}: the command listens in a network namespace of its own, and toolhost forwards this port of this machine's loopback to it` : ''}): click to open it in a browser`;
  item.iconPath = new vscode.ThemeIcon('plug');
  item.contextValue = 'toolhost.port';
  item.command = { command: 'toolhost.openPort', title: 'Open in Browser', arguments: [{ kind: 'port', tool: t, port: p } satisfies Node] };
  return item;
}

function refusedItem(t: ToolView, d: NetworkDenied): vscode.TreeItem {
  const item = new vscode.TreeItem(describeRefused(d), vscode.TreeItemCollapsibleState.None);
  const where = hostPort(d.host, d.port);
  item.id = `${t.key}/refused/${where}`;
  const allow = t.result?.sandbox?.networkAllow;
  item.tooltip = new vscode.MarkdownString(
    [
      `**${where}** was refused ${d.attempts} time${d.attempts === 1 ? '' : 's'}: not in this command's network allow-list`,
      allow ? `allow-list: ${allow.length > 0 ? allow.map((a) => `\`${a}\``).join(', ') : 'empty'}` : '',
      "to let it through, add it to the `toolhost.networkAllow` setting (within what the server's `--network-allow` allows, if it has a list)",
    ]
      .filter(Boolean)
      .join('  \n'),
  );
  item.iconPath = new vscode.ThemeIcon('circle-slash', new vscode.ThemeColor('problemsWarningIcon.foreground'));
  item.contextValue = 'toolhost.refused';
  return item;
}

/** approvalItem is one ask of a command and how it was decided: "connect to h:80 · allowed once · by you". */
function approvalItem(t: ToolView, o: ApprovalOutcome, index: number): vscode.TreeItem {
  const item = new vscode.TreeItem(describeApproval(o), vscode.TreeItemCollapsibleState.None);
  item.id = `${t.key}/approval/${index}`;
  item.tooltip = new vscode.MarkdownString(approvalTooltip(o).join('  \n'));
  const allowed = o.decision === 'allow';
  item.iconPath = new vscode.ThemeIcon(allowed ? 'unlock' : 'lock', allowed ? undefined : new vscode.ThemeColor('problemsWarningIcon.foreground'));
  item.contextValue = 'toolhost.approval';
  return item;
}

function progressFileItem(t: ToolView, path: string): vscode.TreeItem {
  const item = new vscode.TreeItem('progress file', vscode.TreeItemCollapsibleState.None);
  item.id = `${t.key}/progressFile`;
  item.description = path;
  item.tooltip = `${path}: rewritten at every step; click to open it`;
  item.iconPath = new vscode.ThemeIcon('file');
  item.contextValue = 'toolhost.progressFile';
  item.command = { command: 'toolhost.openProgressFile', title: 'Open Progress File', arguments: [{ kind: 'progressFile', tool: t, path } satisfies Node] };
  return item;
}

function statusIcon(t: ToolView): vscode.ThemeIcon {
  if (t.status === 'running') return new vscode.ThemeIcon('sync~spin');
  if (t.result?.success) return new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed'));
  if (t.status === 'cancelled') return new vscode.ThemeIcon('circle-slash');
  return new vscode.ThemeIcon('error', new vscode.ThemeColor('testing.iconFailed'));
}

function stepIcon(s: StepView): vscode.ThemeIcon {
  switch (s.status) {
    case 'running':
    case 'start':
      return new vscode.ThemeIcon('sync~spin');
    case 'done':
      return new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed'));
    case 'fail':
      return new vscode.ThemeIcon('error', new vscode.ThemeColor('testing.iconFailed'));
    case 'skip':
      return new vscode.ThemeIcon('debug-step-over');
    case 'cancelled':
      return new vscode.ThemeIcon('circle-slash');
  }
}
