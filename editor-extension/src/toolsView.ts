import * as vscode from 'vscode';
import { appliedConfinement, contextValue, describeStepView, describeTool, StepView, toolTooltip, ToolsModel, ToolView } from './model';

/** A node of the Tools view: a handle, or one of its steps. */
export type Node = { kind: 'tool'; tool: ToolView } | { kind: 'step'; tool: ToolView; step: StepView; index: number };

/**
 * ToolsView shows every handle of the session with its label, status,
 * current step and elapsed time, and its steps as children. The elapsed time
 * of running handles ticks once a second.
 */
export class ToolsView implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subscription: { dispose(): void };
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly model: ToolsModel) {
    this.subscription = model.onDidChange(() => this.refresh());
  }

  refresh(): void {
    this.changed.fire(undefined);
    const running = this.model.running().length > 0;
    if (running && !this.timer) {
      this.timer = setInterval(() => this.refresh(), 1000);
    } else if (!running && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  getChildren(node?: Node): Node[] {
    if (!node) return this.model.list().map((tool) => ({ kind: 'tool', tool }));
    if (node.kind === 'tool') return node.tool.steps.map((step, index) => ({ kind: 'step', tool: node.tool, step, index }));
    return [];
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if (node.kind === 'step') return this.stepItem(node.tool, node.step, node.index);
    const t = node.tool;
    const item = new vscode.TreeItem(
      t.label,
      t.steps.length > 0 ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None,
    );
    item.id = t.handleId;
    // The icon keeps saying the status (a spinner while running); the lock of
    // a confined handle leads the description, since a tree item has one icon
    // and renders no $(codicon) in its label or description.
    item.description = describeTool(t, this.model.elapsedNow(t));
    item.tooltip = new vscode.MarkdownString(toolTooltip(t).join('  \n'));
    item.iconPath = statusIcon(t);
    item.contextValue = contextValue(t);
    return item;
  }

  private stepItem(t: ToolView, s: StepView, index: number): vscode.TreeItem {
    const item = new vscode.TreeItem(s.name, vscode.TreeItemCollapsibleState.None);
    item.id = `${t.handleId}/${index}`;
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
