/** A counting semaphore: at most `limit` tasks at once, started in arrival order. */
export class Limiter {
  private active = 0;
  private peakActive = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly limit: number) {}

  /** The most tasks ever running at once (observed, for tests and reports). */
  get peak(): number {
    return this.peakActive;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.waiting.push(r));
    this.active++;
    this.peakActive = Math.max(this.peakActive, this.active);
    try {
      return await fn();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}
