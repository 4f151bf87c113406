/**
 * DESIGN §9: keep the last 100 finished runs, or 30 days. (A module of its own, with no imports: the
 * CLI's help shows these defaults without loading the engine.)
 */
export const DEFAULT_RETENTION: { readonly keepRuns: number; readonly keepDays: number } = {
  keepRuns: 100,
  keepDays: 30,
};
