/**
 * One measured figure. `ratio` compares it with its baseline measured in the same process run
 * (the floor, or the same recovery without filler), because absolute figures on a shared machine
 * say little. `pass` is null when the metric has no target or was not measured.
 */
export interface Metric {
  readonly name: string;
  readonly value: number | null;
  readonly unit: string;
  readonly ratio: number | null;
  /** The target in words, applied to `ratio` (e.g. "ratio <= 2.5"); null for context figures. */
  readonly target: string | null;
  readonly pass: boolean | null;
  /** The spread behind a median: how many samples, their p95, min and max. */
  readonly spread?: { readonly n: number; readonly p95: number; readonly min: number; readonly max: number };
  /** Why the figure is what it is, or why it is missing ("skipped: …"). */
  readonly note?: string;
}

export type Comparison = "<=" | ">=";

/** A metric with a target on its ratio (or, for absolute budgets, on its value). */
export const targeted = (
  fields: Omit<Metric, "target" | "pass" | "ratio"> & { readonly ratio: number | null },
  comparison: Comparison,
  limit: number,
  subject: "ratio" | "value" = "ratio",
): Metric => {
  const measured = subject === "ratio" ? fields.ratio : fields.value;
  const pass =
    measured !== null && Number.isFinite(measured)
      ? comparison === "<="
        ? measured <= limit
        : measured >= limit
      : false;
  return { ...fields, target: `${subject} ${comparison} ${limit}`, pass };
};

/** A context figure: no target. */
export const figure = (
  fields: Omit<Metric, "target" | "pass" | "ratio"> & { readonly ratio?: number },
): Metric => ({
  ...fields,
  ratio: fields.ratio ?? null,
  target: null,
  pass: null,
});

/**
 * A metric that could not be measured in this run, kept visible in every output so a missing
 * figure is never mistaken for a passing one.
 */
export const skipped = (name: string, unit: string, target: string | null, why: string): Metric => ({
  name,
  value: null,
  unit,
  ratio: null,
  target,
  pass: null,
  note: `skipped: ${why}`,
});
