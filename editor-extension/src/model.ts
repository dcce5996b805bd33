import { destinationOf, groupByDestination, type Group } from './destinations';
import { describeListener, portOf, Ports } from './ports';
import type {
  DestinationInfo,
  HeartbeatParams,
  LongRunningResult,
  NetworkAllowed,
  NetworkDenied,
  NetworkUse,
  PortClosedParams,
  PortOpenedParams,
  Progress,
  PtySize,
  Sandbox,
  SandboxApplied,
  SandboxCapability,
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
  /** What confinement was applied to the step, from the result. */
  sandbox?: SandboxApplied;
}

/** What the Tools view shows of one handle. */
export interface ToolView {
  handleId: string;
  /**
   * Key names the handle's rows in the Tools view: its handle id with the
   * session that ran it (its sessionId; the number of the server, for a
   * server that names none). A restarted server numbers a new session's
   * handles from h-1 again, and its h-1 is another command than the last
   * session's; a resumed session's handles keep their rows.
   */
  key: string;
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
  /**
   * Asked is the confinement the server said it gives the handle: the
   * request's sandbox over the session's default. Undefined when the server
   * offers none. Once the result is in, its sandbox says what was applied.
   */
  asked?: Sandbox;
  /**
   * Pty says the running step has a pseudo-terminal, as progress last said
   * (or the request, for a command started with one): the Tools view then
   * offers Open Terminal. Cleared once it ended.
   */
  pty?: boolean;
  /** Ports are the TCP ports the handle's process tree listens on now; none once it ended. */
  ports: Ports;
  /**
   * ProgressPath is the handle's progress file (longRunning's
   * progressFile), from `progress` while it runs, then from the result's
   * artifacts; as the server names it (a destination's may be its far path).
   */
  progressPath?: string;
  result?: ToolResult;
  /**
   * Undone says "Undo this command" restored the snapshot taken before it
   * (its result's snapshotId), in this window.
   */
  undone?: boolean;
}

/**
 * ToolsModel keeps every handle of the session, fed by longRunning's answer,
 * the server's notifications and `progress` snapshots, in whatever order they
 * arrive. It knows nothing of VS Code, so it is tested with plain Node.
 */
export class ToolsModel {
  private readonly tools = new Map<string, ToolView>();
  private readonly listeners = new Set<(tool: ToolView | undefined) => void>();
  /** The confinement the running server offers: its handles' default. */
  private sandbox: SandboxCapability | undefined;
  /** The destinations the server offers, as it last said. */
  private dests: DestinationInfo[] = [];
  /** The handles of earlier servers, kept for the view: none of them runs. */
  private readonly retired: ToolView[] = [];
  /** How many servers handed out handles before this one. */
  private generation = 0;
  /** The session the running server serves, as its initialize answered. */
  private sessionId: string | undefined;

  constructor(private readonly now: () => number = Date.now) {}

  /** Calls fn with the tool that changed (undefined: many did). */
  onDidChange(fn: (tool: ToolView | undefined) => void): { dispose(): void } {
    this.listeners.add(fn);
    return { dispose: () => this.listeners.delete(fn) };
  }

  /** list is every handle, this server's and earlier ones', newest first. */
  list(): ToolView[] {
    return [...this.tools.values(), ...this.retired].sort((a, b) => b.startedAt - a.startedAt);
  }

  /** get is this server's handle of that id. */
  get(handleId: string): ToolView | undefined {
    return this.tools.get(handleId);
  }

  running(): ToolView[] {
    return this.list().filter((t) => t.status === 'running');
  }

  /** destinations are the destinations the server offers, as it last said (none: no picker, no groups). */
  destinations(): DestinationInfo[] {
    return this.dests;
  }

  /** setDestinations records what the server said of its destinations (initialize's, or a `destinations` answer). */
  setDestinations(list: DestinationInfo[]): void {
    if (JSON.stringify(list) === JSON.stringify(this.dests)) return;
    this.dests = list;
    this.fire(undefined);
  }

