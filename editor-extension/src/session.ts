import type { InitializationOptions, ResumeOptions } from './protocol';
import { CodeSessionNotFound } from './protocol';

/**
 * What the extension keeps of its session in the workspace state, so that
 * the next window (after "Developer: Reload Window", a crash of the
 * extension host) resumes it: the session's id, the seq of the last
 * toolResult it has (see SeqTracker), and the root it was started for.
 */
export interface SessionState {
  sessionId: string;
  lastSeq: number;
  root: string;
}

/** The workspace state's key of the SessionState. */
export const SESSION_KEY = 'toolhost.session';

/** The part of vscode.Memento (context.workspaceState) the store uses. */
export interface Memento {
  get<T>(key: string): T | undefined;
  update(key: string, value: unknown): Thenable<void>;
}

/** readSessionState checks a stored value; anything else than a SessionState is none. */
export function readSessionState(v: unknown): SessionState | undefined {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const { sessionId, lastSeq, root } = v as Record<string, unknown>;
  if (typeof sessionId !== 'string' || sessionId === '' || typeof root !== 'string') return undefined;
  if (typeof lastSeq !== 'number' || !Number.isSafeInteger(lastSeq) || lastSeq < 0) return undefined;
  return { sessionId, lastSeq, root };
}

/**
 * resumeOptions are initialize's `resume` for a stored state: its session
 * and the last seq it has. None when persisting is off, nothing is stored,
 * or the state is another root's (the first workspace folder changed): the
 * server would not have it for this root.
 */
export function resumeOptions(state: SessionState | undefined, root: string, persist: boolean): ResumeOptions | undefined {
  if (!persist || !state || state.root !== root) return undefined;
  return { sessionId: state.sessionId, lastSeq: state.lastSeq };
}

/** withResume is initializationOptions with `resume` when there is one to send. */
export function withResume(options: InitializationOptions, resume: ResumeOptions | undefined): InitializationOptions {
  return resume ? { ...options, resume } : options;
}

/**
 * sessionNotFound reads a -32030 SessionNotFound error ({sessionId,
 * reason} in its data); undefined for any other error. It reads the error's
 * shape, not its class, so that it works with any copy of vscode-jsonrpc.
 */
export function sessionNotFound(e: unknown): { sessionId: string; reason: string } | undefined {
  if (typeof e !== 'object' || e === null) return undefined;
  const { code, data } = e as { code?: unknown; data?: unknown };
  if (code !== CodeSessionNotFound) return undefined;
  const d = (typeof data === 'object' && data !== null ? data : {}) as { sessionId?: unknown; reason?: unknown };
  return { sessionId: typeof d.sessionId === 'string' ? d.sessionId : '', reason: typeof d.reason === 'string' ? d.reason : 'unknown' };
}

/** sessionIdOf is the sessionId of an initialize answer, if it has one. */
export function sessionIdOf(init: unknown): string | undefined {
  if (typeof init !== 'object' || init === null) return undefined;
  const id = (init as { sessionId?: unknown }).sessionId;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/**
 * SeqTracker follows the seq of a session's toolResults. lastSeq is the
 * highest seq below which every one has been received: the `lastSeq` a
 * resume sends, so that the server sends again whatever is missing, even
 * one between two received (a result in flight when the window went).
 * Results come in order on one connection, so a gap is rare; a seq at or
 * under lastSeq, or received before, is a repeat.
 */
export class SeqTracker {
  private last: number;
  /** Seqs received above last+1, waiting for the gap below them to fill. */
  private readonly above = new Set<number>();

  constructor(lastSeq = 0) {
    this.last = lastSeq;
  }

  get lastSeq(): number {
    return this.last;
  }

  /** receive records a toolResult's seq; false when it was had before. One without seq is new. */
  receive(seq: number | undefined): boolean {
    if (seq === undefined) return true;
    if (seq <= this.last || this.above.has(seq)) return false;
    this.above.add(seq);
    while (this.above.delete(this.last + 1)) this.last++;
    return true;
  }
}

/**
 * SessionStore keeps the session's state in the workspace state: the id
 * once initialize answers, the last seq as toolResults come. A session the
 * server no longer has, or one ended on purpose (a restart of the server),
 * is cleared, so that the next start begins a new one.
 */
export class SessionStore {
  private seqs: SeqTracker;
  private current: SessionState | undefined;

  constructor(private readonly memento: Memento) {
    this.current = readSessionState(memento.get(SESSION_KEY));
    this.seqs = new SeqTracker(this.current?.lastSeq ?? 0);
  }

  /** state is what is stored now. */
  get state(): SessionState | undefined {
    return this.current;
  }

  /** resume is what initialize sends to resume the stored session, if any (see resumeOptions). */
  resume(root: string, persist: boolean): ResumeOptions | undefined {
    return resumeOptions(this.current, root, persist);
  }

  /**
   * started records the session an initialize answered. The one resumed
   * (the id sent in resume) goes on from the lastSeq sent; another is new
   * and starts from 0. It says whether it was the one resumed.
   */
  started(sessionId: string, root: string, resumed: ResumeOptions | undefined): boolean {
    const same = resumed !== undefined && resumed.sessionId === sessionId;
    // The session resumed goes on from what was received (what resume sent is
    // its lastSeq); another starts from nothing.
    if (!same) this.seqs = new SeqTracker(0);
    else if (this.current?.sessionId !== sessionId) this.seqs = new SeqTracker(resumed.lastSeq ?? 0);
    this.save({ sessionId, lastSeq: this.seqs.lastSeq, root });
    return same;
  }

  /** received records a toolResult's seq; false when it is a repeat. */
  received(seq: number | undefined): boolean {
    const fresh = this.seqs.receive(seq);
    if (fresh && this.current && this.current.lastSeq !== this.seqs.lastSeq) this.save({ ...this.current, lastSeq: this.seqs.lastSeq });
    return fresh;
  }

  /**
   * failed takes an initialize error: when it is -32030 SessionNotFound
   * for the resume sent, the session is forgotten and the caller starts a
   * new one (the user needs no word about it); it answers what the server
   * said of the session. Undefined for any other error, or when no resume
   * was sent: that failure is the user's to see.
   */
  failed(error: unknown, sent: ResumeOptions | undefined): { sessionId: string; reason: string } | undefined {
    const gone = sent ? sessionNotFound(error) : undefined;
    if (!gone) return undefined;
    this.clear();
    return { sessionId: gone.sessionId || sent!.sessionId, reason: gone.reason };
  }

  /** clear forgets the session: the next start begins a new one. */
  clear(): void {
    this.current = undefined;
    this.seqs = new SeqTracker();
    void this.memento.update(SESSION_KEY, undefined);
  }

  private save(s: SessionState): void {
    this.current = s;
    void this.memento.update(SESSION_KEY, s);
  }
}

/**
 * resumeCapability says an initialize answer's session outlives its
 * connection (capabilities.resume: the server runs with --persist): only
 * then may the extension leave it without shutdown for the next window.
 */
export function resumeCapability(init: unknown): boolean {
  if (typeof init !== 'object' || init === null) return false;
  const caps = (init as { capabilities?: unknown }).capabilities;
  return typeof caps === 'object' && caps !== null && (caps as { resume?: unknown }).resume === true;
}
