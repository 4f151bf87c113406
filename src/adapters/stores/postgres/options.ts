// What opening a PostgreSQL journal takes, apart from the module that needs the driver: the public
// types reach these without reaching `pg`, an optional peer dependency.

export interface ConnectRetry {
  /** Connection attempts before giving up. Default 5. */
  readonly attempts?: number;
  /** Wait after the first failed attempt; doubles after each. Default 200 ms. */
  readonly initialDelayMs?: number;
}

export interface PostgresJournalOptions {
  /** The schema holding the journal's tables; else the URL's `?schema=`, else `holdfast`. */
  readonly schema?: string;
  /** Connections in the pool. Default 4: one committer, the rest for reads and claims. */
  readonly poolSize?: number;
  readonly retry?: ConnectRetry;
  /** Called inside the group commit, between the batch's writes and COMMIT (tests). */
  readonly onBeforeCommit?: () => void | Promise<void>;
  /**
   * Called when a batch decided in memory failed on a statement and is run again request by
   * request, with what failed (tests, and a place to count how often it happens).
   */
  readonly onBatchRerun?: (cause: unknown) => void;
  /**
   * The server ends a session idle inside a transaction for this long (default 10 000 ms), so a
   * worker paused mid-commit (SIGSTOP, a long GC) cannot hold the append lock for everyone.
   */
  readonly idleInTransactionMs?: number;
  /**
   * How long an append whose COMMIT got no answer (the connection died after sending it) is read
   * back for before its callers hear "may or may not have been written" (decision 0068). Default
   * 30 000 ms: longer than the server's idle-in-transaction timeout, after which a transaction
   * whose client vanished before COMMIT is rolled back.
   */
  readonly commitReadBackMs?: number;
  /** Told what each read-back of a lost commit found (tests, and a place to count them). */
  readonly onLostCommit?: (committed: boolean | "partly" | "unknown") => void;
  /** Where the payload keys are read from (default `process.env`); see src/adapters/keys.ts. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Check at open that the keys read this journal (default true; the audit opens without). */
  readonly keyCheck?: boolean;
  /**
   * Open for reading only: no migration (the schema must hold this version's journal), and every
   * connection's transactions are read-only (`default_transaction_read_only`).
   */
  readonly readOnly?: boolean;
}