  /**
   * groups are the handles grouped by the destination that runs them, as
   * the Tools view shows them when the server has destinations (or a
   * handle id names one): this machine, then each destination.
   */
  groups(): Group<ToolView>[] {
    return groupByDestination(this.list(), this.dests);
  }

  /** grouped says the Tools view shows groups: the server has destinations, or a handle belongs to one. */
  grouped(): boolean {
    return this.dests.length > 0 || this.list().some((t) => destinationOf(t.handleId) !== '');
  }

  /**
   * portOpened records a port a handle's tree listens on; it says whether
   * the port is new (a repeat, or a port of a handle that already ended, is
   * not), so that it is announced once.
   */
  portOpened(p: PortOpenedParams): { tool: ToolView; fresh: boolean } | undefined {
    if (!p.handleId) return undefined;
    const t = this.ensure(p.handleId, '');
    if (t.result) return { tool: t, fresh: false };
    const fresh = t.ports.opened(portOf(p));
    if (fresh) this.fire(t);
    return { tool: t, fresh };
  }

  /** portClosed records that a port no longer listens. */
  portClosed(p: PortClosedParams): void {
    const t = p.handleId ? this.tools.get(p.handleId) : undefined;
    if (t?.ports.closed(p)) this.fire(t);
  }

  /**
   * Records the confinement a newly started server offers (undefined:
   * none) and the session it serves. The last server's handles are
   * retired: they stay in the view, but the new server's handle ids, which
   * start again, are new handles. A server that serves the same session
   * again (--persist, resumed after a crash of its process) has the same
   * handles: they keep their rows, and those marked lost when the server
   * went are running again until the server says otherwise (progress, or
   * their toolResult). It says whether the session is the one the model
   * had.
   */
  serverStarted(sandbox: SandboxCapability | undefined, sessionId?: string): boolean {
    this.sandbox = sandbox;
    const same = sessionId !== undefined && sessionId === this.sessionId;
    this.sessionId = sessionId;
    if (same) {
      for (const t of this.tools.values()) {
        if (!t.lost) continue;
        t.lost = false;
        t.status = 'running';
      }
      this.fire(undefined);
      return true;
    }
    if (this.tools.size === 0) return false;
    this.serverLost();
    this.retired.push(...this.tools.values());
    this.tools.clear();
    this.generation++;
    this.fire(undefined);
    return false;
  }

  /** Records longRunning's answer to a request that asked for sandbox, and for pty when its argv runs in one. */
  started(r: LongRunningResult, label: string, sandbox?: Sandbox, pty?: PtySize): ToolView {
    const t = this.ensure(r.handleId, r.commandId);
    t.label = label || r.command;
    t.asked = expectedSandbox(this.sandbox, sandbox);
    if (!t.result && pty !== undefined) t.pty = pty !== false;
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
    const known = this.tools.has(r.handleId);
    const t = this.ensure(r.handleId, r.commandId);
    // First known by its result (a resumed session's): it started then.
    if (!known) t.startedAt = Date.parse(r.startedAt) || t.startedAt;
    t.result = r;
    t.lost = false;
    t.status = r.status;
    t.pty = false;
    t.ports.clear();
    if (r.artifacts.progressPath) t.progressPath = r.artifacts.progressPath;
    t.elapsedMs = r.durationMs;
    t.elapsedAt = this.now();
    if (r.steps && r.steps.length > 0) {
      t.steps = r.steps.map((s) => ({ name: s.name, status: s.status, durationMs: s.durationMs, exitCode: s.exitCode, sandbox: s.sandbox }));
      t.totalSteps = r.steps.length;
    }
    this.fire(t);
    return t;
  }

