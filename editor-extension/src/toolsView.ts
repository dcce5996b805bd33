import * as vscode from 'vscode';
import { describeStatus, describeStep, formatDuration, StepView, ToolsModel, ToolView } from './model';

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
    const parts = [describeStatus(t), formatDuration(this.model.elapsedNow(t))];
    if (t.status === 'running' && describeStep(t)) parts.push(describeStep(t));
    item.description = parts.join(' · ');
    item.tooltip = new vscode.MarkdownString(
      [
        `**${t.label}**`,
        `status: ${describeStatus(t)}`,
        describeStep(t) && `current: ${describeStep(t)}`,
        `handle: \`${t.handleId}\``,
        `command: \`${t.commandId}\``,
        t.result && `output: \`${t.result.artifacts.outputPath}\``,
      ]
        .filter(Boolean)
        .join('  \n'),
    );
    item.iconPath = statusIcon(t);
    item.contextValue = t.status === 'running' ? 'toolhost.running' : 'toolhost.done';
    return item;
  }

  private stepItem(t: ToolView, s: StepView, index: number): vscode.TreeItem {
    const item = new vscode.TreeItem(s.name, vscode.TreeItemCollapsibleState.None);
    item.id = `${t.handleId}/${index}`;
    const parts: string[] = [s.status];
    if (s.exitCode !== undefined && s.exitCode !== null && s.exitCode !== 0) parts.push(`exit ${s.exitCode}`);
    if (s.durationMs !== undefined) parts.push(formatDuration(s.durationMs));
    item.description = parts.join(' · ');
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
