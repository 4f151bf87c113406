/** Linear-interpolated percentile (p in 0..100) of unsorted samples; NaN when there are none. */
export const percentile = (samples: ReadonlyArray<number>, p: number): number => {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
};

export const median = (samples: ReadonlyArray<number>): number => percentile(samples, 50);

export interface Spread {
  readonly n: number;
  readonly median: number;
  readonly p95: number;
  readonly min: number;
  readonly max: number;
}

// A loop, not `Math.min(...samples)`: spreading 150,000 samples (SSE deliveries) overflows the stack.
export const spreadOf = (samples: ReadonlyArray<number>): Spread => ({
  n: samples.length,
  median: median(samples),
  p95: percentile(samples, 95),
  min: samples.length ? samples.reduce((a, b) => Math.min(a, b)) : Number.NaN,
  max: samples.length ? samples.reduce((a, b) => Math.max(a, b)) : Number.NaN,
});

/** Microseconds since `start` (from `process.hrtime.bigint()`). */
export const microsSince = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1000;

/** Rounds to a few significant figures so reports do not pretend to more precision than the noise allows. */
export const round = (value: number, digits = 3): number => {
  if (!Number.isFinite(value) || value === 0) return value;
  const magnitude = Math.floor(Math.log10(Math.abs(value)));
  const factor = 10 ** Math.max(0, digits - 1 - magnitude);
  return Math.round(value * factor) / factor;
};
