/**
 * DESIGN §9: keep the last 100 finished runs, or 30 days. (A module of its own, with no imports: the
 * CLI's help shows these defaults without loading the engine.)
 */
export const DEFAULT_RETENTION: { readonly keepRuns: number; readonly keepDays: number } = {
  keepRuns: 100,
  keepDays: 30,
};

/**
 * Runs a prune removes per transaction: each batch takes the append lock and lets it go, so
 * renewals and appends wait for one batch, never for the whole prune (docs/decisions/0040).
 */
export const DEFAULT_PRUNE_BATCH = 50;

/**
 * Events a prune batch removes at most (a run that alone has more goes in a batch of its own): the
 * time a batch holds the lock grows with its events, and runs differ a lot in size.
 */
export const PRUNE_BATCH_EVENTS = 500;
