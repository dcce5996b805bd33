import type {
  HeartbeatParams,
  LongRunningResult,
  Progress,
  Status,
  StepStatus,
  StepTransitionParams,
  ToolResult,
} from './protocol';

/** What the Tools view shows of one step. */
export interface StepView {
  name: string;
  status: StepStatus;
  durationMs?: number;
  exitCode?: number | null;
}

/** What the Tools view shows of one handle. */
export interface ToolView {
  handleId: string;
  commandId: string;
  label: string;
  status: Status;
  /** Set when the server went away while the handle ran. */
  lost?: boolean;
  startedAt: number; // ms since the epoch
  elapsedMs: number;
  /** When elapsedMs was last reported, to extrapolate while running. */
  elapsedAt: number;
  stepName: string;
  currentStep: number;
  totalSteps: number;
  steps: StepView[];
  result?: ToolResult;
}

/**
 * ToolsModel keeps every handle of the session, fed by longRunning's answer,
 * the server's notifications and `progress` snapshots, in whatever order they
 * arrive. It knows nothing of VS Code, so it is tested with plain Node.
 */
export class ToolsModel {
  private readonly tools = new Map<string, ToolView>();
  private readonly listeners = new Set<(tool: ToolView | undefined) => void>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Calls fn with the tool that changed (undefined: many did). */
  onDidChange(fn: (tool: ToolView | undefined) => void): { dispose(): void } {
    this.listeners.add(fn);
    return { dispose: () => this.listeners.delete(fn) };
  }

  list(): ToolView[] {
    return [...this.tools.values()].sort((a, b) => b.startedAt - a.startedAt);
  }

  get(handleId: string): ToolView | undefined {
    return this.tools.get(handleId);
  }

  running(): ToolView[] {
    return this.list().filter((t) => t.status === 'running');
  }

  started(r: LongRunningResult, label: string): ToolView {
    const t = this.ensure(r.handleId, r.commandId);
    t.label = label || r.command;
    t.startedAt = Date.parse(r.startedAt) || t.startedAt;
    this.fire(t);
    return t;
  }

  stepTransition(p: StepTransitionParams): void {
    if (!p.handleId) return;
    const t = this.ensure(p.handleId, p.commandId);
    if (t.result) return; // late: the final result already says it all
    t.stepName = p.step;
    t.currentStep = p.index;
    if (p.total > 0) t.totalSteps = p.total;
    this.elapsed(t, p.elapsedMs);
    const existing = t.steps.find((s) => s.name === p.step);
    const status: StepStatus = p.status === 'start' ? 'running' : p.status;
    if (existing) existing.status = status;
    else t.steps.push({ name: p.step, status });
    this.fire(t);
  }

  heartbeat(p: HeartbeatParams): void {
    if (!p.handleId) return;
    const t = this.ensure(p.handleId, p.commandId);
    if (t.result) return;
    if (p.step) t.stepName = p.step;
    this.elapsed(t, p.elapsedMs);
    this.fire(t);
  }

  toolResult(r: ToolResult): ToolView | undefined {
    if (!r.handleId) return undefined;
    const t = this.ensure(r.handleId, r.commandId);
    t.result = r;
    t.status = r.status;
    t.elapsedMs = r.durationMs;
    t.elapsedAt = this.now();
    if (r.steps && r.steps.length > 0) {
      t.steps = r.steps.map((s) => ({ name: s.name, status: s.status, durationMs: s.durationMs, exitCode: s.exitCode }));
      t.totalSteps = r.steps.length;
    }
    this.fire(t);
    return t;
  }

  /** Merges a `progress` snapshot. */
  progress(p: Progress): void {
    const t = this.ensure(p.handleId, p.commandId);
    if (t.result) return;
    if (p.label) t.label = p.label;
    t.status = p.status;
    t.stepName = p.stepName;
    t.currentStep = p.currentStep;
    t.totalSteps = p.totalSteps;
    this.elapsed(t, p.elapsedMs);
    this.fire(t);
  }

  /** The server went away: its handles will never report again. */
  serverLost(): void {
    for (const t of this.tools.values()) {
      if (t.status === 'running') {
        t.status = 'cancelled';
        t.lost = true;
      }
    }
    this.fire(undefined);
  }

  /** Elapsed time now: extrapolated while running. */
  elapsedNow(t: ToolView): number {
    return t.status === 'running' ? t.elapsedMs + Math.max(0, this.now() - t.elapsedAt) : t.elapsedMs;
  }

  private elapsed(t: ToolView, ms: number): void {
    t.elapsedMs = ms;
    t.elapsedAt = this.now();
  }

  private ensure(handleId: string, commandId: string): ToolView {
    let t = this.tools.get(handleId);
    if (!t) {
      const now = this.now();
      t = {
        handleId,
        commandId,
        label: handleId,
        status: 'running',
        startedAt: now,
        elapsedMs: 0,
        elapsedAt: now,
        stepName: '',
        currentStep: 0,
        totalSteps: 0,
        steps: [],
      };
      this.tools.set(handleId, t);
    }
    return t;
  }

  private fire(t: ToolView | undefined): void {
    for (const fn of this.listeners) fn(t);
  }
}

/** "1.2s", "45s", "3m 05s", "1h 02m". */
export function formatDuration(ms: number): string {
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

/** The step part of a description: "step 2/3: build". */
export function describeStep(t: Pick<ToolView, 'stepName' | 'currentStep' | 'totalSteps'>): string {
  if (!t.stepName) return '';
  const of = t.totalSteps > 0 ? `${t.currentStep}/${t.totalSteps}` : `${t.currentStep}`;
  return t.currentStep > 0 ? `step ${of}: ${t.stepName}` : t.stepName;
}

/** The status word the view shows: "running", "completed", "failed (exit 2)", … */
export function describeStatus(t: ToolView): string {
  if (t.lost) return 'lost (server restarted)';
  const r = t.result;
  if (!r) return t.status;
  if (r.success) return 'completed';
  if (r.status === 'completed') return r.exitCode !== null ? `failed (exit ${r.exitCode})` : `failed (${r.signal ?? 'signal'})`;
  return r.status === 'timedOut' ? 'timed out' : 'cancelled';
}

/** One line for the output channel. */
export function summarizeResult(label: string, r: ToolResult): string {
  const how = r.success
    ? 'completed'
    : r.status === 'completed'
      ? `failed with ${r.exitCode !== null ? `exit code ${r.exitCode}` : (r.signal ?? 'a signal')}`
      : r.status;
  return `${label}: ${how} in ${formatDuration(r.durationMs)} (handle ${r.handleId ?? '-'}, command ${r.commandId})`;
}
