// Issue 35's questions to the user (approval/request), without vscode: the
// capability initialize declares, the notification's text and buttons, the
// answer a click makes, and the queue that shows one question at a time.
// extension.ts shows the notifications; the tests drive the rest.
import type {
  ApprovalOutcome,
  ApprovalRequestParams,
  ApprovalRequestResult,
  ApprovalScope,
  ApprovalsClientCapabilities,
} from './protocol';

/** The buttons of the scopes, in the order they are shown. */
export const SCOPE_BUTTONS: readonly (readonly [ApprovalScope, string])[] = [
  ['once', 'Allow once'],
  ['command', 'Allow for this command'],
  ['session', 'Allow for this session'],
  ['always', 'Always'],
];

/** The deny button; closing the notification denies too. */
export const DENY = 'Deny';

const DENIED: ApprovalRequestResult = { decision: 'deny' };

/**
 * approvalsCapability is initialize's `capabilities.approvals`: `{}` unless
 * the `toolhost.approvals.enabled` setting is false, when the client does
 * not declare it and the server refuses what it would have asked.
 */
export function approvalsCapability(enabled: unknown): ApprovalsClientCapabilities | undefined {
  return enabled === false ? undefined : {};
}

/**
 * approvalsFeature is a static feature of vscode-languageclient
 * (client.registerFeature) that declares `capabilities.approvals` at each
 * initialize, a crash restart's too, as `enabled()` says then.
 */
export function approvalsFeature(enabled: () => unknown) {
  return {
    fillClientCapabilities(capabilities: object): void {
      const approvals = approvalsCapability(enabled());
      if (approvals) (capabilities as { approvals?: ApprovalsClientCapabilities }).approvals = approvals;
    },
    initialize(): void {},
    getState: () => ({ kind: 'static' as const }),
    clear(): void {},
  };
}

/**
 * approvalTimeoutOf is how long the server waits for an answer
 * (capabilities.approvals.timeoutMs of its initialize answer), if it says.
 */
export function approvalTimeoutOf(init: unknown): number | undefined {
  const t = (init as { capabilities?: { approvals?: { timeoutMs?: unknown } } } | undefined)?.capabilities?.approvals?.timeoutMs;
  return typeof t === 'number' && Number.isFinite(t) && t > 0 ? t : undefined;
}

/** approvalButtons are the notification's buttons: the offered scopes' (only those, in SCOPE_BUTTONS' order), then Deny. */
export function approvalButtons(scopes: readonly ApprovalScope[]): string[] {
  return [...SCOPE_BUTTONS.filter(([s]) => scopes.includes(s)).map(([, b]) => b), DENY];
}

/**
 * answerOf is the answer a click makes: an offered scope's button is an
 * allow for that scope; Deny, a closed notification (undefined) or any
 * other text is a deny.
 */
export function answerOf(click: string | undefined, scopes: readonly ApprovalScope[]): ApprovalRequestResult {
  const scope = SCOPE_BUTTONS.find(([s, b]) => b === click && scopes.includes(s))?.[0];
  return scope ? { decision: 'allow', scope } : DENIED;
}

/**
 * askedFor says what an ask would allow: "connect to example.com:443", or
 * for a sandbox wider than the server's, "run with filesystem full, where
 * the server allows workspace-write".
 */
export function askedFor(p: Pick<ApprovalRequestParams, 'kind' | 'target'>): string {
  switch (p.kind) {
    case 'network':
      return `connect to ${p.target}`;
    case 'sandbox':
      return `run with ${p.target}`;
  }
  return `${p.kind as string} ${p.target}`;
}

/**
 * approvalMessage is the notification's text: the command (argv joined, its
 * working directory), what it asks for, exactly what an allow grants, and
 * the agent's reason when it gave one.
 */
export function approvalMessage(p: ApprovalRequestParams): string {
  const why = p.kind === 'network' ? ', which its network allow-list does not name' : '';
  const reason = p.justification ? ` Reason given: ${p.justification}` : '';
  return `Toolhost: "${p.argv.join(' ')}" (in ${p.cwd}) asks to ${askedFor(p)}${why}. Allow it?${reason}`;
}

/** describeApproval is one decision of a command, for the Tools view: "connect to h:80 · allowed once · by you". */
export function describeApproval(o: ApprovalOutcome): string {
  const scope: Record<ApprovalScope, string> = { once: 'once', command: 'for the command', session: 'for the session', always: 'always' };
  const decision = o.decision === 'allow' ? `allowed${o.scope ? ` ${scope[o.scope]}` : ''}` : 'denied';
  return `${askedFor(o)} · ${decision} · ${decidedBy(o.decidedBy)}`;
}

