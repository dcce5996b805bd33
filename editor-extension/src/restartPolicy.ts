/**
 * RestartPolicy bounds how often a crashing server is restarted: at most
 * `max` restarts within `windowMs`; past that the user is told and the
 * server stays down until they restart it.
 */
export class RestartPolicy {
  private crashes: number[] = [];

  constructor(
    readonly max = 3,
    readonly windowMs = 3 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records a crash; true when the server should be restarted. */
  crashed(): boolean {
    const t = this.now();
    this.crashes = this.crashes.filter((c) => t - c < this.windowMs);
    this.crashes.push(t);
    return this.crashes.length <= this.max;
  }

  /** How many crashes count now. */
  get recent(): number {
    return this.crashes.length;
  }

  /** A manual restart starts afresh. */
  reset(): void {
    this.crashes = [];
  }
}
