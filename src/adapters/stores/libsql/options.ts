export interface LibsqlJournalOptions {
  /** Create the parent folder when missing (used for the default `.holdfast/` location). */
  readonly createFolder?: boolean;
  /**
   * Milliseconds `open()` waits inside SQLite for another process's lock (opening migrates, which
   * takes the write lock). Default 5000. After `open()` SQLite never waits: see `lockWaitMs`.
   */
  readonly busyTimeoutMs?: number;
  /**
   * How long a write (append, claim, renewal, release, prune, rebuild) waits for another
   * process's write lock before failing with `JournalUnavailable`. It waits by retrying on timers,
   * so the event loop (heartbeats included) runs meanwhile. Default 60 000.
   */
  readonly lockWaitMs?: number;
  /** Called inside the group commit, between the batch's writes and COMMIT (crash tests). */
  readonly onBeforeCommit?: () => void;
  /** Where the payload keys are read from (default `process.env`); see src/adapters/keys.ts. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /**
   * Check at open that the keys read this journal (default true). Only the audit opens without:
   * it verifies the chains of sealed events without the key and reports their contents unchecked.
   */
  readonly keyCheck?: boolean;
  /**
   * While writing, copy the WAL into the file (a PASSIVE checkpoint) at most this often, so few
   * commits live only in the WAL. Default 5000 ms.
   */
  readonly checkpointEveryMs?: number;
}

/** Options of a read-only open: where the keys come from, and whether to check them. */
export type LibsqlReaderOptions = Pick<LibsqlJournalOptions, "busyTimeoutMs" | "env" | "keyCheck"> & {
  /**
   * SQLite's page cache for this connection, in KiB (default 32 MiB, as the writer's). A reader that
   * reads the log once from end to end (the audit's worker) gains nothing from a large one.
   */
  readonly cacheKib?: number;
};
