import type { Journal, RuntimeAnnouncement } from "./Journal.js";

/**
 * This runtime's row in the runtime registry (decision 0053): announced when it opens, renewed as
 * often as a lease, removed when it closes. A runtime that dies leaves its row to run out: readers
 * then know no runtime with those agents is live, and when it was last seen.
 */
export class Presence {
  private timer: ReturnType<typeof setInterval> | undefined;
  private beating: Promise<void> | null = null;

  constructor(
    private readonly journal: Journal,
    private readonly announcement: RuntimeAnnouncement,
    private readonly ttlMs: number,
  ) {}

  /** Announce now (the promise settles once the row is committed), then renew every quarter lease. */
  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => void this.beat(), Math.max(50, Math.floor(this.ttlMs / 4)));
    this.timer.unref?.();
  }

  private beat(): Promise<void> {
    if (this.beating) return this.beating;
    this.beating = this.journal
      .announceRuntime(this.announcement, this.ttlMs)
      // A failed heartbeat renews nothing; the row runs out on its own if the failures last.
      .catch(() => undefined)
      .finally(() => {
        this.beating = null;
      });
    return this.beating;
  }

  /** Stop renewing and remove the row. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.beating;
    await this.journal.withdrawRuntime(this.announcement.workerId).catch(() => undefined);
  }
}
