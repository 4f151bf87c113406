/**
 * A counting semaphore: at most `limit` tasks at once, started in arrival order. With a `budget`,
 * the weights of the tasks running together stay within it too (a task heavier than the budget
 * runs alone).
 */
export class Limiter {
  private active = 0;
  private used = 0;
  private peakActive = 0;
  private peakUsed = 0;
  private readonly waiting: Array<{ readonly weight: number; readonly go: () => void }> = [];
  constructor(
    private readonly limit: number,
    private readonly budget = Number.POSITIVE_INFINITY,
  ) {
    if (!Number.isSafeInteger(limit) || limit < 1)
      throw new RangeError(`a limiter runs at least one task at once (limit ${limit})`);
    if (Number.isNaN(budget) || budget < 0)
      throw new RangeError(`a limiter's budget is at least 0 (${budget})`);
  }

  /** The most tasks ever running at once (observed, for tests and reports). */
  get peak(): number {
    return this.peakActive;
  }

  /** The largest sum of weights ever running at once. */
  get peakWeight(): number {
    return this.peakUsed;
  }

  async run<T>(fn: () => Promise<T>, weight = 0): Promise<T> {
    if (!Number.isFinite(weight) || weight < 0)
      throw new RangeError(`a task's weight is a finite number of at least 0 (${weight})`);
    // Behind anyone waiting: arrival order is start order.
    if (this.waiting.length > 0 || !this.fits(weight))
      await new Promise<void>((go) => this.waiting.push({ weight, go }));
    else this.take(weight);
    try {
      return await fn();
    } finally {
      this.active--;
      this.used -= weight;
      // Whoever is woken has its place taken here, so no arrival slips in before it.
      while (this.waiting.length > 0 && this.fits(this.waiting[0]!.weight)) {
        const next = this.waiting.shift()!;
        this.take(next.weight);
        next.go();
      }
    }
  }

  private fits(weight: number): boolean {
    return this.active < this.limit && (this.active === 0 || this.used + weight <= this.budget);
  }

  private take(weight: number): void {
    this.active++;
    this.used += weight;
    this.peakActive = Math.max(this.peakActive, this.active);
    this.peakUsed = Math.max(this.peakUsed, this.used);
  }
}
