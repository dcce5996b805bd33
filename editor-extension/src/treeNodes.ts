// The rows of the Tools view as data: which node has which children. Kept
// apart from toolsView.ts (which draws them with vscode) so that the node
// tests check them.
import type { Group } from './destinations';
import { refusedHosts, type StepView, type ToolView } from './model';
import type { ApprovalOutcome, Change, NetworkDenied, Port } from './protocol';
import { hasSnapshot } from './snapshots';

/**
 * A node of the Tools view: a destination's group (when the server has
 * destinations), a handle, one of its steps, one of the ports it listens
 * on, its progress file, a host its network allow-list refused it, one
 * of its asks to the user and how it was decided (issue 35), the
 * "Changes (n)" row of a command run with a snapshot, or one changed path.
 */
export type Node =
  | { kind: 'group'; group: Group<ToolView> }
  | { kind: 'tool'; tool: ToolView }
  | { kind: 'step'; tool: ToolView; step: StepView; index: number }
  | { kind: 'port'; tool: ToolView; port: Port }
  | { kind: 'progressFile'; tool: ToolView; path: string }
  | { kind: 'refused'; tool: ToolView; denied: NetworkDenied }
  | { kind: 'approval'; tool: ToolView; outcome: ApprovalOutcome; index: number }
  | { kind: 'changes'; tool: ToolView }
  | { kind: 'change'; tool: ToolView; change: Change };

/**
 * toolChildren are a handle's rows: its progress file, the ports it listens
 * on, the hosts its allow-list refused it (once it ended), the decisions
 * of its asks (approval/request, once it ended), what it changed
 * (once it ended, when it ran with a snapshot), then its steps.
 */
export function toolChildren(tool: ToolView): Node[] {
  const nodes: Node[] = [];
  if (tool.progressPath) nodes.push({ kind: 'progressFile', tool, path: tool.progressPath });
  for (const port of tool.ports.list()) nodes.push({ kind: 'port', tool, port });
  for (const denied of refusedHosts(tool)) nodes.push({ kind: 'refused', tool, denied });
  tool.result?.approvals?.forEach((outcome, index) => nodes.push({ kind: 'approval', tool, outcome, index }));
  if (hasSnapshot(tool.result)) nodes.push({ kind: 'changes', tool });
  tool.steps.forEach((step, index) => nodes.push({ kind: 'step', tool, step, index }));
  return nodes;
}

/** changeChildren are the rows under "Changes (n)": each changed path, in the server's order (by path). */
export function changeChildren(tool: ToolView): Node[] {
  return (tool.result?.changes ?? []).map((change) => ({ kind: 'change', tool, change }));
}

/** EXPAND_CHANGES is how many changed paths at most a "Changes (n)" row shows at once; a longer list starts collapsed. */
export const EXPAND_CHANGES = 20;