  /** Merges a `progress` snapshot. */
  progress(p: Progress): void {
    const known = this.tools.has(p.handleId);
    const t = this.ensure(p.handleId, p.commandId);
    // The label is the request's, whenever it is learnt: a resumed session's
    // handles may be known first by their result.
    if (p.label && p.label !== t.label) {
      t.label = p.label;
      if (t.result) this.fire(t);
    }
    // First known by a snapshot (a resumed session's): it started elapsedMs ago.
    if (!known) t.startedAt = this.now() - p.elapsedMs;
    if (t.result) return;
    t.status = p.status;
    t.stepName = p.stepName;
    t.currentStep = p.currentStep;
    t.totalSteps = p.totalSteps;
    t.pty = p.status === 'running' && p.pty !== undefined && p.pty !== false;
    t.ports.snapshot(p.status === 'running' ? p.ports : undefined);
    if (p.progressPath) t.progressPath = p.progressPath;
    this.elapsed(t, p.elapsedMs);
    this.fire(t);
  }

  /** undone records that a handle's command was undone (its snapshot restored). */
  undone(t: ToolView): void {
    t.undone = true;
    this.fire(t);
  }

  /** The server went away: its handles will never report again. */
  serverLost(): void {
    for (const t of this.tools.values()) {
      if (t.status === 'running') {
        t.status = 'cancelled';
        t.lost = true;
        t.pty = false;
      }
      t.ports.clear();
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
    if (t && !t.commandId) t.commandId = commandId; // first seen in a notification that names no command
    if (!t) {
      const now = this.now();
      t = {
        handleId,
        key: `${this.sessionId ?? this.generation}:${handleId}`,
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
        ports: new Ports(),
        asked: expectedSandbox(this.sandbox, undefined),
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
  if (r.status === 'lost') return 'lost (destination unreachable)';
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

/**
 * expectedSandbox is the confinement a command gets from a server that offers
 * capability when it asks for request: each field the request gives, else the
 * session's default. Undefined when the server cannot confine (unavailable,
 * or --sandbox off): the view then promises nothing before the result.
 */
export function expectedSandbox(capability: SandboxCapability | undefined, request: Sandbox | undefined): Sandbox | undefined {
  if (!capability?.available) return undefined;
  const s: Sandbox = { ...capability.default };
  if (request?.filesystem !== undefined) s.filesystem = request.filesystem;
  if (request?.network !== undefined) s.network = request.network;
  return s;
}

/**
 * allowListOf is the network allow-list of a sandbox, asked (`network:
 * {allow}`) or applied (`networkAllow`, with the network reached only
 * through toolhost's proxy); undefined when the network is on or off.
 */
export function allowListOf(s: Sandbox | SandboxApplied): string[] | undefined {
  if (typeof s.network === 'object' && s.network !== null) return s.network.allow ?? [];
  if ('networkAllow' in s && s.networkAllow && s.network !== false) return s.networkAllow;
  return undefined;
}

/**
 * isConfined says a sandbox keeps a command from writing everywhere or from
 * the network: its filesystem is not full, or its network is off or an
 * allow-list.
 */
export function isConfined(s: Sandbox | SandboxApplied | undefined): boolean {
  if (s === undefined) return false;
  return (s.filesystem !== undefined && s.filesystem !== 'full') || s.network === false || allowListOf(s) !== undefined;
}

/**
 * describeSandbox says a sandbox in the words of the settings: "filesystem
 * read-only, network off", "filesystem workspace-write, network allow-list:
 * proxy.golang.org, *.npmjs.org".
 */
export function describeSandbox(s: Sandbox | SandboxApplied): string {
  const allow = allowListOf(s);
  const network = allow ? `allow-list: ${allow.length > 0 ? allow.join(', ') : 'empty (no host)'}` : s.network === false ? 'off' : 'on';
  return `filesystem ${s.filesystem ?? 'full'}, network ${network}`;
}

/**
 * describeCapability says, for the log, how the server confines commands
 * that ask for nothing: "commands are confined by default: filesystem
 * workspace-write, network allow-list: 127.0.0.1:8080", or why not.
 */
export function describeCapability(c: SandboxCapability | undefined): string {
  if (!c) return 'it offers no confinement of commands';
  if (!c.available) return `commands are not confined${c.reason ? ` (${c.reason})` : ''}`;
  return `commands ${isConfined(c.default) ? 'are confined' : 'run unconfined'} by default: ${describeSandbox(c.default)}`;
}

/** Confinement is what the Tools view shows of a sandbox: the confined marker or none, and lines for the tooltip. */
export interface Confinement {
  locked: boolean;
  lines: string[];
}

/**
 * CONFINED is what the Tools view puts before the description of a
 * confined handle or step: a word, which every machine draws (an emoji lock
 * draws as an empty box where the system has no emoji font), in a
 * description, where VS Code renders no $(codicon). The item's icon keeps
 * saying the status.
 */
export const CONFINED = 'confined';

/** appliedConfinement says what was applied to one command: the lock, what enforced it and what it could not. */
export function appliedConfinement(a: SandboxApplied | undefined): Confinement {
  if (!a) return { locked: false, lines: ['not confined: the server applied no sandbox'] };
  const locked = isConfined(a);
  const lines = [`${locked ? 'confined' : 'not confined'}: ${describeSandbox(a)}`, `enforced by: ${a.enforcedBy ? `\`${a.enforcedBy}\`` : 'nothing'}`];
  const limits = Object.entries(a.limits ?? {}).map(([limit, how]) => `${limit} (${how})`);
  if (limits.length > 0) lines.push(`limits: ${limits.join(', ')}`);
  if (a.protect && a.protect.length > 0) lines.push(`protected (read-only): ${a.protect.map((p) => `\`${p}\``).join(', ')}`);
  if (a.denyRead && a.denyRead.length > 0) lines.push(`unreadable: ${a.denyRead.map((p) => `\`${p}\``).join(', ')}`);
  for (const s of a.notEnforced ?? []) lines.push(`not enforced: ${s}`);
  return { locked, lines };
}

/**
 * confinementOf is what the Tools view shows of a handle's sandbox. Once it
 * ended, what was applied: the result's, or, for a recipe whose steps were
 * confined differently, locked only when every step that ran was confined.
 * Before, what the server said it would apply, marked as asked; a handle
 * lost with its server keeps that, as nothing more will be known.
 */
export function confinementOf(t: ToolView): Confinement {
  const r = t.result;
  if (r) {
    const applied = (r.steps ?? []).flatMap((s) => (s.sandbox ? [s.sandbox] : []));
    const first = applied[0] ? JSON.stringify(applied[0]) : '';
    if (applied.some((a) => JSON.stringify(a) !== first)) {
      const locked = applied.every(isConfined);
      return { locked, lines: [`${locked ? 'confined' : 'not every step confined'}: each step has its own sandbox (see the steps)`] };
    }
    return appliedConfinement(r.sandbox ?? applied[0]);
  }
  if (!t.asked) return { locked: false, lines: [] };
  const locked = isConfined(t.asked);
  const then = t.lost ? 'the server went away before saying what was applied' : 'what was applied is known when it ends';
  return { locked, lines: [`${locked ? 'confined' : 'not confined'} (asked): ${describeSandbox(t.asked)}; ${then}`] };
}

/** describeTool is the description of a handle in the Tools view: "confined · running · 3.2s · step 2/3: build". */
export function describeTool(t: ToolView, elapsedMs: number): string {
  const parts = [describeStatus(t), formatDuration(elapsedMs)];
  if (t.status === 'running' && describeStep(t)) parts.push(describeStep(t));
  if (confinementOf(t).locked) parts.unshift(CONFINED);
  return parts.join(' · ');
}

/** hostPort writes a host and port as a URL would: "example.com:443", "[::1]:8080". */
export function hostPort(host: string, port: number): string {
  return `${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
}

/** formatBytes is a byte count in words: "512 B", "1.5 KiB", "20.0 MiB". */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/** refusedHosts are the hosts the proxy refused a handle, from its result's network: none before it ends. */
export function refusedHosts(t: Pick<ToolView, 'result'>): NetworkDenied[] {
  return t.result?.network?.denied ?? [];
}

/** describeRefused is a refused host's row under its handle: "Refused: example.com:443 (2×)". */
export function describeRefused(d: NetworkDenied): string {
  return `Refused: ${hostPort(d.host, d.port)} (${d.attempts}×)`;
}

/** describeAllowed says a host the proxy let through: "registry.npmjs.org:443 (3 connections, 1.2 KiB out, 20.0 MiB in)". */
export function describeAllowed(a: NetworkAllowed): string {
  const n = `${a.connections} connection${a.connections === 1 ? '' : 's'}`;
  return `${hostPort(a.host, a.port)} (${n}, ${formatBytes(a.bytesOut)} out, ${formatBytes(a.bytesIn)} in)`;
}

/**
 * networkLines say, for the tooltip, what a command under an allow-list did
 * with the network: each host let through, each refused; nothing for a
 * command without an allow-list (no `network` in its result).
 */
export function networkLines(use: NetworkUse | undefined): string[] {
  if (!use) return [];
  const allowed = use.allowed ?? [];
  const denied = use.denied ?? [];
  if (allowed.length === 0 && denied.length === 0) return ['network: no connection through the allow-list'];
  return [
    ...allowed.map((a) => `allowed: ${describeAllowed(a)}`),
    ...denied.map((d) => `refused: ${hostPort(d.host, d.port)} (${d.attempts} attempt${d.attempts === 1 ? '' : 's'}), not in the allow-list`),
  ];
}

/** toolTooltip is the tooltip of a handle in the Tools view, as Markdown lines. */
export function toolTooltip(t: ToolView): string[] {
  return [
    `**${t.label}**`,
    `status: ${describeStatus(t)}`,
    describeStep(t) && `current: ${describeStep(t)}`,
    `handle: \`${t.handleId}\``,
    `command: \`${t.commandId}\``,
    t.result && `output: \`${t.result.artifacts.outputPath}\``,
    t.progressPath && `progress file: \`${t.progressPath}\``,
    ...t.ports.list().map((p) => `listening: ${describeListener(p)}`),
    ...confinementOf(t).lines,
    ...networkLines(t.result?.network),
    t.result?.snapshotId && `snapshot before it: \`${t.result.snapshotId}\`${t.undone ? ' (undone)' : ''}`,
  ].filter((l): l is string => Boolean(l));
}

/** describeStepView is the description of a step in the Tools view: "confined · fail · exit 2 · 1.5s". */
export function describeStepView(s: StepView): string {
  const parts: string[] = [s.status];
  if (s.exitCode !== undefined && s.exitCode !== null && s.exitCode !== 0) parts.push(`exit ${s.exitCode}`);
  if (s.durationMs !== undefined) parts.push(formatDuration(s.durationMs));
  if (isConfined(s.sandbox)) parts.unshift(CONFINED);
  return parts.join(' · ');
}

/**
 * contextValue is what the menus of a handle's item match on:
 * "toolhost.running" (Cancel), "toolhost.running.pty" (Cancel and Open
 * Terminal), "toolhost.done.snapshot" (ended, run with a snapshot: Undo
 * this command) or "toolhost.done"; all offer Open Output.
 */
export function contextValue(t: Pick<ToolView, 'status' | 'pty' | 'lost'> & { result?: Pick<ToolResult, 'snapshotId'> }): string {
  if (t.status !== 'running' || t.lost) return t.result?.snapshotId ? 'toolhost.done.snapshot' : 'toolhost.done';
  return t.pty ? 'toolhost.running.pty' : 'toolhost.running';
}