function decidedBy(d: ApprovalOutcome['decidedBy']): string {
  switch (d) {
    case 'user':
      return 'by you';
    case 'timeout':
      return 'no answer in time';
    case 'noClient':
      return 'no client could ask';
    case 'policy':
      return 'by policy';
    case 'grant':
      return 'remembered grant';
  }
}

/** The part of a CancellationToken the queue uses (vscode-jsonrpc's, or a test's). */
export interface CancelToken {
  readonly isCancellationRequested: boolean;
  onCancellationRequested(listener: () => void): { dispose(): void };
}

interface Ask {
  params: ApprovalRequestParams;
  resolve(answer: ApprovalRequestResult): void;
  done: boolean;
  /** Undoes the cancellation listener and the deadline. */
  cleanup: (() => void)[];
}

/**
 * ApprovalQueue puts the server's asks to the user one at a time, in the
 * order they came: show(params) shows one and resolves with the button
 * clicked (undefined when closed); the next is shown once it is answered.
 * An ask the server gives up on (its request cancelled: the server's
 * timeout, the command's end) leaves the queue unseen, or, shown, is
 * answered deny at once so that the next one shows; its later click counts
 * for nothing, as a notification cannot be closed from code.
 */
export class ApprovalQueue {
  private readonly waiting: Ask[] = [];
  private current: Ask | undefined;

  constructor(private readonly show: (params: ApprovalRequestParams) => PromiseLike<string | undefined>) {}

  /** pending is how many asks wait, the one shown included. */
  get pending(): number {
    return this.waiting.length + (this.current ? 1 : 0);
  }

  /**
   * ask resolves with the user's answer to params. token is the request's:
   * its cancellation gives the ask up. timeoutMs, when given, gives it up
   * as well once that long has passed: the server's own timeout
   * (capabilities.approvals.timeoutMs), after which it denies the ask
   * without a $/cancelRequest, so that the queue moves on as the server did.
   */
  ask(params: ApprovalRequestParams, token?: CancelToken, timeoutMs?: number): Promise<ApprovalRequestResult> {
    return new Promise((resolve) => {
      const a: Ask = { params, resolve, done: false, cleanup: [] };
      if (token?.isCancellationRequested) return this.settle(a, DENIED);
      const listener = token?.onCancellationRequested(() => this.settle(a, DENIED));
      if (listener) a.cleanup.push(() => listener.dispose());
      if (timeoutMs !== undefined && timeoutMs > 0) {
        const timer = setTimeout(() => this.settle(a, DENIED), timeoutMs);
        a.cleanup.push(() => clearTimeout(timer));
      }
      this.waiting.push(a);
      this.next();
    });
  }

  /** clear answers every ask deny, shown or not: the connection they came on is gone. */
  clear(): void {
    for (const a of [...this.waiting, ...(this.current ? [this.current] : [])]) this.settle(a, DENIED);
  }

  private next(): void {
    if (this.current) return;
    const a = this.waiting.shift();
    if (!a) return;
    this.current = a;
    let shown: PromiseLike<string | undefined>;
    try {
      shown = this.show(a.params);
    } catch {
      return this.settle(a, DENIED);
    }
    shown.then(
      (click) => this.settle(a, answerOf(click, a.params.scopes)),
      () => this.settle(a, DENIED),
    );
  }

  private settle(a: Ask, answer: ApprovalRequestResult): void {
    if (a.done) return;
    a.done = true;
    for (const undo of a.cleanup) undo();
    a.resolve(answer);
    const i = this.waiting.indexOf(a);
    if (i >= 0) this.waiting.splice(i, 1);
    if (this.current === a) {
      this.current = undefined;
      this.next();
    }
  }
}

/** approvalTooltip is the tooltip of a decision in the Tools view, as Markdown lines. */
export function approvalTooltip(o: ApprovalOutcome): string[] {
  return [
    `**${o.kind}** \`${o.target}\``,
    `decision: ${o.decision}${o.scope ? `, scope: ${o.scope}` : ''}`,
    `decided by: ${o.decidedBy} (${decidedBy(o.decidedBy)})`,
    o.decision === 'allow' && o.scope && o.scope !== 'once' ? 'a remembered grant: the server lists it with `approvals` and drops it with `revokeApproval` (`toolhost approvals list|revoke` from a shell)' : '',
  ].filter(Boolean);
}
